import Foundation
import RoomKitProtocol
@testable import RoomKitServer
import XCTest

/// roomd's store never checkpoints inside a commit (auto-checkpoint is off);
/// a thread of its own copies the WAL into the database. Observable from the
/// database file alone: without the WAL, it must hold what was committed.
final class CheckpointTests: XCTestCase {
    func testCommittedEventsReachTheDatabaseFileThroughTheBackgroundCheckpointer() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("ckpt-\(UUID().uuidString)").path
        let copy = directory + "-copy"
        defer {
            try? FileManager.default.removeItem(atPath: directory)
            try? FileManager.default.removeItem(atPath: copy)
        }
        let store = try RoomStore(directory: directory, checkpointInterval: .milliseconds(20))
        try store.createRoom("r1", created: 1, snapshotBody: [:])
        for seq in Int64(1)...200 {
            try store.append(StoredEvent(room: "r1", seq: seq, ts: seq, push: Array(#"{"op":"magix","n":\#(seq)}"#.utf8),
                                         mutation: nil, recipients: nil))
        }
        try store.commit()  // group commit: roomd commits the turn's transaction at the end of each loop turn
        // Wait until a checkpoint has moved everything out of the WAL.
        let database = directory + "/rooms.sqlite"
        let deadline = Date().addingTimeInterval(5)
        var copied: [StoredEvent] = []
        while Date() < deadline {
            usleep(50_000)
            try? FileManager.default.removeItem(atPath: copy)
            try FileManager.default.createDirectory(atPath: copy, withIntermediateDirectories: true)
            try FileManager.default.copyItem(atPath: database, toPath: copy + "/rooms.sqlite")  // no -wal, no -shm
            let alone = try RoomStore(directory: copy)
            copied = try alone.events(room: "r1", afterSeq: 0, throughSeq: 200)
            alone.close()
            if copied.count == 200 { break }
        }
        XCTAssertEqual(copied.count, 200, "the database file alone holds every committed event")
        XCTAssertEqual(copied.last.map { String(decoding: $0.push, as: UTF8.self) }, #"{"op":"magix","n":200}"#)
        XCTAssertEqual(store.checkpointFailures, 0)
        XCTAssertEqual(try store.integrityCheck(), "ok")
        store.close()
        store.close()  // idempotent
    }
}
