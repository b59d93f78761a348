import CHiredis
import CRoomKitRedis

/// One Redis reply, copied out of hiredis's `redisReply` (which hiredis
/// frees as soon as the reply callback returns).
public enum RedisValue: Sendable, Hashable, CustomStringConvertible {
    /// A bulk string (binary-safe; use `string` for UTF-8 text).
    case bulk([UInt8])
    /// A status reply such as `OK`.
    case status(String)
    /// An integer reply.
    case integer(Int64)
    /// An array reply (nested replies keep their types).
    case array([RedisValue])
    /// The nil bulk or nil array.
    case null
    /// An error reply, e.g. `NOSCRIPT No matching script`.
    case error(String)

    /// The value as text: bulk strings (UTF-8), status and error text, integers.
    public var string: String? {
        switch self {
        case .bulk(let bytes): return String(decoding: bytes, as: UTF8.self)
        case .status(let text), .error(let text): return text
        case .integer(let value): return String(value)
        default: return nil
        }
    }

    /// The value as an integer: integer replies, or bulk strings holding one.
    public var integer: Int64? {
        switch self {
        case .integer(let value): return value
        case .bulk: return string.flatMap { Int64($0) }
        default: return nil
        }
    }

    /// The elements of an array reply (empty for anything else).
    public var array: [RedisValue] {
        if case .array(let elements) = self { return elements }
        return []
    }

    /// A short text form for logs: `"text"`, `+OK`, `:1`, `[...]`, `nil`, `-ERR ...`.
    public var description: String {
        switch self {
        case .bulk: return "\"\(string ?? "")\""
        case .status(let text): return "+\(text)"
        case .integer(let value): return ":\(value)"
        case .array(let elements): return "[" + elements.map(\.description).joined(separator: ", ") + "]"
        case .null: return "nil"
        case .error(let text): return "-\(text)"
        }
    }

    /// Copies a hiredis reply (recursively). Called inside the reply callback.
    init(reply: UnsafePointer<redisReply>) {
        let r = reply.pointee
        switch r.type {
        case Int32(RK_REDIS_REPLY_STRING):
            self = .bulk(Self.bytes(r.str, r.len))
        case Int32(RK_REDIS_REPLY_STATUS):
            self = .status(String(decoding: Self.bytes(r.str, r.len), as: UTF8.self))
        case Int32(RK_REDIS_REPLY_ERROR):
            self = .error(String(decoding: Self.bytes(r.str, r.len), as: UTF8.self))
        case Int32(RK_REDIS_REPLY_INTEGER):
            self = .integer(r.integer)
        case Int32(RK_REDIS_REPLY_ARRAY):
            var elements: [RedisValue] = []
            elements.reserveCapacity(Int(r.elements))
            for index in 0..<Int(r.elements) {
                if let element = r.element[index] {
                    elements.append(RedisValue(reply: element))
                } else {
                    elements.append(.null)
                }
            }
            self = .array(elements)
        default:
            self = .null
        }
    }

    private static func bytes(_ pointer: UnsafeMutablePointer<CChar>?, _ length: Int) -> [UInt8] {
        guard let pointer, length > 0 else { return [] }
        return Array(UnsafeRawBufferPointer(start: pointer, count: length))
    }
}

/// Why a Redis command did not get a reply.
public struct RedisError: Error, Hashable, Sendable, CustomStringConvertible {
    /// What kind of failure this is.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        let raw: String
        /// Not connected, or the connection was lost before the reply.
        public static let disconnected = Code(raw: "disconnected")
        /// No reply within the command timeout (the connection is then dropped).
        public static let timedOut = Code(raw: "timedOut")
        /// The server answered with an error reply.
        public static let server = Code(raw: "server")
        /// The client was closed.
        public static let closed = Code(raw: "closed")
        public var description: String { raw }
    }

    /// The failure's kind.
    public let code: Code
    /// What happened, naming the server.
    public let message: String

    /// Creates an error.
    public init(code: Code, message: String) {
        self.code = code
        self.message = message
    }

    /// "redis timedOut: no reply from redis://…".
    public var description: String { "redis \(code): \(message)" }
}

/// Where a Redis server is, and who to be there: parsed from
/// `redis://[[USER]:PASSWORD@]HOST[:PORT][/DB]`. With a password the client
/// sends `AUTH [USER] PASSWORD` (Redis 6 ACL users, or `requirepass`) before
/// anything else. `description` never shows the password.
public struct RedisEndpoint: Sendable, Hashable, CustomStringConvertible {
    /// Host name or address.
    public var host: String
    /// TCP port (default 6379).
    public var port: Int
    /// Database number selected after connecting (default 0).
    public var database: Int
    /// The ACL user to authenticate as (nil: Redis's `default` user).
    public var username: String?
    /// The password sent with `AUTH` (nil: no AUTH).
    public var password: String?

    /// Creates an endpoint.
    public init(host: String, port: Int = 6379, database: Int = 0, username: String? = nil, password: String? = nil) {
        self.host = host
        self.port = port
        self.database = database
        self.username = username
        self.password = password
    }

    /// Parses `redis://[[USER]:PASSWORD@]HOST[:PORT][/DB]` (`%XX` escapes in
    /// USER and PASSWORD, for `@`, `:` or `/` in them); nil when it is not one.
    public init?(url: String) {
        guard url.hasPrefix("redis://") else { return nil }
        var rest = Substring(url.dropFirst("redis://".count))
        var username: String?
        var password: String?
        if let at = rest.lastIndex(of: "@") {
            let userinfo = rest[..<at]
            rest = rest[rest.index(after: at)...]
            if let colon = userinfo.firstIndex(of: ":") {
                guard let user = Self.percentDecoded(userinfo[..<colon]),
                      let secret = Self.percentDecoded(userinfo[userinfo.index(after: colon)...]), !secret.isEmpty
                else { return nil }
                username = user.isEmpty ? nil : user
                password = secret
            } else {
                guard let user = Self.percentDecoded(userinfo), !user.isEmpty else { return nil }
                username = user
            }
        }
        var database = 0
        if let slash = rest.firstIndex(of: "/") {
            let tail = rest[rest.index(after: slash)...]
            if !tail.isEmpty {
                guard let db = Int(tail), db >= 0 else { return nil }
                database = db
            }
            rest = rest[..<slash]
        }
        var port = 6379
        if let colon = rest.lastIndex(of: ":") {
            guard let parsed = Int(rest[rest.index(after: colon)...]), (1...65535).contains(parsed) else { return nil }
            port = parsed
            rest = rest[..<colon]
        }
        guard !rest.isEmpty, !rest.contains("@") else { return nil }
        self.init(host: String(rest), port: port, database: database, username: username, password: password)
    }

    /// `text` with its `%XX` escapes decoded; nil for a bad escape or invalid UTF-8.
    static func percentDecoded(_ text: Substring) -> String? {
        var bytes: [UInt8] = []
        var index = text.utf8.startIndex
        let utf8 = text.utf8
        while index < utf8.endIndex {
            let byte = utf8[index]
            if byte == UInt8(ascii: "%") {
                let first = utf8.index(after: index)
                guard first < utf8.endIndex, utf8.index(after: first) < utf8.endIndex,
                      let value = UInt8(String(decoding: [utf8[first], utf8[utf8.index(after: first)]], as: UTF8.self), radix: 16)
                else { return nil }
                bytes.append(value)
                index = utf8.index(first, offsetBy: 2)
            } else {
                bytes.append(byte)
                index = utf8.index(after: index)
            }
        }
        return String(validating: bytes, as: UTF8.self)
    }

    /// The URL form without the password: `redis://host:port/db`, or
    /// `redis://user:***@host:port/db` (`:***@` when there is a password).
    public var description: String {
        let user = username ?? ""
        let credentials = password != nil ? "\(user):***@" : (username != nil ? "\(user)@" : "")
        return "redis://\(credentials)\(host):\(port)/\(database)"
    }
}
