// A JSON value type shared by every message of the room protocol.
//
// Parsing lives in JSON+Parse.swift, serialization in JSON+Serialize.swift
// and the Codable bridge in JSON+Codable.swift.

/// A JSON value (RFC 8259).
///
/// Numbers keep the distinction the wire makes: an integer literal without
/// fraction or exponent that fits `Int64` is ``int(_:)``; every other number
/// is ``double(_:)``. Two values are equal only if they have the same case,
/// so `.int(2) != .double(2)`.
///
/// Values are immutable and `Sendable`; build them with the literal syntax
/// (`let v: JSON = ["op": "ping", "t": 12]`) or with the cases directly.
public enum JSON: Sendable, Hashable {
    /// The JSON `null`.
    case null
    /// `true` or `false`.
    case bool(Bool)
    /// An integer number that fits in 64 bits.
    case int(Int64)
    /// Any other number. Never NaN or infinite when produced by the parser.
    case double(Double)
    /// A string of Unicode text.
    case string(String)
    /// An ordered list of values.
    case array([JSON])
    /// An object; key order is not significant (see `serialized(sortedKeys:)`).
    case object([String: JSON])
}

// MARK: - Accessors

extension JSON {
    /// The member named `key` if this is an object that has it, else `nil`.
    public subscript(key: String) -> JSON? {
        guard case .object(let members) = self else { return nil }
        return members[key]
    }

    /// The element at `index` if this is an array and the index is in range,
    /// else `nil`. Never traps.
    public subscript(index: Int) -> JSON? {
        guard case .array(let elements) = self, elements.indices.contains(index) else {
            return nil
        }
        return elements[index]
    }

    /// The string if this is ``string(_:)``.
    public var stringValue: String? {
        guard case .string(let value) = self else { return nil }
        return value
    }

    /// The integer if this is ``int(_:)``, or a ``double(_:)`` holding an
    /// integral value that fits `Int64` exactly; otherwise `nil`.
    public var int64Value: Int64? {
        switch self {
        case .int(let value):
            return value
        case .double(let value):
            return Int64(exactly: value)
        default:
            return nil
        }
    }

    /// ``int64Value`` converted to `Int` when it fits.
    public var intValue: Int? {
        guard let value = int64Value else { return nil }
        return Int(exactly: value)
    }

    /// The number as a `Double`: a ``double(_:)`` as is, an ``int(_:)``
    /// converted (rounding to the nearest representable value).
    public var doubleValue: Double? {
        switch self {
        case .int(let value):
            return Double(value)
        case .double(let value):
            return value
        default:
            return nil
        }
    }

    /// The Boolean if this is ``bool(_:)``.
    public var boolValue: Bool? {
        guard case .bool(let value) = self else { return nil }
        return value
    }

    /// The members if this is ``object(_:)``.
    public var objectValue: [String: JSON]? {
        guard case .object(let value) = self else { return nil }
        return value
    }

    /// The elements if this is ``array(_:)``.
    public var arrayValue: [JSON]? {
        guard case .array(let value) = self else { return nil }
        return value
    }

    /// Whether this is ``null``.
    public var isNull: Bool {
        if case .null = self { return true }
        return false
    }

    /// Whether this is a number (``int(_:)`` or ``double(_:)``).
    public var isNumber: Bool {
        switch self {
        case .int, .double:
            return true
        default:
            return false
        }
    }

    /// The name of this value's JSON type ("null", "boolean", "number",
    /// "string", "array", "object"), for error messages.
    public var typeName: String {
        switch self {
        case .null: return "null"
        case .bool: return "boolean"
        case .int, .double: return "number"
        case .string: return "string"
        case .array: return "array"
        case .object: return "object"
        }
    }
}

// MARK: - Literals

extension JSON: ExpressibleByNilLiteral {
    /// `nil` in a JSON literal is ``null``.
    public init(nilLiteral: ()) {
        self = .null
    }
}

extension JSON: ExpressibleByBooleanLiteral {
    /// A Boolean literal is ``bool(_:)``.
    public init(booleanLiteral value: Bool) {
        self = .bool(value)
    }
}

extension JSON: ExpressibleByIntegerLiteral {
    /// An integer literal is ``int(_:)``.
    public init(integerLiteral value: Int64) {
        self = .int(value)
    }
}

extension JSON: ExpressibleByFloatLiteral {
    /// A floating-point literal is ``double(_:)``.
    public init(floatLiteral value: Double) {
        self = .double(value)
    }
}

extension JSON: ExpressibleByStringLiteral {
    /// A string literal is ``string(_:)``.
    public init(stringLiteral value: String) {
        self = .string(value)
    }
}

/// An interpolated string literal (`"room-\(n)"`) is ``string(_:)``.
extension JSON: ExpressibleByStringInterpolation {}

extension JSON: ExpressibleByArrayLiteral {
    /// An array literal is ``array(_:)``.
    public init(arrayLiteral elements: JSON...) {
        self = .array(elements)
    }
}

extension JSON: ExpressibleByDictionaryLiteral {
    /// A dictionary literal is ``object(_:)``; a repeated key keeps its last value.
    public init(dictionaryLiteral elements: (String, JSON)...) {
        var members: [String: JSON] = [:]
        members.reserveCapacity(elements.count)
        for (key, value) in elements {
            members[key] = value
        }
        self = .object(members)
    }
}

extension JSON: CustomStringConvertible {
    /// The compact serialization with sorted keys, for logs and test output.
    public var description: String {
        String(decoding: serialized(sortedKeys: true), as: UTF8.self)
    }
}
