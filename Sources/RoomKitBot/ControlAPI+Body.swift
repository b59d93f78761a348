import RoomKitProtocol

/// A control-API request body that is not what its endpoint takes: 400
/// with `code` 1009001 and this message, which names the field.
struct BodyError: Error {
    let message: String
}

/// A control-API request body checked against the fields its endpoint
/// takes (docs/CLI.md "Control API"): not a JSON object, an unknown field
/// (a typo such as `tokn` must not fall back to a default) or a value of the
/// wrong type (`"writable":"yes"`) is refused, naming the field. An empty
/// body is an empty object. Pure logic.
struct ControlBody {
    /// The JSON type a field must have.
    enum Kind: Sendable {
        case string, boolean, object, array, integer, number, any
        /// An array whose every element is a string.
        case strings

        func accepts(_ value: JSON) -> Bool {
            switch self {
            case .string: return value.stringValue != nil
            case .boolean: return value.boolValue != nil
            case .object: return value.objectValue != nil
            case .array: return value.arrayValue != nil
            case .integer: if case .int = value { return true } else { return false }
            case .number: return value.isNumber
            case .any: return true
            case .strings: return value.arrayValue?.allSatisfy { $0.stringValue != nil } ?? false
            }
        }

        var name: String {
            switch self {
            case .string: return "a string"
            case .boolean: return "a boolean"
            case .object: return "an object"
            case .array: return "an array"
            case .integer: return "an integer"
            case .number: return "a number"
            case .any: return "any JSON value"
            case .strings: return "an array of strings"
            }
        }
    }

    /// The body's fields, each known and of its kind.
    let fields: [String: JSON]

    /// Checks `body` against `accepts` (field → kind); every field in
    /// `requires` must be present. Throws naming the first problem, fields
    /// in alphabetical order.
    init(_ body: [UInt8], accepts: [String: Kind], requires: Set<String> = []) throws(BodyError) {
        var object: [String: JSON] = [:]
        if !body.isEmpty {
            guard let parsed = try? JSON.parse(body).objectValue else { throw BodyError(message: "body must be a JSON object") }
            object = parsed
        }
        for key in object.keys.sorted() {
            guard let kind = accepts[key] else {
                let known = accepts.keys.sorted()
                throw BodyError(message: "body.\(key): unknown field"
                                + (known.isEmpty ? " (this endpoint takes no body fields)" : " (known: \(known.joined(separator: ", ")))"))
            }
            if let value = object[key], !kind.accepts(value) {
                throw BodyError(message: "body.\(key) must be \(kind.name), not \(value.typeName)")
            }
        }
        for key in requires.sorted() where object[key] == nil {
            throw BodyError(message: "body.\(key) is missing (\(accepts[key]?.name ?? "a value"))")
        }
        fields = object
    }

    subscript(_ key: String) -> JSON? { fields[key] }
}
