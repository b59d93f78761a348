import RoomKit
import RoomKitProtocol
import XCTest

/// The seed's lifecycle rules, with an injected clock (ms).
final class RoomSessionMachineTests: XCTestCase {
    private func machine() -> RoomSessionMachine {
        RoomSessionMachine(loginTimeout: 30_000, reconnectWindow: 1_200_000)
    }

    /// A machine logged in at 10 ms.
    private func active() -> RoomSessionMachine {
        var m = machine()
        _ = m.loginRequested(now: 0, connectionReady: true)
        _ = m.loginSucceeded()
        return m
    }

    func testLogin_whenConnectionIsReady_beginsWithTheLoginTimeoutAndSendsAtOnce() {
        var m = machine()
        XCTAssertEqual(m.phase, .disconnected)
        XCTAssertEqual(m.loginRequested(now: 0, connectionReady: true), .begin(deadline: 30_000, send: true))
        XCTAssertEqual(m.state, .logining(sent: true, deadline: 30_000, logoutRequested: false))
        XCTAssertEqual(m.phase, .connecting)
        XCTAssertEqual(m.loginRequested(now: 1, connectionReady: true), .none, "a second login is refused by the host")
    }

    /// A logout while the login is on the wire is data of the logining
    /// state (not a flag beside the machine): nothing happens until the
    /// login is answered, then LOGINED and at once the logout.
    func testLogout_whileTheLoginIsOnTheWire_isHeldInTheLoginingState_andRunsWhenAnswered() {
        var m = machine()
        _ = m.loginRequested(now: 0, connectionReady: true)
        XCTAssertEqual(m.logoutRequested(connectionReady: true), .afterLogin)
        XCTAssertEqual(m.state, .logining(sent: true, deadline: 30_000, logoutRequested: true))
        XCTAssertEqual(m.loginSucceeded(), .logined(logoutNext: true))
        XCTAssertEqual(m.logoutRequested(connectionReady: true), .sendLogout)
        XCTAssertEqual(m.state, .disconnecting)
        // An input the state does not take changes nothing.
        m.loginWithdrawn()
        XCTAssertEqual(m.state, .disconnecting)
        XCTAssertEqual(m.logoutRequested(connectionReady: true), .none, "a logout already under way")
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
        XCTAssertEqual(m.loginRequested(now: 0, connectionReady: false), .begin(deadline: 30_000, send: false))
        XCTAssertEqual(m.connectionReady(), .sendLogin(resume: false))
        XCTAssertEqual(m.connectionReady(), .none, "sent once")
    }

    func testLogin_whenNoReplyWithinTheLoginTimeout_failsWith1002053() {
        var m = machine()
        _ = m.loginRequested(now: 0, connectionReady: true)
        let login = RoomError(code: .timedOut, message: "login timed out", reason: .loginFailed)
        XCTAssertEqual(m.deadlinePassed(), .endWithdrawingLogin(.failed(.loginFailed, .timedOut, cause: nil, login: login)),
                       "the login was sent: the server may hold a session for it")
        XCTAssertEqual(m.state, .idle)
        XCTAssertEqual(m.phase, .disconnected)
        XCTAssertEqual(m.deadlinePassed(), .none, "a stale timer of an ended session")
    }

    func testLogin_timingOutBeforeItWasSent_endsWithNothingToWithdraw() {
        var m = machine()
        _ = m.loginRequested(now: 0, connectionReady: false)
        let login = RoomError(code: .timedOut, message: "login timed out", reason: .loginFailed)
        XCTAssertEqual(m.deadlinePassed(), .end(.failed(.loginFailed, .timedOut, cause: nil, login: login)))
    }

    func testLogin_whenTokenIsRejected_failsWith1002033AndDoesNotRetry() {
        var m = machine()
        _ = m.loginRequested(now: 0, connectionReady: true)
        guard case .end(.failed(.loginFailed, .tokenInvalid, nil, let login?)) = m.loginFailed(.tokenInvalid, "bad token") else {
            return XCTFail("a refused login ends the session with LOGIN_FAILED and fails loginRoom")
        }
        XCTAssertEqual(login.code, .tokenInvalid)
        XCTAssertEqual(m.connectionReady(), .none, "no retry after LOGIN_FAILED")
    }

    func testLogin_whenNoTokenCanBeHad_failsWithoutEverSending() {
        var m = machine()
        XCTAssertEqual(m.loginImpossible(.tokenInvalid, "no token"),
                       .fail(RoomError(code: .tokenInvalid, message: "no token", reason: .loginFailed)))
        XCTAssertEqual(m.state, .idle)
        _ = m.loginRequested(now: 0, connectionReady: true)
        XCTAssertEqual(m.loginImpossible(.tokenInvalid, "no token"), .none, "only an idle session can fail that way")
    }

    func testLogin_whenConnectionDropsMidLogin_resendsOnTheNextConnection() {
        var m = machine()
        _ = m.loginRequested(now: 0, connectionReady: true)
        XCTAssertEqual(m.connectionLost(now: 5), .none)
        XCTAssertEqual(m.state, .logining(sent: false, deadline: 30_000, logoutRequested: false), "the deadline stays")
        XCTAssertEqual(m.connectionReady(), .sendLogin(resume: false))
    }

    func testConnectionLoss_whenLoggedIn_reconnectsWithinTheWindowThenReconnected() {
        var m = active()
        XCTAssertEqual(m.phase, .connected)
        XCTAssertEqual(m.connectionLost(now: 1_000), .reconnect(deadline: 1_201_000), "the window counts from the loss")
        XCTAssertEqual(m.phase, .reconnecting)
        XCTAssertEqual(m.connectionLost(now: 1_100), .none, "already reconnecting")
        XCTAssertEqual(m.connectionReady(), .sendLogin(resume: true))
        XCTAssertEqual(m.loginSucceeded(), .reconnected)
        XCTAssertEqual(m.state, .active)
        XCTAssertEqual(m.loginSucceeded(), .none, "a late answer")
    }

    func testReconnect_whenTheWindowPassesWithAResumeOnTheWire_withdrawsIt() {
        var m = active()
        _ = m.connectionLost(now: 1_000)
        XCTAssertEqual(m.connectionReady(), .sendLogin(resume: true))
        XCTAssertEqual(m.deadlinePassed(), .endWithdrawingLogin(.failed(.reconnectFailed, .timedOut, cause: nil, login: nil)))
    }

    func testReconnect_whenTheWindowPasses_failsWith1002053AndStops() {
        var m = active()
        _ = m.connectionLost(now: 1_000)
        XCTAssertEqual(m.deadlinePassed(), .end(.failed(.reconnectFailed, .timedOut, cause: nil, login: nil)),
                       "no loginRoom call waits on a resume")
        XCTAssertEqual(m.connectionReady(), .none, "no tries after the window")
    }

    func testReconnect_whenTheTokenIsRefused_failsWith1002053AndTheRefusalAsCause() {
        for refusal in [ErrorCode.tokenInvalid, .notPermitted] {
            var m = active()
            _ = m.connectionLost(now: 20)
            _ = m.connectionReady()
            XCTAssertEqual(m.loginFailed(refusal, "refused"),
                           .end(.failed(.reconnectFailed, .timedOut, cause: refusal, login: nil)))
        }
    }

    func testReconnect_whenResumeIsRefusedWithAKickCode_endsKicked() {
        var m = active()
        _ = m.connectionLost(now: 20)
        _ = m.connectionReady()
        XCTAssertEqual(m.loginFailed(.kickedDuplicateLogin, "elsewhere"), .end(.kicked(.kickedDuplicateLogin, "elsewhere")))
        XCTAssertEqual(m.state, .idle)
    }

    func testReconnect_whenResumeHitsATransientError_retriesOnTheNextConnection() {
        var m = active()
        _ = m.connectionLost(now: 20)
        _ = m.connectionReady()
        XCTAssertEqual(m.loginFailed(.rateLimited, "slow down"), .none)
        XCTAssertEqual(m.state, .reconnecting(sent: false, deadline: 1_200_020))
        XCTAssertEqual(m.connectionReady(), .sendLogin(resume: true))
    }

    func testKick_whileLoggedIn_endsKickedWithTheServersCode() {
        for code in [ErrorCode.kickedDuplicateLogin, .kickedByAdmin, .kickedTokenExpired] {
            var m = active()
            XCTAssertEqual(m.kicked(code, "why"), .end(.kicked(code, "why")))
            XCTAssertEqual(m.connectionLost(now: 30), .none, "no reconnect after a kick")
            XCTAssertEqual(m.kicked(code, "again"), .none)
        }
        var logining = machine()
        _ = logining.loginRequested(now: 0, connectionReady: true)
        guard case .end(.failed(.loginFailed, .kickedByAdmin, nil, _?)) = logining.kicked(.kickedByAdmin, "no") else {
            return XCTFail("a kick during the login is a failed login")
        }
    }

    func testLogout_whenLoggedIn_goesDisconnectingThenLogout() {
        var m = active()
        XCTAssertEqual(m.logoutRequested(connectionReady: true), .sendLogout)
        XCTAssertEqual(m.phase, .disconnecting)
        XCTAssertEqual(m.logoutAnswered(), .end(.loggedOut(abandonedLogin: nil)))
        XCTAssertFalse(m.isLoggedIn)
        XCTAssertEqual(m.logoutAnswered(), .none)
    }

    func testLogout_whenTheConnectionIsLostBeforeTheAnswer_isDone() {
        var m = active()
        _ = m.logoutRequested(connectionReady: true)
        XCTAssertEqual(m.connectionLost(now: 5), .end(.loggedOut(abandonedLogin: nil)), "the server no longer has us")
        XCTAssertEqual(m.state, .idle)
    }

    func testLogout_whenLoggedInWithoutAConnection_logsOutOffline() {
        var m = active()
        XCTAssertEqual(m.logoutRequested(connectionReady: false), .logoutOffline)
        XCTAssertEqual(m.state, .idle)
    }

    func testLogout_duringReconnectBackoff_stopsTheRetriesAtOnce() {
        var m = active()
        _ = m.connectionLost(now: 20)
        XCTAssertEqual(m.logoutRequested(connectionReady: false), .end(.loggedOut(abandonedLogin: nil)))
        XCTAssertEqual(m.connectionReady(), .none, "no resume after logout")
    }

    func testLogout_beforeTheLoginLeftTheOutbox_abandonsTheLogin() {
        var m = machine()
        _ = m.loginRequested(now: 0, connectionReady: true)
        m.loginWithdrawn()
        XCTAssertEqual(m.state, .logining(sent: false, deadline: 30_000, logoutRequested: false))
        guard case .end(.loggedOut(let abandoned?)) = m.logoutRequested(connectionReady: true) else {
            return XCTFail("a login the server never saw is given up at once")
        }
        XCTAssertEqual(abandoned.reason, .logout)
        XCTAssertEqual(m.state, .idle)
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
