import Foundation

/// Any JSON value, for the parts of room.v1 whose shape is the app's
/// (state, payloads, member state). Decoded by trying an object, an array,
/// then the scalars, most likely first.
enum JSONValue: Codable, Sendable {
    case null
    case bool(Bool)
    case int(Int64)
    case double(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    private struct Key: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    init(from decoder: any Decoder) throws {
        if let keyed = try? decoder.container(keyedBy: Key.self) {
            var object = [String: JSONValue](minimumCapacity: keyed.allKeys.count)
            for key in keyed.allKeys { object[key.stringValue] = try keyed.decode(JSONValue.self, forKey: key) }
            self = .object(object)
        } else if var unkeyed = try? decoder.unkeyedContainer() {
            var array: [JSONValue] = []
            while !unkeyed.isAtEnd { array.append(try unkeyed.decode(JSONValue.self)) }
            self = .array(array)
        } else {
            let single = try decoder.singleValueContainer()
            if single.decodeNil() { self = .null }
            else if let value = try? single.decode(String.self) { self = .string(value) }
            else if let value = try? single.decode(Int64.self) { self = .int(value) }
            else if let value = try? single.decode(Double.self) { self = .double(value) }
            else { self = .bool(try single.decode(Bool.self)) }
        }
    }

    func encode(to encoder: any Encoder) throws {
        var single = encoder.singleValueContainer()
        switch self {
        case .null: try single.encodeNil()
        case .bool(let value): try single.encode(value)
        case .int(let value): try single.encode(value)
        case .double(let value): try single.encode(value)
        case .string(let value): try single.encode(value)
        case .array(let value): try single.encode(value)
        case .object(let value): try single.encode(value)
        }
    }

    subscript(key: String) -> JSONValue? {
        if case .object(let object) = self { return object[key] }
        return nil
    }

    var int64: Int64? {
        switch self {
        case .int(let value): return value
        case .double(let value): return Int64(value)
        default: return nil
        }
    }
}

/// A room member (PROTOCOL.md §7).
struct Member: Decodable, Sendable {
    let memberId: Int
    let userId: String?
    let name: String?
    let payload: JSONValue?
    var memberState: [String: JSONValue]?
}

/// Every message the server sends (replies and pushes), one struct with the
/// fields of all of them optional: the usual Codable shape for a tagged
/// union whose tag is `op`.
struct Incoming: Decodable, Sendable {
    let op: String
    let id: Int?
    let ok: Bool?
    let code: Int?
    let room: String?
    let seq: Int?
    let from: Int?
    // hello reply
    let heartbeatInterval: Int?
    // login reply
    let session: String?
    let memberId: Int?
    let state: [String: JSONValue]?
    let members: [Member]?
    let streams: [JSONValue]?
    let extraInfo: [String: JSONValue]?
    // pushes
    let patch: [String: JSONValue]?
    let type: String?
    let users: [Member]?
    let memberState: [String: JSONValue]?
    let event: String?
    let payload: JSONValue?
}

struct Hello: Encodable {
    let op = "hello"
    let id: Int
    let client = "roomkit-nio-peer/0.1"
    let token: String?
}

struct Login: Encodable {
    struct User: Encodable { let id: String }
    struct Resume: Encodable { let session: String; let seq: Int }
    let op = "login"
    let id: Int
    let room: String
    let token: String
    let user: User
    let writable = true
    let resume: Resume?
}

struct Ping: Encodable {
    let op = "ping"
    let t: Int64
}
