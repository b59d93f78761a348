import RoomKitProtocol

/// Why a room's connection state changed: the seed's nine reasons, with the
/// error codes PROTOCOL.md §11 gives them. Delivered by `onRoomStateChanged`.
public enum RoomReason: String, Sendable, Hashable, CaseIterable, CustomStringConvertible {
    /// `loginRoom`, or `switchRoom` into the target room, started (0).
    case logining = "LOGINING"
    /// Login (or switch) succeeded (0).
    case logined = "LOGINED"
    /// Login failed: 1002033 bad token, 1002053 timed out, or the server's code. No retry.
    case loginFailed = "LOGIN_FAILED"
    /// A logged-in session's connection was lost; retrying (1002051).
    case reconnecting = "RECONNECTING"
    /// Resume succeeded (0).
    case reconnected = "RECONNECTED"
    /// The reconnect window passed without success (1002053). No more retries.
    case reconnectFailed = "RECONNECT_FAILED"
    /// Kicked: 1002050 duplicate login, 1002055 admin, 1002056 token expired.
    case kickOut = "KICK_OUT"
    /// Logged out (also the switched-away room); the state before any login (0).
    case logout = "LOGOUT"
    /// Logout of a room ID that is not logged in (1002002).
    case logoutFailed = "LOGOUT_FAILED"

    public var description: String { rawValue }

    /// The whiteboard phase this reason puts the room in (LOGOUT_FAILED changes none).
    public var phase: RoomPhase? {
        switch self {
        case .logining: return .connecting
        case .logined, .reconnected: return .connected
        case .reconnecting: return .reconnecting
        case .loginFailed, .reconnectFailed, .kickOut, .logout: return .disconnected
        case .logoutFailed: return nil
        }
    }
}

/// The whiteboard seed's connection phases. `firePhaseChanged` fires on each change.
public enum RoomPhase: String, Sendable, Hashable, CaseIterable, CustomStringConvertible {
    case connecting, connected, reconnecting, disconnecting, disconnected
    public var description: String { rawValue }
}

/// An error from the room engine, carrying the seed's error code where one applies.
public struct RoomError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The code: a seed or protocol code (`ErrorCode`), or 0 for engine-side misuse.
    public let code: ErrorCode
    /// What happened, for people.
    public let message: String
    /// The room state reason reported with this error, when there is one.
    public let reason: RoomReason?
    /// With 1009008 (stale fence): the server's current fence for the room
    /// and user, so a fleet can move its counter past it (docs/FLEET.md).
    public var currentFence: Int64?

    public init(code: ErrorCode, message: String, reason: RoomReason? = nil) {
        self.code = code
        self.message = message
        self.reason = reason
    }

    public var description: String {
        "\(reason.map { "\($0) " } ?? "")\(code.rawValue): \(message)"
    }

    /// The outcome of an in-flight request is unknown: its connection was lost.
    /// If the session resumes with recovery, the replay shows whether it applied.
    public static func interrupted(_ what: String) -> RoomError {
        RoomError(code: .connectionInterrupted, message: "connection lost while \(what) was in flight; outcome unknown")
    }
}

extension ErrorCode {
    /// Kick codes: a `kicked` push, or a resume refused with one of them, is KICK_OUT.
    var isKick: Bool {
        self == .kickedDuplicateLogin || self == .kickedByAdmin || self == .kickedTokenExpired
    }
}
