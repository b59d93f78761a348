import Foundation
import RoomKitProtocol
import XCTest

/// PROTOCOL.md §6 "Fence": roomd keeps the highest fence per (room, user),
/// durably, and refuses a lower one with 1009008 and the current fence,
/// kicking nobody.
final class FenceTests: ServerTestCase {
    private func fencedLogin(_ client: RawClient, _ room: String, user: String, fence: JSON,
                             resume: (session: String, seq: Int64)? = nil) throws -> JSON {
        var fields = RawClient.loginFields(token: makeToken(user: user), user: user, resume: resume)
        fields["fence"] = fence
        return try client.request("login", room: room, fields)
    }

    func testLowerFence_isRefused1009008WithCurrentFence_andKicksNobody() throws {
        let server = try startServer()
        let owner = try server.connect()
        XCTAssertEqual(try fencedLogin(owner, "r1", user: "bot", fence: 7)["ok"], true)
        let (watcher, _) = try server.join("r1", user: "u2")
        try owner.waitFor("userUpdate", room: "r1")
        let stale = try server.connect()
        let refused = try fencedLogin(stale, "r1", user: "bot", fence: 6)
        XCTAssertEqual(refused["ok"], false)
        XCTAssertEqual(refused.code, 1_009_008)
        XCTAssertEqual(refused.int("fence"), 7)
        // Nobody was kicked and nothing happened in the room.
        try owner.expectNothing(for: 0.2)
        try watcher.expectNothing(for: 0.1)
        XCTAssertNotNil(try owner.ok("setState", room: "r1", ["patch": ["globalState": ["a": 1]]]).int("seq"))
        // The refused connection is not in the room.
        XCTAssertEqual(try stale.failure("setState", room: "r1", ["patch": ["globalState": ["a": 2]]]), 1_009_005)
    }

    func testEqualOrHigherFence_proceedsUnderNewestWins() throws {
        let server = try startServer()
        let first = try server.connect()
        XCTAssertEqual(try fencedLogin(first, "r1", user: "bot", fence: 3)["ok"], true)
        let same = try server.connect()
        XCTAssertEqual(try fencedLogin(same, "r1", user: "bot", fence: 3)["ok"], true)
        XCTAssertEqual(try first.waitFor("kicked", room: "r1").code, 1_002_050)
        let higher = try server.connect()
        XCTAssertEqual(try fencedLogin(higher, "r1", user: "bot", fence: 9)["ok"], true)
        XCTAssertEqual(try same.waitFor("kicked", room: "r1").code, 1_002_050)
        // Fences are per (room, user): another room and another user start fresh.
        XCTAssertEqual(try fencedLogin(try server.connect(), "r2", user: "bot", fence: 1)["ok"], true)
        XCTAssertEqual(try fencedLogin(try server.connect(), "r1", user: "other", fence: 1)["ok"], true)
        // A login without a fence proceeds as today.
        let (plain, _) = try server.join("r1", user: "bot")
        XCTAssertEqual(try higher.waitFor("kicked", room: "r1").code, 1_002_050)
        XCTAssertTrue(try plain.isOpen())
        // ...and leaves the stored fence where it was.
        XCTAssertEqual(try fencedLogin(try server.connect(), "r1", user: "bot", fence: 8).int("fence"), 9)
    }

    func testResumeWithStaleFence_isRefused_theSuccessorKeepsTheRoom() throws {
        let server = try startServer()
        let paused = try server.connect()
        let login = try fencedLogin(paused, "r1", user: "bot", fence: 1)
        let session = try XCTUnwrap(login.string("session"))
        try paused.close()
        let successor = try server.connect()
        XCTAssertEqual(try fencedLogin(successor, "r1", user: "bot", fence: 2)["ok"], true)
        let back = try server.connect()
        let refused = try fencedLogin(back, "r1", user: "bot", fence: 1, resume: (session, login.int("seq") ?? 0))
        XCTAssertEqual(refused.code, 1_009_008)
        XCTAssertEqual(refused.int("fence"), 2)
        try successor.expectNothing(for: 0.2)
    }

    func testFence_survivesARestart() throws {
        let server = try startServer()
        XCTAssertEqual(try fencedLogin(try server.connect(), "r1", user: "bot", fence: 41)["ok"], true)
        try server.restart()
        let refused = try fencedLogin(try server.connect(), "r1", user: "bot", fence: 40)
        XCTAssertEqual(refused.code, 1_009_008)
        XCTAssertEqual(refused.int("fence"), 41)
    }

    func testBadFence_isRejectedByTheDecoder() throws {
        let server = try startServer()
        let client = try server.connect()
        XCTAssertEqual(try fencedLogin(client, "r1", user: "bot", fence: -1).code, 1_009_006)
        XCTAssertEqual(try fencedLogin(client, "r1", user: "bot", fence: "3").code, 1_009_001)
        XCTAssertEqual(try fencedLogin(client, "r1", user: "bot", fence: 1.5).code, 1_009_006)
    }
}
