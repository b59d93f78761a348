// The error type of protocol validation, and the limits it enforces.

/// A protocol-level failure: the code and message a `reply` or `error`
/// push carries (PROTOCOL.md §2, §3).
public struct ProtocolError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The wire code.
    public let code: ErrorCode
    /// A short human-readable explanation; never contains secrets.
    public let message: String
    /// For 1009008 (stale fence) replies: the server's current fence for the
    /// room and user (PROTOCOL.md §6). Nil otherwise.
    public var currentFence: Int64?

    /// Creates an error with `code` and `message`.
    public init(code: ErrorCode, message: String) {
        self.code = code
        self.message = message
    }

    /// A 1009001 error: not an object, missing field, wrong JSON type.
    public static func malformed(_ message: String) -> ProtocolError {
        ProtocolError(code: .malformed, message: message)
    }

    /// A 1009006 error: a well-typed but invalid value.
    public static func invalidArgument(_ message: String) -> ProtocolError {
        ProtocolError(code: .invalidArgument, message: message)
    }

    /// "1009006 (invalidArgument): bad scene path".
    public var description: String {
        "\(code): \(message)"
    }
}

/// Size limits this module enforces on request fields. PROTOCOL.md gives
/// the event, extra-info and room-ID limits; the others are this project's
/// choices, large enough for any sane client and small enough to bound memory.
public enum ProtocolLimits {
    /// `magix` `event`: at most 128 UTF-8 bytes (and not empty).
    public static let maxEventBytes = 128
    /// `setExtraInfo` `key`: at most 128 UTF-8 bytes (and not empty).
    public static let maxExtraInfoKeyBytes = 128
    /// `setExtraInfo` `value`: at most 4 KiB of UTF-8.
    public static let maxExtraInfoValueBytes = 4096
    /// A scene or directory name: at most 256 UTF-8 bytes.
    public static let maxSceneNameBytes = 256
    /// A whole scene path: at most 1024 UTF-8 bytes.
    public static let maxScenePathBytes = 1024
    /// URLs (`image.url`, `ppt.src`): at most 4 KiB.
    public static let maxURLBytes = 4096
    /// Image UUIDs: at most 128 UTF-8 bytes.
    public static let maxUUIDBytes = 128
    /// `magix` `to`: at most 1000 recipients.
    public static let maxRecipients = 1000
    /// `user.name`: at most 256 UTF-8 bytes.
    public static let maxUserNameBytes = 256
    /// A token: at most 8 KiB (a longer one is rejected unread).
    public static let maxTokenBytes = 8192
    /// `login` `resume.session`: at most 128 UTF-8 bytes.
    public static let maxSessionBytes = 128
}

/// Typed access to the members of a JSON object while decoding, producing
/// ``ProtocolError``s that name the field: a missing required field or a
/// wrong JSON type is 1009001; the caller reports bad values as 1009006.
struct FieldReader {
    let members: [String: JSON]
    /// Prefix for messages, e.g. "image." (empty at the top level).
    let path: String

    init(_ members: [String: JSON], path: String = "") {
        self.members = members
        self.path = path
    }

    /// Reads `value` as an object, or throws 1009001 naming `what`.
    init(_ value: JSON, what: String) throws(ProtocolError) {
        guard case .object(let members) = value else {
            throw .malformed("\(what) must be an object")
        }
        self.init(members, path: what + ".")
    }

    func name(_ key: String) -> String { path + key }

    func present(_ key: String) -> JSON? {
        guard let value = members[key], !value.isNull else { return nil }
        return value
    }

    func require(_ key: String) throws(ProtocolError) -> JSON {
        guard let value = members[key] else { throw .malformed("missing \(name(key))") }
        return value
    }

    func wrongType(_ key: String, _ type: String) -> ProtocolError {
        .malformed("\(name(key)) must be \(type)")
    }

    func string(_ key: String) throws(ProtocolError) -> String {
        guard let value = try require(key).stringValue else { throw wrongType(key, "a string") }
        return value
    }

    func optionalString(_ key: String) throws(ProtocolError) -> String? {
        guard let value = present(key) else { return nil }
        guard let string = value.stringValue else { throw wrongType(key, "a string") }
        return string
    }

    func bool(_ key: String) throws(ProtocolError) -> Bool {
        guard let value = try require(key).boolValue else { throw wrongType(key, "a boolean") }
        return value
    }

    func optionalBool(_ key: String) throws(ProtocolError) -> Bool? {
        guard let value = present(key) else { return nil }
        guard let bool = value.boolValue else { throw wrongType(key, "a boolean") }
        return bool
    }

    /// A finite number (an integer is accepted and converted).
    func number(_ key: String) throws(ProtocolError) -> Double {
        guard let value = try require(key).doubleValue else { throw wrongType(key, "a number") }
        guard value.isFinite else { throw .invalidArgument("\(name(key)) must be finite") }
        return value
    }

    /// An integer: a number that is not integral is 1009006.
    func integer(_ key: String) throws(ProtocolError) -> Int64 {
        try Self.integer(try require(key), name: name(key))
    }

    func optionalInteger(_ key: String) throws(ProtocolError) -> Int64? {
        guard let value = present(key) else { return nil }
        return try Self.integer(value, name: name(key))
    }

    static func integer(_ value: JSON, name: String) throws(ProtocolError) -> Int64 {
        guard value.isNumber else { throw .malformed("\(name) must be a number") }
        guard let integer = value.int64Value else {
            throw .invalidArgument("\(name) must be an integer")
        }
        return integer
    }

    func object(_ key: String) throws(ProtocolError) -> [String: JSON] {
        guard let value = try require(key).objectValue else { throw wrongType(key, "an object") }
        return value
    }

    func array(_ key: String) throws(ProtocolError) -> [JSON] {
        guard let value = try require(key).arrayValue else { throw wrongType(key, "an array") }
        return value
    }

    func optionalArray(_ key: String) throws(ProtocolError) -> [JSON]? {
        guard let value = present(key) else { return nil }
        guard let array = value.arrayValue else { throw wrongType(key, "an array") }
        return array
    }
}

extension Dictionary where Key == String, Value == JSON {
    /// Members built from optional values: `nil` values are left out.
    init(dropNils pairs: KeyValuePairs<String, JSON?>) {
        self.init()
        for (key, value) in pairs {
            if let value { self[key] = value }
        }
    }
}
