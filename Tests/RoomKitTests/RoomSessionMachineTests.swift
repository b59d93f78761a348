import RoomKit
import RoomKitProtocol
import XCTest

/// The seed's lifecycle rules, with an injected clock (ms).
final class RoomSessionMachineTests: XCTestCase {
    private func machine() -> RoomSessionMachine {
        RoomSessionMachine(loginTimeout: 30_000, reconnectWindow: 1_200_000)
    }

    private func reports(_ actions: [RoomSessionMachine.Action]) -> [String] {
        actions.compactMap {
            switch $0 {
            case .report(let reason, let code, _): return "\(reason) \(code.rawValue)"
            case .phase(let phase): return "phase \(phase)"
            default: return nil
            }
        }
    }

    func testLogin_whenConnectionIsReady_reportsLoginingAndSendsLogin() {
        var m = machine()
        let actions = m.handle(.loginRequested, now: 0, connectionReady: true)
        XCTAssertEqual(reports(actions), ["phase connecting", "LOGINING 0"])
        XCTAssertTrue(actions.contains(.sendLogin(resume: false)))
        XCTAssertTrue(actions.contains(.setDeadline(30_000)))
    }

    /// A logout while the login is on the wire is data of the logining
    /// state (not a flag beside the machine): nothing happens until the
    /// login is answered, then LOGINED and at once the logout.
    func testLogout_whileTheLoginIsOnTheWire_isHeldInTheLoginingState_andRunsWhenAnswered() {
        var m = machine()
        _ = m.handle(.loginRequested, now: 0, connectionReady: true)
        XCTAssertEqual(m.handle(.logoutRequested, now: 5, connectionReady: true), [])
        XCTAssertEqual(m.state, .logining(sent: true, deadline: 30_000, logoutRequested: true))
        let answered = m.handle(.loginSucceeded, now: 10, connectionReady: true)
        XCTAssertEqual(reports(answered), ["phase connected", "LOGINED 0", "phase disconnecting"])
        XCTAssertEqual(answered.filter { $0 == .sendLogout }.count, 1)
        XCTAssertEqual(m.state, .disconnecting)
        // An input the state does not take is no action, and no change.
        XCTAssertEqual(m.handle(.loginWithdrawn, now: 11, connectionReady: true), [])
        XCTAssertEqual(m.state, .disconnecting)
    }

    /// The connection's liveness clock lives in its `ready` state.
    func testConnection_readyStateCarriesItsLivenessClock() {
        var m = ConnectionMachine()
        _ = m.wanted()
        _ = m.opened(now: 10)
        XCTAssertEqual(m.state, .greeting(since: 10))
        _ = m.helloAnswered(interval: 1000, timeout: 5000, now: 20)
        XCTAssertEqual(m.state, .ready(lastMessageAt: 20, lastPingAt: 20))
        m.messageReceived(now: 500)
        XCTAssertEqual(m.tick(now: 1020, random: 0), .sendPing)
        XCTAssertEqual(m.state, .ready(lastMessageAt: 500, lastPingAt: 1020))
    }

    func testLogin_whenConnectionIsNotReady_waitsThenSendsOnReady() {
        var m = machine()
        XCTAssertFalse(m.handle(.loginRequested, now: 0, connectionReady: false).contains(.sendLogin(resume: false)))
        XCTAssertEqual(m.handle(.connectionReady, now: 10, connectionReady: true), [.sendLogin(resume: false)])
    }

    func testLogin_whenNoReplyWithinTheLoginTimeout_failsWith1002053() {
        var m = machine()
        _ = m.handle(.loginRequested, now: 0, connectionReady: true)
        let actions = m.handle(.deadlinePassed, now: 30_000, connectionReady: true)
        XCTAssertEqual(reports(actions), ["phase disconnected", "LOGIN_FAILED 1002053"])
        XCTAssertTrue(actions.contains { if case .finishLogin(let e?) = $0 { return e.code == .timedOut }; return false })
        XCTAssertEqual(m.state, .idle)
    }

    func testLogin_whenTokenIsRejected_failsWith1002033AndDoesNotRetry() {
        var m = machine()
        _ = m.handle(.loginRequested, now: 0, connectionReady: true)
        let actions = m.handle(.loginFailed(.tokenInvalid, "bad token"), now: 5, connectionReady: true)
        XCTAssertEqual(reports(actions), ["phase disconnected", "LOGIN_FAILED 1002033"])
        XCTAssertEqual(m.handle(.connectionReady, now: 6, connectionReady: true), [], "no retry after LOGIN_FAILED")
    }

    func testLogin_whenConnectionDropsMidLogin_resendsOnTheNextConnection() {
        var m = machine()
        _ = m.handle(.loginRequested, now: 0, connectionReady: true)
        XCTAssertEqual(m.handle(.connectionLost("cut"), now: 5, connectionReady: false), [])
        XCTAssertEqual(m.handle(.connectionReady, now: 900, connectionReady: true), [.sendLogin(resume: false)])
    }

    func testConnectionLoss_whenLoggedIn_reportsReconnecting1002051ThenReconnected() {
        var m = machine()
        _ = m.handle(.loginRequested, now: 0, connectionReady: true)
        _ = m.handle(.loginSucceeded, now: 10, connectionReady: true)
        let lost = m.handle(.connectionLost("reset"), now: 1_000, connectionReady: false)
        XCTAssertEqual(reports(lost), ["phase reconnecting", "RECONNECTING 1002051"])
        XCTAssertTrue(lost.contains(.disconnected("reset")))
        XCTAssertTrue(lost.contains(.setDeadline(1_201_000)), "the window counts from the loss")
        XCTAssertEqual(m.handle(.connectionReady, now: 1_500, connectionReady: true), [.sendLogin(resume: true)])
        let back = m.handle(.loginSucceeded, now: 1_600, connectionReady: true)
        XCTAssertEqual(reports(back), ["phase connected", "RECONNECTED 0"])
    }

    func testReconnect_whenTheWindowPasses_failsWith1002053AndStops() {
        var m = machine()
        _ = m.handle(.loginRequested, now: 0, connectionReady: true)
        _ = m.handle(.loginSucceeded, now: 10, connectionReady: true)
        _ = m.handle(.connectionLost("reset"), now: 1_000, connectionReady: false)
        let failed = m.handle(.deadlinePassed, now: 1_201_000, connectionReady: false)
        XCTAssertEqual(reports(failed), ["phase disconnected", "RECONNECT_FAILED 1002053"])
        XCTAssertTrue(failed.contains(.forgetSession))
        XCTAssertEqual(m.handle(.connectionReady, now: 1_300_000, connectionReady: true), [], "no tries after the window")
    }

    func testReconnect_whenResumeIsRefusedWithAKickCode_reportsKickOut() {
        var m = machine()
        _ = m.handle(.loginRequested, now: 0, connectionReady: true)
        _ = m.handle(.loginSucceeded, now: 10, connectionReady: true)
        _ = m.handle(.connectionLost("reset"), now: 20, connectionReady: false)
        _ = m.handle(.connectionReady, now: 30, connectionReady: true)
        let kicked = m.handle(.loginFailed(.kickedDuplicateLogin, "elsewhere"), now: 40, connectionReady: true)
        XCTAssertEqual(reports(kicked), ["phase disconnected", "KICK_OUT 1002050"])
        XCTAssertTrue(kicked.contains(.kickedWithReason(.kickedDuplicateLogin, "elsewhere")))
    }

    func testReconnect_whenResumeHitsATransientError_retriesOnTheNextConnection() {
        var m = machine()
        _ = m.handle(.loginRequested, now: 0, connectionReady: true)
        _ = m.handle(.loginSucceeded, now: 10, connectionReady: true)
        _ = m.handle(.connectionLost("reset"), now: 20, connectionReady: false)
        _ = m.handle(.connectionReady, now: 30, connectionReady: true)
        XCTAssertEqual(m.handle(.loginFailed(.rateLimited, "slow down"), now: 40, connectionReady: true), [])
        XCTAssertEqual(m.handle(.connectionReady, now: 50, connectionReady: true), [.sendLogin(resume: true)])
    }

    func testKick_whileLoggedIn_reportsKickOutWithTheServersCode() {
        for code in [ErrorCode.kickedDuplicateLogin, .kickedByAdmin, .kickedTokenExpired] {
            var m = machine()
            _ = m.handle(.loginRequested, now: 0, connectionReady: true)
            _ = m.handle(.loginSucceeded, now: 10, connectionReady: true)
            let actions = m.handle(.kicked(code, "why"), now: 20, connectionReady: true)
            XCTAssertEqual(reports(actions), ["phase disconnected", "KICK_OUT \(code.rawValue)"])
            XCTAssertEqual(m.handle(.connectionLost("x"), now: 30, connectionReady: false), [], "no reconnect after a kick")
        }
    }

    func testLogout_whenLoggedIn_goesDisconnectingThenLogout() {
        var m = machine()
        _ = m.handle(.loginRequested, now: 0, connectionReady: true)
        _ = m.handle(.loginSucceeded, now: 10, connectionReady: true)
        let request = m.handle(.logoutRequested, now: 20, connectionReady: true)
        XCTAssertEqual(reports(request), ["phase disconnecting"])
        XCTAssertTrue(request.contains(.sendLogout))
        let done = m.handle(.logoutAnswered, now: 30, connectionReady: true)
        XCTAssertEqual(reports(done), ["phase disconnected", "LOGOUT 0"])
        XCTAssertTrue(done.contains(.finishLogout))
        XCTAssertFalse(m.isLoggedIn)
    }

    func testLogout_duringReconnectBackoff_stopsTheRetriesAtOnce() {
        var m = machine()
        _ = m.handle(.loginRequested, now: 0, connectionReady: true)
        _ = m.handle(.loginSucceeded, now: 10, connectionReady: true)
        _ = m.handle(.connectionLost("reset"), now: 20, connectionReady: false)
        let actions = m.handle(.logoutRequested, now: 25, connectionReady: false)
        XCTAssertEqual(reports(actions), ["phase disconnected", "LOGOUT 0"])
        XCTAssertTrue(actions.contains(.cancelDeadline))
        XCTAssertEqual(m.handle(.connectionReady, now: 30, connectionReady: true), [], "no resume after logout")
    }

    func testLogout_whileLoginIsInFlight_logsOutRightAfterTheLogin() {
        var m = machine()
        _ = m.handle(.loginRequested, now: 0, connectionReady: true)
        XCTAssertEqual(m.handle(.logoutRequested, now: 1, connectionReady: true), [])
        let actions = m.handle(.loginSucceeded, now: 2, connectionReady: true)
        XCTAssertEqual(reports(actions), ["phase connected", "LOGINED 0", "phase disconnecting"])
        XCTAssertTrue(actions.contains(.sendLogout))
    }

    func testNineReasons_mapToTheSeedPhases() {
        XCTAssertEqual(RoomReason.allCases.count, 9)
        XCTAssertEqual(RoomReason.logining.phase, .connecting)
        XCTAssertEqual(RoomReason.reconnected.phase, .connected)
        XCTAssertEqual(RoomReason.reconnecting.phase, .reconnecting)
        XCTAssertEqual(RoomReason.kickOut.phase, .disconnected)
        XCTAssertNil(RoomReason.logoutFailed.phase)
    }
}

final class ConnectionMachineTests: XCTestCase {
    func testBackoff_isFullJitterWithTheFirstRetryWithinOneSecondAndACap() {
        let backoff = ConnectionMachine.Backoff(first: 1000, cap: 30_000)
        XCTAssertEqual(backoff.delay(attempt: 0, random: 0.999), 999)
        XCTAssertEqual(backoff.delay(attempt: 0, random: 0), 0)
        XCTAssertEqual(backoff.delay(attempt: 3, random: 0.5), 4000)
        XCTAssertEqual(backoff.delay(attempt: 20, random: 1.0), 30_000, "capped")
    }

    func testReadyConnection_pingsEveryIntervalAndDropsWhenSilent() {
        var m = ConnectionMachine()
        XCTAssertEqual(m.wanted(), .connect)
        XCTAssertEqual(m.opened(now: 10), .sendHello)
        XCTAssertEqual(m.helloAnswered(interval: 10_000, timeout: 90_000, now: 20), .becameReady)
        XCTAssertEqual(m.deadAfter, 20_000, "two ping intervals, under the server's 90 s")
        XCTAssertEqual(m.tick(now: 10_020, random: 0), .sendPing)
        m.messageReceived(now: 10_030)
        XCTAssertEqual(m.tick(now: 20_020, random: 0), .sendPing)
        XCTAssertEqual(m.tick(now: 30_030, random: 0.5),
                       .drop(.init(abort: true, why: "no message from the server for 20000 ms", lost: true)))
        XCTAssertEqual(m.state, .backingOff(until: 30_530), "full jitter: half of the first 1 s ceiling")
        XCTAssertEqual(m.tick(now: 30_529, random: 0), .none)
        XCTAssertEqual(m.tick(now: 30_530, random: 0), .connect)
    }

    func testUnwantedConnection_isClosedAndNotRetried() {
        var m = ConnectionMachine()
        _ = m.wanted()
        _ = m.opened(now: 1)
        _ = m.helloAnswered(interval: 1000, timeout: 5000, now: 2)
        XCTAssertEqual(m.unwanted(), .drop(.init(abort: true, why: "no room needs the connection", lost: true)))
        XCTAssertEqual(m.closed("bye", now: 4, random: 0), .none)
        XCTAssertEqual(m.state, .idle)
        XCTAssertFalse(m.isWanted)
    }

    /// Each input's result in the states it can meet: what a caller must handle.
    func testEachInput_inEachState_asksOnlyForItsOwnActions() {
        // wanted: connects once, from idle only.
        var m = ConnectionMachine()
        XCTAssertEqual(m.wanted(), .connect)
        XCTAssertEqual(m.wanted(), .none, "already connecting")
        // opened: only while connecting.
        XCTAssertEqual(m.opened(now: 1), .sendHello)
        XCTAssertEqual(m.opened(now: 2), .none, "a second open while greeting")
        // A hello nobody asked for (idle) is ignored; so is a second one.
        var idle = ConnectionMachine()
        XCTAssertEqual(idle.helloAnswered(interval: 1000, timeout: 5000, now: 0), .none)
        XCTAssertEqual(m.helloAnswered(interval: 1000, timeout: 5000, now: 3), .becameReady)
        XCTAssertEqual(m.helloAnswered(interval: 1000, timeout: 5000, now: 4), .none)
        // closed while greeting (not ready): no `lost`, no abort, but a backoff.
        var greeting = ConnectionMachine(backoff: .init(first: 1000, cap: 1000))
        _ = greeting.wanted()
        _ = greeting.opened(now: 0)
        XCTAssertEqual(greeting.closed("refused", now: 5, random: 0.25), .drop(.init(abort: false, why: "refused", lost: false)))
        XCTAssertEqual(greeting.state, .backingOff(until: 255))
        XCTAssertEqual(greeting.closed("again", now: 6, random: 0), .none, "already backing off")
        // No hello reply within the silence limit (25 s before any hello): dropped with an abort.
        var silent = ConnectionMachine()
        _ = silent.wanted()
        _ = silent.opened(now: 0)
        XCTAssertEqual(silent.tick(now: 24_999, random: 0), .none)
        XCTAssertEqual(silent.tick(now: 25_000, random: 0), .drop(.init(abort: true, why: "no hello reply", lost: false)))
        // Unwanted before it was ready: an abort but no `lost`.
        var early = ConnectionMachine()
        _ = early.wanted()
        XCTAssertEqual(early.unwanted(), .drop(.init(abort: true, why: "no room needs the connection", lost: false)))
        XCTAssertEqual(early.unwanted(), .none)
    }
}
