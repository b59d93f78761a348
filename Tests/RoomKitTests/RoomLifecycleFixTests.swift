import Foundation
import RoomKit
import RoomKitProtocol
import RoomKitTestSupport
import XCTest

/// Issue 20, items 7, 8, 9 and 16, in the engine: switchRoom checks the
/// target before leaving, RECONNECT_FAILED carries 1002053 with the server's
/// code as the cause, a login with no token reports LOGINING/LOGIN_FAILED,
/// and rooms never joined or no longer joined look it.
final class RoomLifecycleFixTests: XCTestCase {
    private func userUpdates(_ events: EventRecorder, _ type: UpdateType, _ user: String, in room: String) -> Int {
        events.count {
            if case .userUpdate(room, type, let users) = $0 { return users.contains { $0.userId == user } }
            return false
        }
    }

    /// Asserts that a switch away from `lobby` failed with `code` and left
    /// `lobby` exactly as it was: no LOGOUT reported, still connected, and
    /// the other members saw nobody leave.
    private func assertSwitchRefused(_ harness: EngineHarness, to target: String, token: String?, code: ErrorCode,
                                     host: RoomHost, events: EventRecorder, watcher: EventRecorder,
                                     line: UInt = #line) async {
        do {
            try await host.switchRoom(from: "lobby", to: target, token: token)
            XCTFail("switch to \(target) must fail", line: line)
        } catch let error as RoomError {
            XCTAssertEqual(error.code, code, line: line)
            XCTAssertEqual(error.reason, .loginFailed, line: line)
        } catch {
            XCTFail("unexpected \(error)", line: line)
        }
        XCTAssertEqual(events.reasons("lobby"), ["LOGINING 0", "LOGINED 0"], "the source was not left", line: line)
        XCTAssertEqual(host.room("lobby")?.phase, .connected, line: line)
        // A later action still works: the server has the session too.
        let seq = try? await host.room("lobby")?.dispatchMagixEvent("still-here", payload: 1)
        XCTAssertNotNil(seq, line: line)
        XCTAssertEqual(userUpdates(watcher, .delete, "a", in: "lobby"), 0, line: line)
    }

    func testSwitchRoom_toAnInvalidRoomID_failsWith1009006AndKeepsTheSourceJoined() async throws {
        let harness = try EngineHarness()
        let events = EventRecorder(), watcherEvents = EventRecorder()
        let host = try harness.host(recorder: events)
        let watcher = try harness.host(viaProxy: false, recorder: watcherEvents)
        try await watcher.loginRoom("lobby", user: harness.user("w"), token: harness.token("w"))
        try await host.loginRoom("lobby", user: harness.user("a"), token: harness.token("a"))
        await assertSwitchRefused(harness, to: "bad id", token: harness.token("a"), code: .invalidArgument,
                                  host: host, events: events, watcher: watcherEvents)
        try await harness.close()
    }

    func testSwitchRoom_toARoomAlreadyJoined_failsWith1009007AndKeepsTheSourceJoined() async throws {
        let harness = try EngineHarness()
        let events = EventRecorder(), watcherEvents = EventRecorder()
        let host = try harness.host(recorder: events)
        let watcher = try harness.host(viaProxy: false, recorder: watcherEvents)
        try await watcher.loginRoom("lobby", user: harness.user("w"), token: harness.token("w"))
        try await host.loginRoom("lobby", user: harness.user("a"), token: harness.token("a"))
        try await host.loginRoom("other", user: harness.user("a"), token: harness.token("a"))
        await assertSwitchRefused(harness, to: "other", token: harness.token("a"), code: .alreadyLoggedIn,
                                  host: host, events: events, watcher: watcherEvents)
        await assertSwitchRefused(harness, to: "lobby", token: harness.token("a"), code: .alreadyLoggedIn,
                                  host: host, events: events, watcher: watcherEvents)
        XCTAssertEqual(events.reasons("other"), ["LOGINING 0", "LOGINED 0"], "the target was not touched either")
        try await harness.close()
    }

    func testSwitchRoom_withNoTokenForTheTarget_failsWith1002033AndKeepsTheSourceJoined() async throws {
        let harness = try EngineHarness()
        let events = EventRecorder(), watcherEvents = EventRecorder()
        let host = try harness.host(recorder: events)  // no token provider
        let watcher = try harness.host(viaProxy: false, recorder: watcherEvents)
        try await watcher.loginRoom("lobby", user: harness.user("w"), token: harness.token("w"))
        try await host.loginRoom("lobby", user: harness.user("a"), token: harness.token("a"))
        await assertSwitchRefused(harness, to: "other", token: nil, code: .tokenInvalid,
                                  host: host, events: events, watcher: watcherEvents)
        XCTAssertNil(host.room("other"), "no login of the target was started")
        try await harness.close()
    }

    func testSwitchRoom_whenTheTargetsOwnLoginFails_theSourceStaysLeft() async throws {
        let harness = try EngineHarness()
        let events = EventRecorder(), watcherEvents = EventRecorder()
        let host = try harness.host(recorder: events)
        let watcher = try harness.host(viaProxy: false, recorder: watcherEvents)
        try await watcher.loginRoom("lobby", user: harness.user("w"), token: harness.token("w"))
        try await host.loginRoom("lobby", user: harness.user("a"), token: harness.token("a"))
        do {
            try await host.switchRoom(from: "lobby", to: "other", token: "not-a-jwt")
            XCTFail("the server refuses the token")
        } catch let error as RoomError {
            XCTAssertEqual(error.code, .tokenInvalid)
        }
        XCTAssertEqual(events.reasons("lobby"), ["LOGINING 0", "LOGINED 0", "LOGOUT 0"])
        XCTAssertEqual(events.reasons("other"), ["LOGINING 0", "LOGIN_FAILED 1002033"])
        await eventually(3, "others see the bot leave") { self.userUpdates(watcherEvents, .delete, "a", in: "lobby") == 1 }
        try await harness.close()
    }

    func testMachine_resumeRefusedForItsToken_endsReconnectFailed1002053_withTheServersCodeAsCause() {
        var m = RoomSessionMachine(loginTimeout: 30_000, reconnectWindow: 1_200_000)
        _ = m.loginRequested(now: 0, connectionReady: true)
        _ = m.loginSucceeded()
        _ = m.connectionLost(now: 2)
        _ = m.connectionReady()
        for refusal in [ErrorCode.tokenInvalid, .notPermitted] {
            var copy = m
            XCTAssertEqual(copy.loginFailed(refusal, "refused"),
                           .end(.failed(.reconnectFailed, .timedOut, cause: refusal, login: nil)))
            XCTAssertEqual(copy.state, .idle)
        }
    }

    func testMachine_loginImpossible_failsTheLoginWithItsCode_andSendsNothing() {
        var m = RoomSessionMachine(loginTimeout: 30_000, reconnectWindow: 1_200_000)
        XCTAssertEqual(m.loginImpossible(.tokenInvalid, "no token"),
                       .fail(RoomError(code: .tokenInvalid, message: "no token", reason: .loginFailed)))
        XCTAssertEqual(m.state, .idle)
    }

    func testMachine_loginWithdrawnBeforeItWentOut_thenLogout_endsAtOnceWithoutALogoutRequest() {
        var m = RoomSessionMachine(loginTimeout: 30_000, reconnectWindow: 1_200_000)
        _ = m.loginRequested(now: 0, connectionReady: true)
        m.loginWithdrawn()
        let action = m.logoutRequested(connectionReady: true)
        guard case .end(.loggedOut(abandonedLogin: _?)) = action else {
            return XCTFail("expected the login abandoned and the session logged out at once, got \(action)")
        }
        XCTAssertEqual(m.state, .idle)
    }

    func testReconnectFailed_whenTheServerRefusesTheResumesToken_reports1002053_andTheCauseInExtendedDataAndTheLog() async throws {
        final class States: RoomHostDelegate, @unchecked Sendable {  // @unchecked Sendable: guarded by lock
            let lock = NSLock()
            var seen: [(RoomReason, ErrorCode, [String: JSON])] = []
            func onRoomStateChanged(reason: RoomReason, errorCode: ErrorCode, extendedData: [String: JSON], roomID: String) {
                lock.withLock { seen.append((reason, errorCode, extendedData)) }
            }
            var all: [(RoomReason, ErrorCode, [String: JSON])] { lock.withLock { seen } }
        }
        let harness = try EngineHarness()
        let events = EventRecorder()
        let host = try harness.host(recorder: events)  // no provider: the resume reuses the login's token
        let states = States()
        host.add(delegate: states)
        // The token expires while the connection is down, so the resume is refused with 1002033.
        try await host.loginRoom("lobby", user: harness.user("a"), token: harness.token("a", ttl: 2))
        harness.proxy.setMode(.down)
        harness.proxy.cut()
        await eventually(3, "RECONNECTING") { events.reasons("lobby").last == "RECONNECTING 1002051" }
        try await Task.sleep(for: .seconds(2.5))
        harness.proxy.setMode(.pass)
        await eventually(5, "RECONNECT_FAILED") { events.reasons("lobby").last?.hasPrefix("RECONNECT_FAILED") == true }
        XCTAssertEqual(events.reasons("lobby"), ["LOGINING 0", "LOGINED 0", "RECONNECTING 1002051", "RECONNECT_FAILED 1002053"])
        let failed = events.all.compactMap { event -> RoomEvent? in
            if case .roomStateChanged(_, .reconnectFailed, _, _) = event { return event }
            return nil
        }
        XCTAssertEqual(failed.count, 1)
        XCTAssertEqual(failed.first?.logFields["cause"], 1_002_033, "the event-log line carries the server's code")
        XCTAssertEqual(failed.first?.logFields["errorCode"], 1_002_053)
        await eventually(2, "delegate heard it") { states.all.contains { $0.0 == .reconnectFailed } }
        let delivered = states.all.filter { $0.0 == .reconnectFailed }
        XCTAssertEqual(delivered.count, 1)
        XCTAssertEqual(delivered.first?.1, .timedOut)
        XCTAssertEqual(delivered.first?.2, ["cause": 1_002_033])
        try await harness.close()
    }

    func testLogin_withNoTokenAvailable_reportsLoginingThenLoginFailed1002033() async throws {
        let harness = try EngineHarness()
        let events = EventRecorder()
        let host = try harness.host(recorder: events)
        let refusing = ClosureTokenProvider { room, _ in
            throw RoomError(code: .tokenInvalid, message: "no token for \(room)")
        }
        for provider in [nil, refusing] as [(any TokenProvider)?] {
            do {
                try await host.loginRoom("lobby", user: harness.user("a"), tokenProvider: provider)
                XCTFail("no token: the login must fail")
            } catch let error as RoomError {
                XCTAssertEqual(error.code, .tokenInvalid)
                XCTAssertEqual(error.reason, .loginFailed)
            }
        }
        XCTAssertEqual(events.reasons("lobby"), ["LOGINING 0", "LOGIN_FAILED 1002033", "LOGINING 0", "LOGIN_FAILED 1002033"])
        XCTAssertEqual(events.phases("lobby"), [.connecting, .disconnected, .connecting, .disconnected])
        XCTAssertEqual(host.room("lobby")?.reason, .loginFailed)
        // The room can still be joined once a token is given.
        try await host.loginRoom("lobby", user: harness.user("a"), token: harness.token("a"))
        XCTAssertEqual(host.room("lobby")?.reason, .logined)
        try await harness.close()
    }

    func testLogout_ofARoomNeverJoined_leavesNoRoomBehind() async throws {
        let harness = try EngineHarness()
        let events = EventRecorder()
        let host = try harness.host(recorder: events)
        for room in ["nowhere", "ghost", "nowhere"] {
            try? await host.logoutRoom(room)
        }
        XCTAssertEqual(events.reasons("nowhere"), ["LOGOUT_FAILED 1002002", "LOGOUT_FAILED 1002002"])
        XCTAssertEqual(host.allRooms.count, 0, "logouts of unknown rooms make no room handles")
        XCTAssertNil(host.room("nowhere"))
        try await harness.close()
    }

    func testKick_makesTheRoomNotWritable_andSaysSoOnce() async throws {
        let harness = try EngineHarness()
        let events = EventRecorder()
        let host = try harness.host(recorder: events)
        let room = try await host.loginRoom("lobby", user: harness.user("a"), token: harness.token("a"))
        XCTAssertTrue(room.writable)
        let answer = httpRequest(port: harness.server.port, "POST", "/v1/admin/rooms/lobby/kick",
                                 token: harness.token("ops", room: "lobby", role: .admin), body: #"{"user":"a","reason":"spam"}"#)
        XCTAssertTrue(answer.hasSuffix(#"{"kicked":1}"#), answer)
        await eventually(3, "KICK_OUT") { events.reasons("lobby").last == "KICK_OUT 1002055" }
        XCTAssertFalse(room.writable)
        XCTAssertFalse(room.content.writable)
        let changes = events.all.compactMap { event -> Bool? in
            if case .beingAbleToCommitChange("lobby", let writable) = event { return writable }
            return nil
        }
        XCTAssertEqual(changes, [true, false])
        try await harness.close()
    }

    func testLogout_whileTheLoginIsStillQueued_cancelsItWithoutTheServerSeeingIt() async throws {
        let harness = try EngineHarness()
        let events = EventRecorder(), watcherEvents = EventRecorder()
        // Pacing of one request per 2 s: the hello and the first login use the burst.
        let host = try harness.host(recorder: events) {
            $0.requestsPerSecond = 0.5
            $0.requestBurst = 2
            $0.adoptsAdvertisedPacing = false
        }
        let watcher = try harness.host(viaProxy: false, recorder: watcherEvents)
        try await watcher.loginRoom("queued", user: harness.user("w"), token: harness.token("w"))
        try await host.loginRoom("first", user: harness.user("a"), token: harness.token("a"))
        let (user, token) = (harness.user("a"), harness.token("a"))
        let queued = Task { _ = try await host.loginRoom("queued", user: user, token: token) }
        await eventually(3, "LOGINING") { events.reasons("queued") == ["LOGINING 0"] }
        try await host.logoutRoom("queued")
        do {
            try await queued.value
            XCTFail("the login was cancelled")
        } catch let error as RoomError {
            XCTAssertEqual(error.reason, .logout)
        }
        XCTAssertEqual(events.reasons("queued"), ["LOGINING 0", "LOGOUT 0"], "no LOGINED: the login was withdrawn, not awaited")
        try await Task.sleep(for: .seconds(2.5))  // past the moment the paced login would have gone out
        XCTAssertEqual(userUpdates(watcherEvents, .add, "a", in: "queued"), 0, "the server never saw the login")
        try await harness.close()
    }
}
