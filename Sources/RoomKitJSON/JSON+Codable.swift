// The Codable bridge. The only file of this module that uses Foundation.

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

extension JSON: Codable {
    /// Decodes any JSON value through a single-value container, trying in
    /// order: null, Bool, Int64, Double, String, [JSON], [String: JSON].
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(Int64.self) {
            self = .int(value)
        } else if let value = try? container.decode(Double.self) {
            self = .double(value)
        } else if let value = try? container.decode(String.self) {
            self = .string(value)
        } else if let value = try? container.decode([JSON].self) {
            self = .array(value)
        } else if let value = try? container.decode([String: JSON].self) {
            self = .object(value)
        } else {
            throw DecodingError.dataCorruptedError(
                in: container, debugDescription: "value is not JSON")
        }
    }

    /// Encodes this value through a single-value container. Non-finite
    /// doubles encode as nil, as in ``serialized(sortedKeys:)``.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .null:
            try container.encodeNil()
        case .bool(let value):
            try container.encode(value)
        case .int(let value):
            try container.encode(value)
        case .double(let value):
            if value.isFinite {
                try container.encode(value)
            } else {
                try container.encodeNil()
            }
        case .string(let value):
            try container.encode(value)
        case .array(let value):
            try container.encode(value)
        case .object(let value):
            try container.encode(value)
        }
    }

    /// Decodes a `Decodable` value from this JSON (via its serialization and
    /// Foundation's `JSONDecoder` with default strategies).
    public func decode<T: Decodable>(_ type: T.Type) throws -> T {
        try JSONDecoder().decode(type, from: Data(serialized()))
    }

    /// Creates the JSON form of an `Encodable` value (via Foundation's
    /// `JSONEncoder` with default strategies, then `JSON.parse(_:maxDepth:)`).
    public init<T: Encodable>(encoding value: T) throws {
        let data = try JSONEncoder().encode(value)
        self = try JSON.parse(data)
    }
}
