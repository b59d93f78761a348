import RoomKitProtocol

/// The lifecycle of one room session as a value with no I/O. Each input has
/// its own method, which takes the current time (ms on a monotonic clock)
/// where it matters and returns its own small result: what happened, in the
/// seed's terms. The host's driver (`RoomHost+Sessions.swift`) turns a
/// result into effects (reports, phases, timers, requests, the pending
/// calls) and owns their order. The seed's rules (login timeout, the
/// reconnect window, kicks, logout) live here and are unit-tested with an
/// injected clock.
///
/// Every method decides per state with no catch-all: a state an input does
/// not affect is listed as such, so a new state or input that nobody handled
/// is a compile error, not a silent drop.
public struct RoomSessionMachine: Sendable, Hashable {
    /// Where the session is. The data of a state lives in its case.
    public enum State: Sendable, Hashable {
        /// Not logged in (before any login, or after LOGOUT / a failure / a kick).
        case idle
        /// Login requested; `sent` once the login request is on the wire.
        /// `logoutRequested`: `logoutRoom` came while the login was on the
        /// wire; the session logs out as soon as the login is answered.
        case logining(sent: Bool, deadline: Int64, logoutRequested: Bool)
        /// Logged in.
        case active
        /// Connection lost; resuming until `deadline` (the reconnect window).
        case reconnecting(sent: Bool, deadline: Int64)
        /// Logout request in flight.
        case disconnecting
    }

    /// How a session ended. The machine is idle again; the driver cancels
    /// the session's timer, reports, ends the pending calls and forgets the
    /// session's resume data.
    public enum Ending: Sendable, Hashable {
        /// LOGIN_FAILED or RECONNECT_FAILED with `code`; `cause` is the
        /// server's code behind it when that differs (extended data `cause`).
        /// `login`: the pending `loginRoom` call fails with it (a resume has
        /// no call waiting).
        case failed(RoomReason, ErrorCode, cause: ErrorCode?, login: RoomError?)
        /// KICK_OUT, then `fireKickedWithReason`.
        case kicked(ErrorCode, String)
        /// LOGOUT. `abandonedLogin`: a login that had not reached the wire
        /// was given up; the pending `loginRoom` call ends with it first.
        case loggedOut(abandonedLogin: RoomError?)
    }

    /// What `loginRequested(now:connectionReady:)` leads to.
    public enum LoginAction: Sendable, Hashable {
        /// LOGINING; arm the login timeout for `deadline`; send `login` now
        /// when `send` (otherwise `connectionReady()` asks for it).
        case begin(deadline: Int64, send: Bool)
        /// Already in a session: the host refuses a second login before asking.
        case none
    }

    /// What `loginImpossible(_:_:)` leads to.
    public enum ImpossibleAction: Sendable, Hashable {
        /// LOGINING, then LOGIN_FAILED with the error's code; `loginRoom` throws it.
        case fail(RoomError)
        case none
    }

    /// What `logoutRequested(connectionReady:)` leads to.
    public enum LogoutAction: Sendable, Hashable {
        /// Logged in: DISCONNECTING, and send `logout`.
        case sendLogout
        /// Logged in with no connection: DISCONNECTING, then logged out at once.
        case logoutOffline
        /// A login not yet on the wire, or a resume in backoff: stopped at once.
        case end(Ending)
        /// The login is on the wire: the session logs out once it is answered.
        case afterLogin
        /// Not logged in, or a logout already under way: the host answers.
        case none
    }

    /// What `connectionReady()` leads to.
    public enum ReadyAction: Sendable, Hashable {
        /// Send `login`; `resume` when continuing a session.
        case sendLogin(resume: Bool)
        case none
    }

    /// What `connectionLost(now:)` leads to.
    public enum LostAction: Sendable, Hashable {
        /// RECONNECTING (`fireDisconnectWithError`); arm the reconnect window for `deadline`.
        case reconnect(deadline: Int64)
        /// The logout in flight counts as done: the server no longer has us.
        case end(Ending)
        case none
    }

    /// What `loginSucceeded()` leads to.
    public enum SucceededAction: Sendable, Hashable {
        /// LOGINED; `loginRoom` returns. `logoutNext`: a logout waited for
        /// this answer, and the driver asks `logoutRequested` at once.
        case logined(logoutNext: Bool)
        /// RECONNECTED.
        case reconnected
        /// A late answer to a login this session no longer waits for.
        case none
    }

    /// What `loginFailed`, `logoutAnswered`, `kicked` and `deadlinePassed`
    /// lead to: each can only end the session or do nothing.
    public enum EndAction: Sendable, Hashable {
        case end(Ending)
        /// `end`, and the login request on its way is withdrawn: the driver
        /// takes it back if still queued, else follows it with a logout on
        /// the same connection. The server may have made the session after
        /// the client stopped waiting for the answer; left there, a retry
        /// on that connection would be refused with 1009007.
        case endWithdrawingLogin(Ending)
        case none
    }

    public private(set) var state: State = .idle

    public let loginTimeout: Int64
    public let reconnectWindow: Int64

    public init(loginTimeout: Int64, reconnectWindow: Int64) {
        self.loginTimeout = loginTimeout
        self.reconnectWindow = reconnectWindow
    }

    /// Whether the session counts as logged in (for LOGOUT vs LOGOUT_FAILED).
    public var isLoggedIn: Bool {
        if case .idle = state { return false }
        return true
    }

    /// The phase the state stands for (`firePhaseChanged`).
    public var phase: RoomPhase {
        switch state {
        case .idle: return .disconnected
        case .logining: return .connecting
        case .active: return .connected
        case .reconnecting: return .reconnecting
        case .disconnecting: return .disconnecting
        }
    }

    /// `loginRoom` was called.
    public mutating func loginRequested(now: Int64, connectionReady: Bool) -> LoginAction {
        switch state {
        case .idle:
            let deadline = now + loginTimeout
            state = .logining(sent: connectionReady, deadline: deadline, logoutRequested: false)
            return .begin(deadline: deadline, send: connectionReady)
        case .logining, .active, .reconnecting, .disconnecting:
            return .none
        }
    }

    /// A login that cannot even be sent (no token could be had): reported
    /// as LOGINING then LOGIN_FAILED with `code`, like any failed login.
    public mutating func loginImpossible(_ code: ErrorCode, _ message: String) -> ImpossibleAction {
        switch state {
        case .idle:
            return .fail(RoomError(code: code, message: message, reason: .loginFailed))
        case .logining, .active, .reconnecting, .disconnecting:
            return .none
        }
    }

    /// The login request queued by `.sendLogin` was taken back before it
    /// reached the wire (a logout came first): the server never saw it.
    public mutating func loginWithdrawn() {
        switch state {
        case .logining(true, let deadline, let logout):
            state = .logining(sent: false, deadline: deadline, logoutRequested: logout)
        case .idle, .logining(false, _, _), .active, .reconnecting, .disconnecting:
            break
        }
    }

    /// The shared connection is ready (hello answered).
    public mutating func connectionReady() -> ReadyAction {
        switch state {
        case .logining(false, let deadline, let logout):
            state = .logining(sent: true, deadline: deadline, logoutRequested: logout)
            return .sendLogin(resume: false)
        case .reconnecting(false, let deadline):
            state = .reconnecting(sent: true, deadline: deadline)
            return .sendLogin(resume: true)
        case .idle, .logining(true, _, _), .active, .reconnecting(true, _), .disconnecting:
            return .none
        }
    }

    /// The shared connection was lost.
    public mutating func connectionLost(now: Int64) -> LostAction {
        switch state {
        case .logining(true, let deadline, let logout):
            // The login's fate is unknown; try again on the next connection.
            state = .logining(sent: false, deadline: deadline, logoutRequested: logout)
            return .none
        case .active:
            let deadline = now + reconnectWindow
            state = .reconnecting(sent: false, deadline: deadline)
            return .reconnect(deadline: deadline)
        case .reconnecting(true, let deadline):
            state = .reconnecting(sent: false, deadline: deadline)
            return .none
        case .disconnecting:
            return .end(end(.loggedOut(abandonedLogin: nil)))
        case .idle, .logining(false, _, _), .reconnecting(false, _):
            return .none
        }
    }

    /// The server accepted the login (or the resume).
    public mutating func loginSucceeded() -> SucceededAction {
        switch state {
        case .logining(_, _, let logoutRequested):
            state = .active
            return .logined(logoutNext: logoutRequested)
        case .reconnecting:
            state = .active
            return .reconnected
        case .idle, .active, .disconnecting:
            return .none
        }
    }

    /// The server refused the login (or the resume) with `code`.
    public mutating func loginFailed(_ code: ErrorCode, _ message: String) -> EndAction {
        switch state {
        case .logining:
            return .end(fail(.loginFailed, code, message))
        case .reconnecting(_, let deadline):
            if code.isKick { return .end(end(.kicked(code, message))) }
            if code == .tokenInvalid || code == .notPermitted {
                // The server will not take us back with this token: no retry
                // helps. RECONNECT_FAILED is 1002053 (seed, PROTOCOL.md §11);
                // the server's refusal travels as the cause.
                return .end(fail(.reconnectFailed, .timedOut, message, cause: code))
            }
            // Transient (rate limit, server error): the host retries on the next connection.
            state = .reconnecting(sent: false, deadline: deadline)
            return .none
        case .idle, .active, .disconnecting:
            return .none
        }
    }

    /// The server answered `logout` (whatever the answer, it no longer has us).
    public mutating func logoutAnswered() -> EndAction {
        switch state {
        case .disconnecting: return .end(end(.loggedOut(abandonedLogin: nil)))
        case .idle, .logining, .active, .reconnecting: return .none
        }
    }

    /// The server removed us from the room.
    public mutating func kicked(_ code: ErrorCode, _ message: String) -> EndAction {
        switch state {
        case .logining: return .end(fail(.loginFailed, code, message))
        case .active, .reconnecting, .disconnecting: return .end(end(.kicked(code, message)))
        case .idle: return .none
        }
    }

    /// The session's timer (login timeout or reconnect window) fired.
    public mutating func deadlinePassed() -> EndAction {
        switch state {
        case .logining(let sent, _, _):
            let ending = fail(.loginFailed, .timedOut, "login timed out")
            return sent ? .endWithdrawingLogin(ending) : .end(ending)
        case .reconnecting(let sent, _):
            let ending = fail(.reconnectFailed, .timedOut, "reconnect window passed")
            return sent ? .endWithdrawingLogin(ending) : .end(ending)
        case .idle, .active, .disconnecting: return .none
        }
    }

    /// `logoutRoom` was called.
    public mutating func logoutRequested(connectionReady: Bool) -> LogoutAction {
        switch state {
        case .active:
            if connectionReady {
                state = .disconnecting
                return .sendLogout
            }
            state = .idle
            return .logoutOffline
        case .logining(true, let deadline, _):
            state = .logining(sent: true, deadline: deadline, logoutRequested: true)
            return .afterLogin
        case .logining(false, _, _):
            let abandoned = RoomError(code: .success, message: "logged out before login completed", reason: .logout)
            return .end(end(.loggedOut(abandonedLogin: abandoned)))
        case .reconnecting:
            // Logout during backoff stops the retries at once.
            return .end(end(.loggedOut(abandonedLogin: nil)))
        case .idle, .disconnecting:
            return .none
        }
    }

    private mutating func fail(_ reason: RoomReason, _ code: ErrorCode, _ message: String, cause: ErrorCode? = nil) -> Ending {
        let login: RoomError?
        switch state {
        case .logining: login = RoomError(code: code, message: message, reason: reason)
        case .idle, .active, .reconnecting, .disconnecting: login = nil
        }
        return end(.failed(reason, code, cause: cause, login: login))
    }

    private mutating func end(_ ending: Ending) -> Ending {
        state = .idle
        return ending
    }
}
