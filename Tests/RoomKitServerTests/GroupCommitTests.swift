import Foundation
import RoomKitProtocol
@testable import RoomKitServer
import XCTest

/// Group commit (RoomServer+Commit.swift): the events of one loop turn share
/// one transaction, and nothing the turn produced is sent before it commits.
/// When the commit fails, every request of the turn that wrote is answered
/// 1009500, its pushes reach nobody, and memory is back to what is stored.
final class GroupCommitTests: ServerTestCase {
    /// Makes the server's next commit fail, as a full disk would.
    private func failNextCommit(_ server: ServerHarness) throws {
        try server.loop.runAndWait {
            server.server.store.failNextCommit = StorageError(code: 13, path: "rooms.sqlite", context: "COMMIT", message: "database or disk is full")
        }
    }

    func testFailedCommit_answersTheWrite1009500_dropsItsPush_andTakesNoSeq() throws {
        let server = try startServer()
        let (writer, _) = try server.join("r1", user: "u1")
        let (watcher, _) = try server.join("r1", user: "u2")
        try writer.waitFor("userUpdate", room: "r1")
        XCTAssertEqual(try writer.ok("setState", room: "r1", ["patch": ["globalState": ["before": true]]]).int("seq"), 3)
        XCTAssertEqual(try watcher.waitFor("state", room: "r1").int("seq"), 3)

        try failNextCommit(server)
        XCTAssertEqual(try writer.failure("setState", room: "r1", ["patch": ["globalState": ["lost": true]]]), 1_009_500)
        try watcher.expectNothing(for: 0.2)

        // Still logged in (the session was re-attached after the reload), and
        // the lost event took no seq.
        XCTAssertEqual(try writer.ok("setState", room: "r1", ["patch": ["globalState": ["kept": true]]]).int("seq"), 4)
        XCTAssertEqual(try watcher.waitFor("state", room: "r1").int("seq"), 4)
        let (_, late) = try server.join("r1", user: "u3")
        XCTAssertEqual(late["state"]?["globalState"], ["before": true, "kept": true], "the lost patch is not in memory")
    }

    /// Batching connections keep the turn's messages in their batch until
    /// the commit (PushBatcher.swift): a failed commit must still turn the
    /// writer's reply into 1009500 and drop the push, for both of them.
    func testFailedCommit_withBatchingConnections_answersTheWrite1009500_andDropsItsPush() throws {
        let server = try startServer()
        func batchingMember(_ user: String) throws -> RawClient {
            let client = try server.connect(hello: false)
            XCTAssertEqual(try client.helloBatched()["batch"], true)
            let reply = try client.login("r1", token: makeToken(user: user, room: "r1"), user: user)
            XCTAssertEqual(reply["ok"], true, "login of \(user): \(reply)")
            return client
        }
        let writer = try batchingMember("u1")
        let watcher = try batchingMember("u2")
        try writer.waitFor("userUpdate", room: "r1")
        XCTAssertEqual(try writer.ok("magix", room: "r1", ["event": "before"]).int("seq"), 3)
        XCTAssertEqual(try watcher.waitFor("magix", room: "r1").int("seq"), 3)

        try failNextCommit(server)
        XCTAssertEqual(try writer.failure("magix", room: "r1", ["event": "lost"]), 1_009_500)
        try watcher.expectNothing(for: 0.2)
        try writer.expectNothing("magix", for: 0.1)

        XCTAssertEqual(try writer.ok("magix", room: "r1", ["event": "kept"]).int("seq"), 4, "the lost event took no seq")
        let kept = try watcher.waitFor("magix", room: "r1")
        XCTAssertEqual(kept.int("seq"), 4)
        XCTAssertEqual(kept["event"], "kept")
    }

    func testFailedCommit_ofALogin_refusesIt_andLeavesNoGhostMember() throws {
        let server = try startServer()
        let (first, _) = try server.join("r1", user: "u1")
        let second = try server.connect()
        try failNextCommit(server)
        let refused = try second.login("r1", token: makeToken(user: "u2", room: "r1"), user: "u2")
        XCTAssertEqual(refused["ok"], false, "\(refused)")
        XCTAssertEqual(refused.code, 1_009_500)
        try first.expectNothing("userUpdate", for: 0.2)

        // The refused login left nothing behind: logging in again works, and
        // the room has exactly the two members.
        let accepted = try second.login("r1", token: makeToken(user: "u2", room: "r1"), user: "u2")
        XCTAssertEqual(accepted["ok"], true, "\(accepted)")
        XCTAssertEqual(accepted["members"]?.arrayValue?.count, 2, "\(accepted)")
        XCTAssertEqual(try first.waitFor("userUpdate", room: "r1").int("seq"), 2, "the refused login took no seq")
    }

    func testPipelinedWrites_eachGetTheirOwnSeq_andEveryPushArrivesOnceInOrder() throws {
        let server = try startServer { $0.rateLimitBurst = 10_000 }
        let (writer, _) = try server.join("r1", user: "u1")
        let (watcher, _) = try server.join("r1", user: "u2")
        try writer.waitFor("userUpdate", room: "r1")
        // Sent back to back, so many land in the same loop turn (one transaction).
        let count = 500
        var ids: [Int64] = []
        for index in 0..<count {
            ids.append(try writer.sendRequest("magix", room: "r1", ["event": "n", "payload": .int(Int64(index))]))
        }
        var seqs: [Int64] = []
        for id in ids {
            let reply = try writer.reply(to: id)
            XCTAssertEqual(reply["ok"], true, "\(reply)")
            seqs.append(reply.int("seq") ?? -1)
        }
        XCTAssertEqual(seqs, Array(3...Int64(count + 2)), "one seq per write, in request order")
        let pushes = try watcher.waitForPushes(count, room: "r1")
        XCTAssertEqual(pushes.count, count)
        XCTAssertEqual(pushes.map { $0.int("seq") ?? -1 }, seqs)
        XCTAssertEqual(pushes.map { $0["payload"]?.int64Value ?? -1 }, (0..<count).map(Int64.init))
        try watcher.expectNothing("magix", for: 0.2)

        // All of them are stored: a restart replays them to a late reader.
        try server.restart()
        let (late, reply) = try server.join("r1", user: "u3")
        _ = late
        XCTAssertEqual(reply.int("seq"), Int64(count + 2 + 1), "the events survived the restart, plus u3's join")
    }
}
