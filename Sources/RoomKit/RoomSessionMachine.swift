import RoomKitProtocol

/// The lifecycle of one room session as a value with no I/O: it takes an
/// input and the current time (ms on a monotonic clock) and returns the
/// actions the host must perform. The seed's rules (login timeout, the
/// reconnect window, kicks, logout) live here and are unit-tested with an
/// injected clock.
public struct RoomSessionMachine: Sendable, Hashable {
    /// Where the session is.
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

    /// What happened.
    public enum Input: Sendable, Hashable {
        case loginRequested
        /// A login that cannot even be sent (no token could be had): reported
        /// as LOGINING then LOGIN_FAILED with this code, like any failed login.
        case loginImpossible(ErrorCode, String)
        case logoutRequested
        /// The login request queued by `.sendLogin` was taken back before it
        /// reached the wire (a logout came first): the server never saw it.
        case loginWithdrawn
        /// The shared connection is ready (hello answered).
        case connectionReady
        /// The shared connection was lost, with a description for `fireDisconnectWithError`.
        case connectionLost(String)
        case loginSucceeded
        case loginFailed(ErrorCode, String)
        case logoutAnswered
        case kicked(ErrorCode, String)
        /// A timer set by `.setDeadline` fired.
        case deadlinePassed
    }

    /// What the host must do, in order.
    public enum Action: Sendable, Hashable {
        /// Send `login`; `resume` when continuing a session.
        case sendLogin(resume: Bool)
        case sendLogout
        /// Report a reason and code (`onRoomStateChanged`); `cause` is the
        /// server's code behind it, when that differs (extended data `cause`).
        case report(RoomReason, ErrorCode, cause: ErrorCode? = nil)
        /// Report a phase change (`firePhaseChanged`).
        case phase(RoomPhase)
        /// Arm the session's single timer for `at` (replacing any earlier one).
        case setDeadline(Int64)
        case cancelDeadline
        /// `fireDisconnectWithError`.
        case disconnected(String)
        /// `fireKickedWithReason`.
        case kickedWithReason(ErrorCode, String)
        /// The pending `loginRoom` call ends (nil: success).
        case finishLogin(RoomError?)
        /// The pending `logoutRoom` call ends.
        case finishLogout
        /// Forget resume data: the session is over.
        case forgetSession
    }

    public private(set) var state: State = .idle
    public private(set) var phase: RoomPhase = .disconnected

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

    /// Takes `input` at `now` and returns the actions to perform, in order.
    /// One method per input below, each deciding per state with no
    /// catch-all: a state an input does not affect is listed as such, so a
    /// new state or input that nobody handled is a compile error.
    public mutating func handle(_ input: Input, now: Int64, connectionReady: Bool) -> [Action] {
        switch input {
        case .loginRequested: return loginRequested(now: now, connectionReady: connectionReady)
        case .loginImpossible(let code, let message): return loginImpossible(code, message)
        case .logoutRequested: return logoutRequested(connectionReady: connectionReady)
        case .loginWithdrawn: return loginWithdrawn()
        case .connectionReady: return connectionBecameReady()
        case .connectionLost(let why): return connectionLost(why, now: now)
        case .loginSucceeded: return loginSucceeded(connectionReady: connectionReady)
        case .loginFailed(let code, let message): return loginFailed(code, message)
        case .logoutAnswered: return logoutAnswered()
        case .kicked(let code, let message): return kicked(code, message)
        case .deadlinePassed: return deadlinePassed()
        }
    }

    private mutating func loginRequested(now: Int64, connectionReady: Bool) -> [Action] {
        switch state {
        case .idle:
            var actions: [Action] = []
            let deadline = now + loginTimeout
            state = .logining(sent: connectionReady, deadline: deadline, logoutRequested: false)
            report(.logining, .success, into: &actions)
            actions.append(.setDeadline(deadline))
            if connectionReady { actions.append(.sendLogin(resume: false)) }
            return actions
        case .logining, .active, .reconnecting, .disconnecting:
            return []  // the host refuses a second login before asking
        }
    }

    private mutating func loginImpossible(_ code: ErrorCode, _ message: String) -> [Action] {
        switch state {
        case .idle:
            var actions: [Action] = []
            report(.logining, .success, into: &actions)
            report(.loginFailed, code, into: &actions)
            actions.append(.finishLogin(RoomError(code: code, message: message, reason: .loginFailed)))
            return actions
        case .logining, .active, .reconnecting, .disconnecting:
            return []
        }
    }

    private mutating func loginWithdrawn() -> [Action] {
        switch state {
        case .logining(true, let deadline, let logout):
            state = .logining(sent: false, deadline: deadline, logoutRequested: logout)
            return []
        case .idle, .logining(false, _, _), .active, .reconnecting, .disconnecting:
            return []
        }
    }

    private mutating func connectionBecameReady() -> [Action] {
        switch state {
        case .logining(false, let deadline, let logout):
            state = .logining(sent: true, deadline: deadline, logoutRequested: logout)
            return [.sendLogin(resume: false)]
        case .reconnecting(false, let deadline):
            state = .reconnecting(sent: true, deadline: deadline)
            return [.sendLogin(resume: true)]
        case .idle, .logining(true, _, _), .active, .reconnecting(true, _), .disconnecting:
            return []
        }
    }

    private mutating func connectionLost(_ why: String, now: Int64) -> [Action] {
        switch state {
        case .logining(true, let deadline, let logout):
            // The login's fate is unknown; try again on the next connection.
            state = .logining(sent: false, deadline: deadline, logoutRequested: logout)
            return []
        case .active:
            var actions: [Action] = []
            let deadline = now + reconnectWindow
            state = .reconnecting(sent: false, deadline: deadline)
            report(.reconnecting, .connectionInterrupted, into: &actions)
            actions.append(.disconnected(why))
            actions.append(.setDeadline(deadline))
            return actions
        case .reconnecting(true, let deadline):
            state = .reconnecting(sent: false, deadline: deadline)
            return []
        case .disconnecting:
            return loggedOut()
        case .idle, .logining(false, _, _), .reconnecting(false, _):
            return []
        }
    }

    private mutating func loginSucceeded(connectionReady: Bool) -> [Action] {
        switch state {
        case .logining(_, _, let logoutRequested):
            var actions: [Action] = [.cancelDeadline]
            state = .active
            report(.logined, .success, into: &actions)
            actions.append(.finishLogin(nil))
            if logoutRequested { actions += self.logoutRequested(connectionReady: connectionReady) }
            return actions
        case .reconnecting:
            var actions: [Action] = [.cancelDeadline]
            state = .active
            report(.reconnected, .success, into: &actions)
            return actions
        case .idle, .active, .disconnecting:
            return []  // a late answer to a login this session no longer waits for
        }
    }

    private mutating func loginFailed(_ code: ErrorCode, _ message: String) -> [Action] {
        switch state {
        case .logining:
            return fail(.loginFailed, code, message)
        case .reconnecting(_, let deadline):
            if code.isKick { return kick(code, message) }
            if code == .tokenInvalid || code == .notPermitted {
                // The server will not take us back with this token: no retry
                // helps. RECONNECT_FAILED is 1002053 (seed, PROTOCOL.md §11);
                // the server's refusal travels as the cause.
                return fail(.reconnectFailed, .timedOut, message, cause: code)
            }
            // Transient (rate limit, server error): the host retries on the next connection.
            state = .reconnecting(sent: false, deadline: deadline)
            return []
        case .idle, .active, .disconnecting:
            return []
        }
    }

    private mutating func logoutAnswered() -> [Action] {
        switch state {
        case .disconnecting: return loggedOut()
        case .idle, .logining, .active, .reconnecting: return []
        }
    }

    private mutating func kicked(_ code: ErrorCode, _ message: String) -> [Action] {
        switch state {
        case .logining: return fail(.loginFailed, code, message)
        case .active, .reconnecting, .disconnecting: return kick(code, message)
        case .idle: return []
        }
    }

    private mutating func deadlinePassed() -> [Action] {
        switch state {
        case .logining: return fail(.loginFailed, .timedOut, "login timed out")
        case .reconnecting: return fail(.reconnectFailed, .timedOut, "reconnect window passed")
        case .idle, .active, .disconnecting: return []
        }
    }

    private mutating func logoutRequested(connectionReady: Bool) -> [Action] {
        switch state {
        case .active:
            var actions: [Action] = []
            state = .disconnecting
            setPhase(.disconnecting, into: &actions)
            if connectionReady {
                actions.append(.sendLogout)
            } else {
                actions += loggedOut()
            }
            return actions
        case .logining(true, let deadline, _):
            // The login is on the wire: log out once it is answered.
            state = .logining(sent: true, deadline: deadline, logoutRequested: true)
            return []
        case .logining(false, _, _):
            var actions: [Action] = [.cancelDeadline]
            actions.append(.finishLogin(RoomError(code: .success, message: "logged out before login completed", reason: .logout)))
            return actions + loggedOut()
        case .reconnecting:
            // Logout during backoff stops the retries at once.
            return [.cancelDeadline] + loggedOut()
        case .idle, .disconnecting:
            return []  // LOGOUT_FAILED / a logout already under way: the host answers
        }
    }

    private mutating func fail(_ reason: RoomReason, _ code: ErrorCode, _ message: String, cause: ErrorCode? = nil) -> [Action] {
        let wasLogining: Bool
        if case .logining = state { wasLogining = true } else { wasLogining = false }
        var actions: [Action] = [.cancelDeadline]
        state = .idle
        report(reason, code, cause: cause, into: &actions)
        if wasLogining { actions.append(.finishLogin(RoomError(code: code, message: message, reason: reason))) }
        actions.append(.forgetSession)
        return actions
    }

    private mutating func kick(_ code: ErrorCode, _ message: String) -> [Action] {
        var actions: [Action] = [.cancelDeadline]
        state = .idle
        report(.kickOut, code, into: &actions)
        actions.append(.kickedWithReason(code, message))
        actions.append(.forgetSession)
        return actions
    }

    private mutating func loggedOut() -> [Action] {
        var actions: [Action] = []
        state = .idle
        report(.logout, .success, into: &actions)
        actions.append(.finishLogout)
        actions.append(.forgetSession)
        return actions
    }

    private mutating func report(_ reason: RoomReason, _ code: ErrorCode, cause: ErrorCode? = nil, into actions: inout [Action]) {
        if let phase = reason.phase { setPhase(phase, into: &actions) }
        actions.append(.report(reason, code, cause: cause))
    }

    private mutating func setPhase(_ next: RoomPhase, into actions: inout [Action]) {
        guard next != phase else { return }
        phase = next
        actions.append(.phase(next))
    }
}
