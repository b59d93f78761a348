import Foundation
import RoomKitProtocol
import XCTest

/// PROTOCOL.md §6: resume with and without recovery.
final class ResumeTests: ServerTestCase {
    private let snapshotKeys = ["state", "members", "streams", "extraInfo"]

    func testResume_withRecovery_replaysMissedEventsInOrderBeforeNewerOnes() throws {
        let server = try startServer()
        let (away, login) = try server.join("r1", user: "u1")
        let (other, _) = try server.join("r1", user: "u2")
        try away.waitFor("userUpdate", room: "r1")
        try away.close()
        _ = try away.waitForClose()
        try other.ok("setState", room: "r1", ["patch": ["globalState": ["a": 1]]])
        try other.ok("magix", room: "r1", ["event": "wave", "payload": ["n": 1]])
        try other.ok("setMemberState", room: "r1", ["memberState": ["pen": "red"]])
        try other.ok("setExtraInfo", room: "r1", ["key": "topic", "value": "maths"])
        try other.ok("publishStream", room: "r1", ["stream": ["id": "cam"]])
        try other.ok("magix", room: "r1", ["event": "private", "payload": 0, "to": ["u2"]])

        let back = try server.connect()
        let resumed = try back.login("r1", token: makeToken(user: "u1"), user: "u1",
                                     resume: (try XCTUnwrap(login.string("session")), 2))
        XCTAssertEqual(resumed["ok"], true)
        XCTAssertEqual(resumed["recovered"], true)
        XCTAssertEqual(resumed.int("seq"), 8)
        XCTAssertEqual(resumed.string("session"), login.string("session"))
        XCTAssertEqual(resumed.int("memberId"), login.int("memberId"))
        for key in snapshotKeys { XCTAssertNil(resumed[key], "a recovered reply omits \(key)") }
        let newer = try other.ok("setState", room: "r1", ["patch": ["globalState": ["b": 2]]]).int("seq")
        XCTAssertEqual(newer, 9)
        try back.waitFor("state", room: "r1") { $0.int("seq") == 9 }
        let pushes = try back.history().filter { $0.op != "reply" && $0.int("seq") != nil }
        // 8 (magix to u2 only) is not for u1: a gap, not a loss.
        XCTAssertEqual(pushes.map { $0.int("seq") }, [3, 4, 5, 6, 7, 9])
        XCTAssertEqual(pushes.map { $0.op }, ["state", "magix", "memberState", "extraInfo", "streamUpdate", "state"])
        XCTAssertEqual(pushes[0]["patch"], ["globalState": ["a": 1]])
    }

    func testResume_replayIncludesTheSessionsOwnEvents() throws {
        let server = try startServer()
        let (client, login) = try server.join("r1", user: "u1")
        let memberId = try XCTUnwrap(login.int("memberId"))
        let seq = try XCTUnwrap(client.ok("setState", room: "r1", ["patch": ["globalState": ["mine": true]]]).int("seq"))
        try client.ok("magix", room: "r1", ["event": "own", "payload": 1])
        try client.close()
        _ = try client.waitForClose()
        let back = try server.connect()
        let resumed = try back.login("r1", token: makeToken(user: "u1"), user: "u1",
                                     resume: (try XCTUnwrap(login.string("session")), seq - 1))
        XCTAssertEqual(resumed["recovered"], true)
        let state = try back.waitFor("state", room: "r1")
        XCTAssertEqual(state.int("seq"), seq)
        XCTAssertEqual(state.int("from"), memberId, "its own event, so it can settle a lost reply")
        let magix = try back.waitFor("magix", room: "r1")
        XCTAssertEqual(magix.int("from"), memberId)
    }

    func testResume_atCurrentSeq_recoversWithNothingToReplay() throws {
        let server = try startServer()
        let (client, login) = try server.join("r1", user: "u1")
        try client.close()
        _ = try client.waitForClose()
        let back = try server.connect()
        let resumed = try back.login("r1", token: makeToken(user: "u1"), user: "u1",
                                     resume: (try XCTUnwrap(login.string("session")), 1))
        XCTAssertEqual(resumed["recovered"], true)
        XCTAssertEqual(resumed.int("seq"), 1)
        try back.expectNothing(for: 0.1)
    }

    func testResume_pastTheRecoveryBuffer_getsFreshSnapshot() throws {
        let server = try startServer {
            $0.recoveryEvents = 2
            $0.recoveryWindow = .zero
        }
        let (away, login) = try server.join("r1", user: "u1")
        let (other, _) = try server.join("r1", user: "u2")
        try away.close()
        _ = try away.waitForClose()
        for n in 0..<5 {
            Thread.sleep(forTimeInterval: 0.005)
            try other.ok("setState", room: "r1", ["patch": ["globalState": ["n": .int(Int64(n))]]])
        }
        try other.ok("setExtraInfo", room: "r1", ["key": "k", "value": "v"])
        let back = try server.connect()
        let resumed = try back.login("r1", token: makeToken(user: "u1"), user: "u1",
                                     resume: (try XCTUnwrap(login.string("session")), 1))
        XCTAssertEqual(resumed["ok"], true)
        XCTAssertEqual(resumed["recovered"], false)
        XCTAssertEqual(resumed.string("session"), login.string("session"), "still the same session")
        XCTAssertEqual(resumed.int("memberId"), login.int("memberId"))
        XCTAssertEqual(resumed.int("seq"), 8)
        XCTAssertEqual(resumed["state"]?["globalState"], ["n": 4])
        XCTAssertEqual(resumed.array("members").compactMap { $0.string("userId") }, ["u1", "u2"])
        XCTAssertEqual(resumed["extraInfo"], ["k": "v"])
        XCTAssertEqual(resumed["streams"], [])
        try back.expectNothing(for: 0.1)
    }

    func testResume_withSeqAheadOfTheRoom_getsFreshSnapshot() throws {
        let server = try startServer()
        let (client, login) = try server.join("r1", user: "u1")
        try client.close()
        _ = try client.waitForClose()
        let back = try server.connect()
        let resumed = try back.login("r1", token: makeToken(user: "u1"), user: "u1",
                                     resume: (try XCTUnwrap(login.string("session")), 999))
        XCTAssertEqual(resumed["recovered"], false)
        XCTAssertEqual(resumed.string("session"), login.string("session"))
        for key in snapshotKeys { XCTAssertNotNil(resumed[key], key) }
    }

    func testResume_ofUnknownSession_isAFreshLogin() throws {
        let server = try startServer()
        let (other, _) = try server.join("r1", user: "u2")
        let client = try server.connect()
        let reply = try client.login("r1", token: makeToken(user: "u1"), user: "u1", resume: ("s-feedbeef", 1))
        XCTAssertEqual(reply["ok"], true)
        XCTAssertNotEqual(reply.string("session"), "s-feedbeef")
        XCTAssertEqual(reply["recovered"], false)
        XCTAssertEqual(reply.int("memberId"), 2)
        for key in snapshotKeys { XCTAssertNotNil(reply[key], key) }
        XCTAssertEqual(try other.waitFor("userUpdate", room: "r1").string("type"), "add")
    }

    func testResume_ofAnotherUsersSession_isAFreshLoginAndLeavesThatSessionAlone() throws {
        let server = try startServer()
        let (victim, victimLogin) = try server.join("r1", user: "u1")
        let intruder = try server.connect()
        let reply = try intruder.login("r1", token: makeToken(user: "u2"), user: "u2",
                                       resume: (try XCTUnwrap(victimLogin.string("session")), 1))
        XCTAssertEqual(reply["ok"], true)
        XCTAssertNotEqual(reply.string("session"), victimLogin.string("session"))
        XCTAssertNotEqual(reply.int("memberId"), victimLogin.int("memberId"))
        XCTAssertEqual(try victim.waitFor("userUpdate", room: "r1").string("type"), "add")
        XCTAssertNotNil(try victim.ok("setState", room: "r1", ["patch": ["globalState": ["ok": true]]]).int("seq"))
        XCTAssertEqual(try intruder.waitFor("state", room: "r1").int("from"), victimLogin.int("memberId"))
    }

    func testResume_afterSessionRetention_isAFreshLogin() throws {
        let server = try startServer {
            $0.heartbeatTimeout = .milliseconds(300)
            $0.heartbeatInterval = .milliseconds(100)
            $0.sessionRetention = .milliseconds(500)
        }
        let (client, login) = try server.join("r1", user: "u1")
        try client.close()
        _ = try client.waitForClose()
        Thread.sleep(forTimeInterval: 0.8)
        let back = try server.connect()
        let reply = try back.login("r1", token: makeToken(user: "u1"), user: "u1",
                                   resume: (try XCTUnwrap(login.string("session")), 1))
        XCTAssertEqual(reply["ok"], true)
        XCTAssertNotEqual(reply.string("session"), login.string("session"))
        XCTAssertEqual(reply["recovered"], false)
        XCTAssertEqual(reply.int("memberId"), 2)
    }

    func testResume_whileOldConnectionStillAttached_movesTheSession() throws {
        let server = try startServer()
        let (old, login) = try server.join("r1", user: "u1")
        let (other, _) = try server.join("r1", user: "u2")
        try old.waitFor("userUpdate", room: "r1")
        let fresh = try server.connect()
        let resumed = try fresh.login("r1", token: makeToken(user: "u1"), user: "u1",
                                      resume: (try XCTUnwrap(login.string("session")), 2))
        XCTAssertEqual(resumed["recovered"], true)
        XCTAssertEqual(resumed.string("session"), login.string("session"))
        try other.expectNothing(for: 0.1)
        try other.ok("setState", room: "r1", ["patch": ["globalState": ["x": 1]]])
        try fresh.waitFor("state", room: "r1")
        try old.expectNothing(for: 0.1)
        XCTAssertEqual(try old.failure("setState", room: "r1", ["patch": ["globalState": ["x": 2]]]), 1_009_005)
    }

    /// Detaches u1's session in r1 after `events` more events by u2; returns u1's login.
    private func detachThenAppend(_ server: ServerHarness, events: Int) throws -> JSON {
        let (away, login) = try server.join("r1", user: "u1")
        let (other, _) = try server.join("r1", user: "u2")
        try away.close()
        _ = try away.waitForClose()
        var last: Int64 = 0
        for n in 0..<events {
            last = try other.sendRequest("setMemberState", room: "r1", ["memberState": ["n": .int(Int64(n))]])
        }
        XCTAssertEqual(try other.reply(to: last)["ok"], true)
        return login
    }

    func testRecoveryBuffer_keepsAtLeastTheLast1000Events() throws {
        let server = try startServer {
            $0.recoveryWindow = .zero  // only the count keeps events here
            $0.rateLimitBurst = 5000
        }
        let login = try detachThenAppend(server, events: 1100)  // the room is at seq 1102
        let session = try XCTUnwrap(login.string("session"))
        let tooOld = try server.connect().login("r1", token: makeToken(user: "u1"), user: "u1", resume: (session, 100))
        XCTAssertEqual(tooOld["recovered"], false, "seq 101 is no longer held")
        let back = try server.connect()
        let resumed = try back.login("r1", token: makeToken(user: "u1"), user: "u1", resume: (session, 102))
        XCTAssertEqual(resumed["recovered"], true, "the last 1000 events (103...1102) are held")
        let replay = try back.waitForPushes(1000, room: "r1")
        XCTAssertEqual(replay.first?.int("seq"), 103)
        XCTAssertEqual(replay.last?.int("seq"), 1102)
    }

    func testRecoveryBuffer_keepsEveryEventOfTheRecoveryWindow() throws {
        let server = try startServer {
            $0.recoveryEvents = 2
            $0.recoveryWindow = .seconds(60)
        }
        let login = try detachThenAppend(server, events: 20)
        let back = try server.connect()
        let resumed = try back.login("r1", token: makeToken(user: "u1"), user: "u1",
                                     resume: (try XCTUnwrap(login.string("session")), 2))
        XCTAssertEqual(resumed["recovered"], true, "more than recoveryEvents, but all within the window")
        XCTAssertEqual(try back.waitForPushes(20, room: "r1").map { $0.int("seq") }, Array(3...22).map { Int64($0) })
    }
}
