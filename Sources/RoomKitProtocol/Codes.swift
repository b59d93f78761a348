// Result codes of the room protocol (PROTOCOL.md §3) and WebSocket close codes.

/// A numeric result code carried in replies, `error` pushes, `kicked` pushes
/// and client-side state changes (PROTOCOL.md §3).
///
/// A struct rather than an enum so that codes added by a newer server still
/// decode; compare against the static constants.
public struct ErrorCode: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    /// The number as sent on the wire.
    public let rawValue: Int

    /// Wraps a wire number, known or not.
    public init(rawValue: Int) {
        self.rawValue = rawValue
    }

    // MARK: Seed codes

    /// 0: success.
    public static let success = ErrorCode(rawValue: 0)
    /// 1002002: logout of a room this connection is not logged in to.
    public static let logoutNotLoggedIn = ErrorCode(rawValue: 1_002_002)
    /// 1002033: token invalid, expired, or not for this room/user.
    public static let tokenInvalid = ErrorCode(rawValue: 1_002_033)
    /// 1002050: kicked because the same user ID logged in to the room elsewhere.
    public static let kickedDuplicateLogin = ErrorCode(rawValue: 1_002_050)
    /// 1002051: connection interrupted, reconnecting (client-side state only).
    public static let connectionInterrupted = ErrorCode(rawValue: 1_002_051)
    /// 1002053: login or reconnect timed out or gave up (client-side state only).
    public static let timedOut = ErrorCode(rawValue: 1_002_053)
    /// 1002055: kicked by the server's admin API.
    public static let kickedByAdmin = ErrorCode(rawValue: 1_002_055)
    /// 1002056: kicked because the session's token expired unrenewed.
    public static let kickedTokenExpired = ErrorCode(rawValue: 1_002_056)

    // MARK: Project codes

    /// 1009001: malformed message (not JSON, not an object, wrong field type,
    /// missing field).
    public static let malformed = ErrorCode(rawValue: 1_009_001)
    /// 1009002: unknown `op`.
    public static let unknownOp = ErrorCode(rawValue: 1_009_002)
    /// 1009003: not permitted (a read-only session writing, a reader token
    /// asking for `writable:true`).
    public static let notPermitted = ErrorCode(rawValue: 1_009_003)
    /// 1009004: rate limited.
    public static let rateLimited = ErrorCode(rawValue: 1_009_004)
    /// 1009005: room not logged in on this connection.
    public static let roomNotLoggedIn = ErrorCode(rawValue: 1_009_005)
    /// 1009006: invalid argument (well-typed but invalid value).
    public static let invalidArgument = ErrorCode(rawValue: 1_009_006)
    /// 1009007: already logged in to this room on this connection.
    public static let alreadyLoggedIn = ErrorCode(rawValue: 1_009_007)
    /// 1009008: stale fence: a `login` whose `fence` is lower than the
    /// highest this room and user have seen; the reply carries `fence`.
    public static let staleFence = ErrorCode(rawValue: 1_009_008)
    /// 1009500: server internal error.
    public static let internalError = ErrorCode(rawValue: 1_009_500)

    /// Every code defined by PROTOCOL.md §3, in table order.
    public static let allKnown: [ErrorCode] = [
        .success, .logoutNotLoggedIn, .tokenInvalid, .kickedDuplicateLogin,
        .connectionInterrupted, .timedOut, .kickedByAdmin, .kickedTokenExpired,
        .malformed, .unknownOp, .notPermitted, .rateLimited, .roomNotLoggedIn,
        .invalidArgument, .alreadyLoggedIn, .staleFence, .internalError,
    ]

    /// The constant's name for a known code, else `nil`.
    public var name: String? {
        switch rawValue {
        case 0: return "success"
        case 1_002_002: return "logoutNotLoggedIn"
        case 1_002_033: return "tokenInvalid"
        case 1_002_050: return "kickedDuplicateLogin"
        case 1_002_051: return "connectionInterrupted"
        case 1_002_053: return "timedOut"
        case 1_002_055: return "kickedByAdmin"
        case 1_002_056: return "kickedTokenExpired"
        case 1_009_001: return "malformed"
        case 1_009_002: return "unknownOp"
        case 1_009_003: return "notPermitted"
        case 1_009_004: return "rateLimited"
        case 1_009_005: return "roomNotLoggedIn"
        case 1_009_006: return "invalidArgument"
        case 1_009_007: return "alreadyLoggedIn"
        case 1_009_008: return "staleFence"
        case 1_009_500: return "internalError"
        default: return nil
        }
    }

    /// Whether the code is one of the `kicked` push codes (1002050, 1002055,
    /// 1002056), which end a session for good.
    public var isKick: Bool {
        self == .kickedDuplicateLogin || self == .kickedByAdmin || self == .kickedTokenExpired
    }

    /// "1009001 (malformed)", or just the number for an unknown code.
    public var description: String {
        if let name { return "\(rawValue) (\(name))" }
        return String(rawValue)
    }
}

/// WebSocket close codes (RFC 6455 §7.4) that the room protocol uses.
public enum WebSocketCloseCode {
    /// 1000: normal closure.
    public static let normal: UInt16 = 1000
    /// 1001: going away; also a connection silent for `heartbeatTimeout`.
    public static let goingAway: UInt16 = 1001
    /// 1002: protocol error; also anything sent before `hello`.
    public static let protocolError: UInt16 = 1002
    /// 1008: policy violation; a connection over its request rate for 2 s.
    public static let policyViolation: UInt16 = 1008
    /// 1009: message too big (over `maxMessageBytes`).
    public static let messageTooBig: UInt16 = 1009
    /// 1013: try again later; the outbound queue overflowed (the client resumes).
    public static let tryAgainLater: UInt16 = 1013
}
