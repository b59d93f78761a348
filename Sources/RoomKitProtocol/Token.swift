// Room tokens: JWT (RFC 7519) signed with HS256 (PROTOCOL.md §9): the
// claims and errors. The signer (OpenSSL's HMAC) is RoomKitTokens.TokenSigner.

/// What a token's holder may do in its room.
public enum TokenRole: String, Sendable, Hashable, CaseIterable {
    /// Read-only: a session with this role is never writable.
    case reader
    /// May write (`setState`, `magix`, scenes, ...).
    case writer
    /// Everything a writer may, plus the server's admin API.
    case admin
    /// Everything a writer may; sent in `hello`, it gives the connection the
    /// server's larger service request bucket (a bot host with many rooms on
    /// one connection; docs/PROTOCOL.md "Service connections").
    case service

    /// Whether a session with this role may be writable.
    public var canWrite: Bool { self != .reader }
}

/// The claims of a room token.
public struct TokenClaims: Sendable, Hashable {
    /// The user ID (`sub`).
    public var sub: String
    /// The room ID the token is for, or `*` for any room.
    public var room: String
    /// The holder's role.
    public var role: TokenRole
    /// Expiry, in seconds since the Unix epoch.
    public var exp: Int64
    /// Issue time, in seconds since the Unix epoch.
    public var iat: Int64
    /// Not-before time, in seconds since the Unix epoch, if any.
    public var nbf: Int64?
    /// The issuing app's ID, if any.
    public var app: String?

    /// Creates a claims set.
    public init(
        sub: String, room: String, role: TokenRole, exp: Int64, iat: Int64,
        nbf: Int64? = nil, app: String? = nil
    ) {
        self.sub = sub
        self.room = room
        self.role = role
        self.exp = exp
        self.iat = iat
        self.nbf = nbf
        self.app = app
    }

    /// Whether the token is for `room`: its `room` claim is `*` or equal.
    public func allows(room: String) -> Bool {
        self.room == "*" || self.room == room
    }

    /// ``exp`` in milliseconds (the unit of `expiresAt` in replies), saturating.
    public var expiresAtMilliseconds: Int64 {
        let (value, overflow) = exp.multipliedReportingOverflow(by: 1000)
        return overflow ? (exp < 0 ? .min : .max) : value
    }

    /// The JWT payload (claims set). `nbf` and `app` are left out when nil.
    public var json: JSON {
        .object(
            Dictionary(dropNils: [
                "sub": .string(sub), "room": .string(room), "role": .string(role.rawValue),
                "exp": .int(exp), "iat": .int(iat), "nbf": nbf.map(JSON.int), "app": app.map(JSON.string),
            ]))
    }
}

/// Why a token was refused. The message never contains the token or the secret.
public struct TokenError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The class of a token failure.
    public enum Reason: String, Sendable, Hashable {
        /// Not three base64url parts of JSON objects, or too long.
        case malformed
        /// `alg` is not `HS256` (including `none`).
        case badAlgorithm
        /// The signature does not match (tampered, or another secret).
        case badSignature
        /// `exp` has passed.
        case expired
        /// `nbf` is in the future.
        case notYetValid
        /// A required claim is missing or of the wrong type, or `role` is unknown.
        case badClaims
    }

    /// What was wrong.
    public let reason: Reason
    /// A short explanation, safe to log and to send to the client.
    public let message: String

    /// Creates an error.
    public init(reason: Reason, message: String) {
        self.reason = reason
        self.message = message
    }

    /// The wire code for any token failure: 1002033.
    public var code: ErrorCode { .tokenInvalid }

    /// The error as a reply would carry it.
    public var protocolError: ProtocolError {
        ProtocolError(code: code, message: message)
    }

    /// "badSignature: token signature mismatch".
    public var description: String { "\(reason.rawValue): \(message)" }
}
