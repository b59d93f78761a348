import Foundation
import RoomKitProtocol
@testable import RoomKitServer
import RoomKitSQLite
import XCTest

/// PROTOCOL.md §3 code 1009500 and §10 "stored durably before any member
/// receives it": an event the store refuses is neither applied nor pushed.
final class StorageFailureTests: ServerTestCase {
    func testEventTheStoreRefuses_replies1009500_andReachesNobody() throws {
        let server = try startServer()
        let (writer, _) = try server.join("r1", user: "u1")
        let (watcher, _) = try server.join("r1", user: "u2")
        try writer.waitFor("userUpdate", room: "r1")
        // A second connection to the server's database makes every event insert fail.
        let path = (server.dataDirectory as NSString).appendingPathComponent("rooms.sqlite")
        let sabotage = try SQLiteDatabase(path: path)
        defer { sabotage.close() }
        try sabotage.execute("CREATE TRIGGER refuse BEFORE INSERT ON events BEGIN SELECT RAISE(ABORT, 'disk on fire'); END;")
        XCTAssertEqual(try writer.failure("setState", room: "r1", ["patch": ["globalState": ["lost": true]]]), 1_009_500)
        XCTAssertEqual(try writer.failure("magix", room: "r1", ["event": "lost", "payload": 1]), 1_009_500)
        try watcher.expectNothing(for: 0.1)
        try sabotage.execute("DROP TRIGGER refuse")
        let reply = try writer.ok("setState", room: "r1", ["patch": ["globalState": ["kept": true]]])
        XCTAssertEqual(reply.int("seq"), 3, "the refused events took no seq")
        XCTAssertEqual(try watcher.waitFor("state", room: "r1").int("seq"), 3)
        let (_, late) = try server.join("r1", user: "u3")
        XCTAssertEqual(late["state"]?["globalState"], ["kept": true], "the refused patch was not applied")
    }
}
