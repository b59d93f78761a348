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

    /// Objects first (a payload's root), then the scalars, numbers first
    /// (its leaves), arrays last: each miss costs Codable a thrown error.
    init(from decoder: any Decoder) throws {
        if let keyed = try? decoder.container(keyedBy: Key.self) {
            var object = [String: JSONValue](minimumCapacity: keyed.allKeys.count)
            for key in keyed.allKeys { object[key.stringValue] = try keyed.decode(JSONValue.self, forKey: key) }
            self = .object(object)
            return
        }
        if let single = try? decoder.singleValueContainer() {
            if single.decodeNil() { self = .null; return }
            if let value = try? single.decode(Int64.self) { self = .int(value); return }
            if let value = try? single.decode(String.self) { self = .string(value); return }
            if let value = try? single.decode(Double.self) { self = .double(value); return }
            if let value = try? single.decode(Bool.self) { self = .bool(value); return }
        }
        var unkeyed = try decoder.unkeyedContainer()
        var array: [JSONValue] = []
        while !unkeyed.isAtEnd { array.append(try unkeyed.decode(JSONValue.self)) }
        self = .array(array)
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

/// Every message the server sends (replies and pushes): one struct with
/// the fields of all of them optional, decoded by `op` so that a push reads
/// only its own keys (the hot path: magix pushes).
struct Incoming: Decodable, Sendable {
    var op = ""
    var id: Int?
    var ok: Bool?
    var code: Int?
    var room: String?
    var seq: Int?
    var from: Int?
    // hello reply
    var heartbeatInterval: Int?
    // login reply
    var session: String?
    var memberId: Int?
    var state: [String: JSONValue]?
    var members: [Member]?
    var streams: [JSONValue]?
    var extraInfo: [String: JSONValue]?
    // pushes
    var patch: [String: JSONValue]?
    var type: String?
    var users: [Member]?
    var memberState: [String: JSONValue]?
    var event: String?
    var payload: JSONValue?

    init() {}

    enum CodingKeys: String, CodingKey {
        case op, id, ok, code, room, seq, from, heartbeatInterval, session, memberId, state, members, streams
        case extraInfo, patch, type, users, memberState, event, payload
    }

    init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        op = try c.decode(String.self, forKey: .op)
        switch op {
        case "magix":
            room = try c.decode(String.self, forKey: .room)
            seq = try c.decodeIfPresent(Int.self, forKey: .seq)
            from = try c.decodeIfPresent(Int.self, forKey: .from)
            event = try c.decodeIfPresent(String.self, forKey: .event)
            payload = try c.decodeIfPresent(JSONValue.self, forKey: .payload)
        case "reply":
            id = try c.decodeIfPresent(Int.self, forKey: .id)
            ok = try c.decodeIfPresent(Bool.self, forKey: .ok)
            code = try c.decodeIfPresent(Int.self, forKey: .code)
            seq = try c.decodeIfPresent(Int.self, forKey: .seq)
            heartbeatInterval = try c.decodeIfPresent(Int.self, forKey: .heartbeatInterval)
            session = try c.decodeIfPresent(String.self, forKey: .session)
            memberId = try c.decodeIfPresent(Int.self, forKey: .memberId)
            state = try c.decodeIfPresent([String: JSONValue].self, forKey: .state)
            members = try c.decodeIfPresent([Member].self, forKey: .members)
            streams = try c.decodeIfPresent([JSONValue].self, forKey: .streams)
            extraInfo = try c.decodeIfPresent([String: JSONValue].self, forKey: .extraInfo)
        case "pong":
            break
        default:
            room = try c.decodeIfPresent(String.self, forKey: .room)
            seq = try c.decodeIfPresent(Int.self, forKey: .seq)
            from = try c.decodeIfPresent(Int.self, forKey: .from)
            patch = try c.decodeIfPresent([String: JSONValue].self, forKey: .patch)
            type = try c.decodeIfPresent(String.self, forKey: .type)
            users = try c.decodeIfPresent([Member].self, forKey: .users)
            memberId = try c.decodeIfPresent(Int.self, forKey: .memberId)
            memberState = try c.decodeIfPresent([String: JSONValue].self, forKey: .memberState)
        }
    }
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
