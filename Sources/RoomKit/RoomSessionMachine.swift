import RoomKitProtocol

/// The lifecycle of one room session as a value with no I/O: it takes an
/// input and the current time (ms on a monotonic clock) and returns the
/// actions the driver must perform. The seed's rules (login timeout, the
/// reconnect window, kicks, logout) live here and are unit-tested with an
/// injected clock.
public struct RoomSessionMachine: Sendable, Hashable {
    /// Where the session is.
    public enum State: Sendable, Hashable {
        /// Not logged in (before any login, or after LOGOUT / a failure / a kick).
        case idle
        /// Login requested; `sent` once the login request is on the wire.
        case logining(sent: Bool, deadline: Int64)
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

    /// What the driver must do, in order.
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
    /// Whether `logoutRoom` was called while the login was in flight.
    private var logoutAfterLogin = false

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

    public mutating func handle(_ input: Input, now: Int64, connectionReady: Bool) -> [Action] {
        var actions: [Action] = []
        switch (state, input) {
        case (.idle, .loginRequested):
            let deadline = now + loginTimeout
            state = .logining(sent: connectionReady, deadline: deadline)
            report(.logining, .success, into: &actions)
            actions.append(.setDeadline(deadline))
            if connectionReady { actions.append(.sendLogin(resume: false)) }

        case (.idle, .loginImpossible(let code, let message)):
            report(.logining, .success, into: &actions)
            report(.loginFailed, code, into: &actions)
            actions.append(.finishLogin(RoomError(code: code, message: message, reason: .loginFailed)))
        case (.logining(true, let deadline), .loginWithdrawn):
            state = .logining(sent: false, deadline: deadline)

        case (.logining(false, let deadline), .connectionReady):
            state = .logining(sent: true, deadline: deadline)
            actions.append(.sendLogin(resume: false))
        case (.logining(true, let deadline), .connectionLost):
            // The login's fate is unknown; try again on the next connection.
            state = .logining(sent: false, deadline: deadline)
        case (.logining, .loginSucceeded):
            actions.append(.cancelDeadline)
            state = .active
            report(.logined, .success, into: &actions)
            actions.append(.finishLogin(nil))
            if logoutAfterLogin {
                logoutAfterLogin = false
                actions += handle(.logoutRequested, now: now, connectionReady: connectionReady)
            }
        case (.logining, .loginFailed(let code, let message)):
            actions += fail(.loginFailed, code, message)
        case (.logining, .kicked(let code, let message)):
            actions += fail(.loginFailed, code, message)
        case (.logining, .deadlinePassed):
            actions += fail(.loginFailed, .timedOut, "login timed out")

        case (.active, .connectionLost(let why)):
            let deadline = now + reconnectWindow
            state = .reconnecting(sent: false, deadline: deadline)
            report(.reconnecting, .connectionInterrupted, into: &actions)
            actions.append(.disconnected(why))
            actions.append(.setDeadline(deadline))
        case (.reconnecting(false, let deadline), .connectionReady):
            state = .reconnecting(sent: true, deadline: deadline)
            actions.append(.sendLogin(resume: true))
        case (.reconnecting(true, let deadline), .connectionLost):
            state = .reconnecting(sent: false, deadline: deadline)
        case (.reconnecting, .loginSucceeded):
            actions.append(.cancelDeadline)
            state = .active
            report(.reconnected, .success, into: &actions)
        case (.reconnecting(_, let deadline), .loginFailed(let code, let message)):
            if code.isKick {
                actions += kick(code, message)
            } else if code == .tokenInvalid || code == .notPermitted {
                // The server will not take us back with this token: no retry
                // helps. RECONNECT_FAILED is 1002053 (seed, PROTOCOL.md §11);
                // the server's refusal travels as the cause.
                actions += fail(.reconnectFailed, .timedOut, message, cause: code)
            } else {
                // Transient (rate limit, server error): the driver retries on the next connection.
                state = .reconnecting(sent: false, deadline: deadline)
            }
        case (.reconnecting, .deadlinePassed):
            actions += fail(.reconnectFailed, .timedOut, "reconnect window passed")

        case (.active, .kicked(let code, let message)), (.reconnecting, .kicked(let code, let message)),
             (.disconnecting, .kicked(let code, let message)):
            actions += kick(code, message)

        case (.active, .logoutRequested):
            state = .disconnecting
            setPhase(.disconnecting, into: &actions)
            if connectionReady {
                actions.append(.sendLogout)
            } else {
                actions += loggedOut()
            }
        case (.logining(let sent, _), .logoutRequested):
            if sent {
                logoutAfterLogin = true
            } else {
                actions.append(.cancelDeadline)
                actions.append(.finishLogin(RoomError(code: .success, message: "logged out before login completed", reason: .logout)))
                actions += loggedOut()
            }
        case (.reconnecting, .logoutRequested):
            // Logout during backoff stops the retries at once.
            actions.append(.cancelDeadline)
            actions += loggedOut()
        case (.disconnecting, .logoutAnswered), (.disconnecting, .connectionLost):
            actions += loggedOut()

        default:
            break
        }
        return actions
    }

    private mutating func fail(_ reason: RoomReason, _ code: ErrorCode, _ message: String, cause: ErrorCode? = nil) -> [Action] {
        let wasLogining: Bool
        if case .logining = state { wasLogining = true } else { wasLogining = false }
        var actions: [Action] = [.cancelDeadline]
        state = .idle
        logoutAfterLogin = false
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
