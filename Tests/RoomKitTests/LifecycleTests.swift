import Foundation
import RoomKit
import RoomKitProtocol
import RoomKitTokens
import RoomKitTestSupport
import XCTest

/// PROTOCOL.md §11 rows against a real roomd on 127.0.0.1.
final class LifecycleTests: XCTestCase {
    func testLoginThenLogout_reportsEachReasonAndPhaseInOrder() async throws {
        let harness = try EngineHarness()
        let events = EventRecorder()
        let host = try harness.host(recorder: events)
        let room = try await host.loginRoom("lobby", user: harness.user("a"), token: harness.token("a"))
        XCTAssertEqual(room.phase, .connected)
        XCTAssertEqual(room.reason, .logined)
        XCTAssertNotNil(room.memberId)
        XCTAssertEqual(room.roomMembers.map(\.userId), ["a"])
        try await host.logoutRoom("lobby")
        XCTAssertEqual(events.reasons("lobby"), ["LOGINING 0", "LOGINED 0", "LOGOUT 0"])
        XCTAssertEqual(events.phases("lobby"), [.connecting, .connected, .disconnecting, .disconnected])
        XCTAssertEqual(room.phase, .disconnected)
        try await harness.close()
    }

    func testLogin_withABadToken_failsWith1002033() async throws {
        let harness = try EngineHarness()
        let events = EventRecorder()
        let host = try harness.host(recorder: events)
        do {
            try await host.loginRoom("lobby", user: harness.user("a"), token: harness.token("someone-else"))
            XCTFail("login must fail")
        } catch let error as RoomError {
            XCTAssertEqual(error.code, .tokenInvalid)
            XCTAssertEqual(error.reason, .loginFailed)
        }
        XCTAssertEqual(events.reasons("lobby"), ["LOGINING 0", "LOGIN_FAILED 1002033"])
        try await harness.close()
    }

    func testLogin_whenTheServerNeverAnswers_failsWith1002053() async throws {
        let harness = try EngineHarness()
        let events = EventRecorder()
        harness.proxy.setMode(.blackhole)
        let host = try harness.host(recorder: events) { $0.loginTimeout = .milliseconds(800) }
        let started = Date()
        do {
            try await host.loginRoom("lobby", user: harness.user("a"), token: harness.token("a"))
            XCTFail("login must time out")
        } catch let error as RoomError {
            XCTAssertEqual(error.code, .timedOut)
        }
        XCTAssertLessThan(Date().timeIntervalSince(started), 3)
        XCTAssertEqual(events.reasons("lobby"), ["LOGINING 0", "LOGIN_FAILED 1002053"])
        harness.proxy.setMode(.pass)
        try await harness.close()
    }

    /// A login that times out after it reached the server is withdrawn (a
    /// logout follows it on the same connection): the server may have made
    /// the session after the client stopped waiting, and a retry on that
    /// connection was refused with 1009007 ("already logged in").
    func testLogin_timedOutAfterReachingTheServer_isWithdrawn_soARetryOnTheSameConnectionLogsIn() async throws {
        let harness = try EngineHarness()
        let events = EventRecorder()
        let host = try harness.host(recorder: events) {
            $0.loginTimeout = .milliseconds(400)
            $0.livenessTimeout = .seconds(8)  // the connection outlives the 2 s round trips
        }
        // The connection is up before the latency starts: the slow login is sent at once.
        try await host.loginRoom("warm", user: harness.user("a"), token: harness.token("a"))
        harness.proxy.setFaults(.init(latency: .seconds(1)))
        do {
            try await host.loginRoom("lobby", user: harness.user("a"), token: harness.token("a"))
            XCTFail("the answer comes after 2 s: the login must time out")
        } catch let error as RoomError {
            XCTAssertEqual(error.code, .timedOut)
        }
        // The login, then the withdrawing logout, reach the server a second
        // after they left; their answers come back a second after that.
        try await Task.sleep(for: .milliseconds(1_500))
        harness.proxy.setFaults(.none)
        try await Task.sleep(for: .milliseconds(1_500))
        try await host.loginRoom("lobby", user: harness.user("a"), token: harness.token("a"))
        XCTAssertEqual(events.reasons("lobby"), ["LOGINING 0", "LOGIN_FAILED 1002053", "LOGINING 0", "LOGINED 0"])
        XCTAssertEqual(events.reasons("warm").last, "LOGINED 0", "the connection stayed up throughout")
        try await harness.close()
    }

    func testLogin_whileTheServerRefusesConnectionsAtItsLimit_keepsRetryingAndLogsInOnceASlotFrees() async throws {
        let harness = try EngineHarness { $0.maxConnections = 1 }
        let first = try harness.host(viaProxy: false)
        try await first.loginRoom("lobby", user: harness.user("a"), token: harness.token("a"))
        let events = EventRecorder()
        let second = try harness.host(viaProxy: false, recorder: events) { $0.loginTimeout = .seconds(10) }
        let (user, token) = (harness.user("b"), harness.token("b"))
        let login = Task { _ = try await second.loginRoom("lobby", user: user, token: token) }
        // The server answers each upgrade 503 (docs/PROTOCOL.md); the host backs off and tries again.
        let port = harness.server.port
        await eventually(5, "two refused upgrades") {
            let (_, metrics) = http(port, "GET", "/metrics")
            let prefix = #"roomd_connections_refused_total{limit="process"} "#
            let line = metrics.split(separator: "\n").first { $0.hasPrefix(prefix) }
            return line.flatMap { Int($0.dropFirst(prefix.count)) }.map { $0 >= 2 } ?? false
        }
        XCTAssertEqual(events.reasons("lobby"), ["LOGINING 0"], "a refused connection is not a failed login")
        try await first.logoutRoom("lobby")
        try await login.value
        XCTAssertEqual(second.room("lobby")?.phase, .connected)
        XCTAssertEqual(events.reasons("lobby"), ["LOGINING 0", "LOGINED 0"])
        try await harness.close()
    }

    func testLogout_ofARoomNotLoggedIn_reportsLogoutFailed1002002() async throws {
        let harness = try EngineHarness()
        let events = EventRecorder()
        let host = try harness.host(recorder: events)
        do {
            try await host.logoutRoom("nowhere")
            XCTFail("logout must fail")
        } catch let error as RoomError {
            XCTAssertEqual(error.code, .logoutNotLoggedIn)
            XCTAssertEqual(error.reason, .logoutFailed)
        }
        XCTAssertEqual(events.reasons("nowhere"), ["LOGOUT_FAILED 1002002"])
        try await harness.close()
    }

    func testLogoutOfAllRooms_givesEveryRoomLogoutAndOthersSeeTheDeletesAtOnce() async throws {
        let harness = try EngineHarness()
        let events = EventRecorder()
        let watcherEvents = EventRecorder()
        let host = try harness.host(recorder: events)
        let watcher = try harness.host(viaProxy: false, recorder: watcherEvents)
        let rooms = ["r1", "r2", "r3"]
        for room in rooms {
            try await watcher.loginRoom(room, user: harness.user("w"), token: harness.token("w"))
            try await host.loginRoom(room, user: harness.user("a"), token: harness.token("a"))
        }
        let left = await host.logoutRoom()
        XCTAssertEqual(left, rooms)
        for room in rooms {
            XCTAssertEqual(events.reasons(room).last, "LOGOUT 0")
        }
        // Well inside the 1.5 s heartbeat timeout: the deletes come from the logout itself.
        await eventually(1, "watcher sees three deletes") {
            watcherEvents.count { if case .userUpdate(_, .delete, let users) = $0 { return users.map(\.userId) == ["a"] }; return false } == 3
        }
        try await harness.close()
    }

    func testSwitchRoom_reportsLogoutForTheOldRoomThenLoginingAndLogined() async throws {
        let harness = try EngineHarness()
        let events = EventRecorder()
        let host = try harness.host(recorder: events)
        try await host.loginRoom("from", user: harness.user("a"), token: harness.token("a"))
        let target = try await host.switchRoom(from: "from", to: "to", token: harness.token("a"))
        XCTAssertEqual(target.id, "to")
        let sequence = events.all.compactMap { event -> String? in
            if case .roomStateChanged(let room, let reason, _, _) = event { return "\(room):\(reason)" }
            return nil
        }
        XCTAssertEqual(sequence, ["from:LOGINING", "from:LOGINED", "from:LOGOUT", "to:LOGINING", "to:LOGINED"])
        try await harness.close()
    }

    func testDuplicateLogin_kicksTheOlderSessionWith1002050AndItDoesNotReconnect() async throws {
        let harness = try EngineHarness()
        let events = EventRecorder()
        final class Kicks: RoomDelegate, @unchecked Sendable { // guarded by lock
            let lock = NSLock(); var reasons: [String] = []
            func fireKickedWithReason(_ room: Room, code: ErrorCode, reason: String) {
                lock.withLock { reasons.append("\(code.rawValue)") }
            }
            var all: [String] { lock.withLock { reasons } }
        }
        let kicks = Kicks()
        let first = try harness.host(recorder: events)
        let second = try harness.host(viaProxy: false)
        try await first.loginRoom("lobby", user: harness.user("a"), token: harness.token("a"), delegate: kicks)
        try await second.loginRoom("lobby", user: harness.user("a"), token: harness.token("a"))
        await eventually(3, "KICK_OUT") { events.reasons("lobby").last == "KICK_OUT 1002050" }
        XCTAssertEqual(kicks.all, ["1002050"])
        try await Task.sleep(for: .milliseconds(500))
        XCTAssertEqual(events.reasons("lobby").last, "KICK_OUT 1002050", "no reconnect after a kick")
        XCTAssertEqual(first.room("lobby")?.phase, .disconnected)
        try await harness.close()
    }

    func testAdminKick_reportsKickOut1002055WithTheReason() async throws {
        let harness = try EngineHarness()
        let events = EventRecorder()
        let host = try harness.host(recorder: events)
        try await host.loginRoom("lobby", user: harness.user("a"), token: harness.token("a"))
        let answer = httpRequest(port: harness.server.port, "POST", "/v1/admin/rooms/lobby/kick",
                                 token: harness.token("ops", room: "lobby", role: .admin),
                                 body: #"{"user":"a","reason":"spam"}"#)
        XCTAssertTrue(answer.hasSuffix(#"{"kicked":1}"#), answer)
        // The kick's reason is raised right after KICK_OUT, in the same loop
        // call: wait for both (a check between the two raced, seen under ASan).
        let kicked = RoomEvent.kickedWithReason(room: "lobby", code: .kickedByAdmin, reason: "spam")
        await eventually(3, "KICK_OUT 1002055 and its reason") {
            events.reasons("lobby").last == "KICK_OUT 1002055" && events.all.contains(kicked)
        }
        XCTAssertEqual(events.reasons("lobby").last, "KICK_OUT 1002055")
        XCTAssertTrue(events.all.contains(kicked))
        try await harness.close()
    }

    func testUnrenewedToken_isKickedWith1002056AfterTokenWillExpire() async throws {
        let harness = try EngineHarness()
        let events = EventRecorder()
        let host = try harness.host(recorder: events)
        try await host.loginRoom("lobby", user: harness.user("a"), token: harness.token("a", ttl: 2))
        await eventually(6, "KICK_OUT 1002056") { events.reasons("lobby").last == "KICK_OUT 1002056" }
        XCTAssertEqual(events.count { if case .tokenWillExpire("lobby", _) = $0 { return true }; return false }, 1)
        try await harness.close()
    }

    func testTokenProvider_renewsOnTokenWillExpireAndTheSessionStays() async throws {
        let harness = try EngineHarness()
        let events = EventRecorder()
        let secret = harness.secret
        let provider = ClosureTokenProvider { room, user in
            let now = Int64(Date().timeIntervalSince1970)
            return TokenSigner(secret: secret).sign(TokenClaims(sub: user, room: room, role: .writer, exp: now + 3600, iat: now))
        }
        let host = try harness.host(recorder: events, tokenProvider: provider)
        try await host.loginRoom("lobby", user: harness.user("a"), token: harness.token("a", ttl: 2))
        await eventually(3, "tokenWillExpire") {
            events.count { if case .tokenWillExpire = $0 { return true }; return false } == 1
        }
        try await Task.sleep(for: .seconds(2.5))
        XCTAssertEqual(events.reasons("lobby").last, "LOGINED 0", "renewed in time: no kick")
        try await harness.close()
    }

    /// Issue 27 §4: a `tokenFile` nobody has updated yet hands back the token
    /// that is about to expire. The host must not renew with it (that looped
    /// with roomd's re-warning: 1,100 renewals in 5 s), but ask again with
    /// backoff and renew once, when a new token appears.
    func testTokenProvider_returningTheSameToken_isNotRenewedWith_andANewTokenIsRenewedOnce() async throws {
        let harness = try EngineHarness()  // a 1 s notice
        let events = EventRecorder()
        let expiring = harness.token("a", ttl: 3)
        let fresh = harness.token("a", ttl: 3600)
        let calls = LockedCounter()
        let provider = ClosureTokenProvider { _, _ in
            calls.increment()
            return calls.value <= 3 ? expiring : fresh
        }
        let host = try harness.host(recorder: events, tokenProvider: provider) { $0.tokenRecheckFirst = .milliseconds(100) }
        try await host.loginRoom("lobby", user: harness.user("a"), token: expiring)
        await eventually(5, "a new token asked for and renewed") { calls.value >= 4 }
        // Past the first token's exp: the session lives on the new token.
        try await Task.sleep(for: .seconds(3.2))
        XCTAssertEqual(events.reasons("lobby").last, "LOGINED 0", "renewed in time: no kick")
        XCTAssertEqual(calls.value, 4, "asked again with backoff until a new token came, then no more")
        let metrics = http(harness.server.port, "GET", "/metrics").1
        let renewals = metrics.split(separator: "\n")
            .first { $0.hasPrefix("roomd_request_duration_seconds_count{op=\"renewToken\"}") }
            .flatMap { Double($0.split(separator: " ").last ?? "") }
        XCTAssertEqual(renewals, 1, "one renewToken, with the new token; never with the expiring one")
        XCTAssertEqual(events.count { if case .tokenWillExpire = $0 { return true }; return false }, 1,
                       "one warning for the first token")
        XCTAssertEqual(events.count {
            if case .throwError("token", _, let message) = $0 { return message.contains("returned the token") }
            return false
        }, 1, "the same token is reported once, not per recheck")
        try await harness.close()
    }

    /// A recheck of the token provider that comes due after the room was
    /// left asks nothing and reports nothing (seen under a sanitizer: a
    /// "could not renew ... not logged in" error after a graceful LOGOUT).
    func testTokenRecheck_afterTheRoomWasLeft_asksNothing_andReportsNothing() async throws {
        let harness = try EngineHarness()  // a 1 s notice
        let events = EventRecorder()
        let expiring = harness.token("a", ttl: 3)
        let calls = LockedCounter()
        let provider = ClosureTokenProvider { _, _ in
            calls.increment()
            return expiring
        }
        let host = try harness.host(recorder: events, tokenProvider: provider) { $0.tokenRecheckFirst = .milliseconds(400) }
        try await host.loginRoom("lobby", user: harness.user("a"), token: expiring)
        await eventually(5, "the provider asked once") { calls.value == 1 }
        try await host.logoutRoom("lobby")
        try await Task.sleep(for: .seconds(1))  // past the recheck
        XCTAssertEqual(calls.value, 1, "no recheck once the room was left")
        XCTAssertEqual(events.count { if case .throwError = $0 { return true }; return false }, 1,
                       "only the same-token report: \(events.all)")
        try await harness.close()
    }

    func testRenewToken_withAReaderToken_makesTheSessionReadOnly_andABadTokenIsRejected() async throws {
        let harness = try EngineHarness()
        let events = EventRecorder()
        let host = try harness.host(recorder: events)
        let room = try await host.loginRoom("lobby", user: harness.user("a"), token: harness.token("a"))
        XCTAssertTrue(room.writable)
        do {
            try await host.renewToken("lobby", token: harness.token("mallory"))
            XCTFail("a token for another user must be rejected")
        } catch let error as RoomError {
            XCTAssertEqual(error.code, .tokenInvalid)
        }
        XCTAssertTrue(room.writable, "the old token stays")
        try await host.renewToken("lobby", token: harness.token("a", role: .reader))
        XCTAssertFalse(room.writable)
        XCTAssertEqual(events.all.last, .beingAbleToCommitChange(room: "lobby", writable: false))
        do {
            try await room.setGlobalState(["x": 1])
            XCTFail("a reader must not write")
        } catch let error as RoomError {
            XCTAssertEqual(error.code, .notPermitted)
        }
        try await harness.close()
    }

    func testReaderToken_reportsNotWritableThroughBeingAbleToCommitChange() async throws {
        let harness = try EngineHarness()
        let events = EventRecorder()
        let host = try harness.host(recorder: events)
        let room = try await host.loginRoom("lobby", user: harness.user("r"), token: harness.token("r", role: .reader))
        XCTAssertFalse(room.writable)
        XCTAssertTrue(events.all.contains(.beingAbleToCommitChange(room: "lobby", writable: false)))
        do {
            try await room.setWritable(true)
            XCTFail("a reader token cannot ask to write")
        } catch let error as RoomError {
            XCTAssertEqual(error.code, .notPermitted)
        }
        try await harness.close()
    }
}

