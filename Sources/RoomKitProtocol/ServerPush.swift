// Decoding of server messages (PROTOCOL.md §4–§8): the mirror of
// `ClientEnvelope.decode`, with the same error codes for bad input. The
// client engine, the player and the tests read the server through it.

/// A room event as PROTOCOL.md §8 pushes it (and as a room log records it):
/// what ``RoomContentModel/apply(_:)`` takes.
public enum RoomEventBody: Sendable, Hashable {
    /// A `setState` patch (or `setViewMode` result) from member `from`.
    case state(from: Int64, patch: [String: JSON])
    /// Member `memberId`'s whole merged member state.
    case memberState(memberId: Int64, memberState: [String: JSON])
    /// Members joined (`add`) or left (`delete`).
    case userUpdate(UpdateType, users: [Member])
    /// Streams published (`add`) or withdrawn (`delete`).
    case streamUpdate(UpdateType, streams: [MediaStream])
    /// Key `key` of the extra-info map set by member `from`.
    case extraInfo(from: Int64, key: String, value: String)
    /// An app event from member `from`.
    case magix(from: Int64, event: String, payload: JSON)

    /// The member whose request caused the event (nil for membership and
    /// stream changes, which the server makes).
    public var from: Int64? {
        switch self {
        case .state(let from, _), .extraInfo(let from, _, _), .magix(let from, _, _): return from
        case .memberState(let memberId, _): return memberId
        case .userUpdate, .streamUpdate: return nil
        }
    }

    /// Decodes the op-specific fields of a room event push with `op`.
    /// Missing or mistyped fields: 1009001; invalid values: 1009006; an op
    /// that is not a room event: 1009002.
    public static func decode(op: String, _ members: [String: JSON]) throws(ProtocolError) -> RoomEventBody {
        let fields = FieldReader(members)
        switch ServerOp(rawValue: op) {
        case .state:
            return .state(from: try fields.integer("from"), patch: try fields.object("patch"))
        case .memberState:
            return .memberState(memberId: try fields.integer("memberId"), memberState: try fields.object("memberState"))
        case .userUpdate:
            let users = try fields.array("users").map { (json) throws(ProtocolError) in try Member(json: json) }
            return .userUpdate(try updateType(fields), users: users)
        case .streamUpdate:
            let streams = try fields.array("streams").map { (json) throws(ProtocolError) in try MediaStream(json: json) }
            return .streamUpdate(try updateType(fields), streams: streams)
        case .extraInfo:
            return .extraInfo(from: try fields.integer("from"), key: try fields.string("key"), value: try fields.string("value"))
        case .magix:
            return .magix(from: try fields.integer("from"), event: try fields.string("event"),
                          payload: members["payload"] ?? .null)
        case .reply, .pong, .kicked, .tokenWillExpire, .error, nil:
            throw ProtocolError(code: .unknownOp, message: "\(op) is not a room event")
        }
    }

    private static func updateType(_ fields: FieldReader) throws(ProtocolError) -> UpdateType {
        let raw = try fields.string("type")
        guard let type = UpdateType(rawValue: raw) else { throw .invalidArgument("type must be add or delete") }
        return type
    }
}

/// One room event push: the room, its sequence number and what happened.
public struct RoomPush: Sendable, Hashable {
    public var room: String
    public var seq: Int64
    public var body: RoomEventBody

    public init(room: String, seq: Int64, body: RoomEventBody) {
        self.room = room
        self.seq = seq
        self.body = body
    }
}

/// Every message the server sends (PROTOCOL.md §2, §4, §8), decoded.
public enum ServerPush: Sendable, Hashable {
    /// The answer to request `id`: its result fields, or the server's error.
    case reply(id: Int64, Result<[String: JSON], ProtocolError>)
    /// The answer to `ping`.
    case pong(t: JSON, serverTime: Int64)
    /// A room event (§8, the ops with `seq`).
    case room(RoomPush)
    /// The session in `room` has ended for good.
    case kicked(room: String, code: ErrorCode, reason: String)
    /// The session's token in `room` expires in `remaining` seconds.
    case tokenWillExpire(room: String, remaining: Int64)
    /// A problem with a message that had no usable `id`.
    case error(ProtocolError, room: String?)

    /// The room a message concerns, if any.
    public var room: String? {
        switch self {
        case .room(let push): return push.room
        case .kicked(let room, _, _), .tokenWillExpire(let room, _): return room
        case .error(_, let room): return room
        case .reply, .pong: return nil
        }
    }

    /// Decodes one server message.
    ///
    /// Checks, in order (the first failure wins), with the codes
    /// `ClientEnvelope.decode` uses for the same faults:
    /// 1. not an object: 1009001;
    /// 2. `op` missing or not a string: 1009001; unknown `op`: 1009002;
    /// 3. the op's fields: missing or wrong JSON type 1009001, invalid value
    ///    (a room ID that is not one, an unknown update type, a negative
    ///    seq) 1009006.
    ///
    /// Unknown fields are ignored, so a newer server's additions pass.
    public static func decode(_ json: JSON) -> Result<ServerPush, ProtocolError> {
        do throws(ProtocolError) {
            return .success(try decoding(json))
        } catch {
            return .failure(error)
        }
    }

    private static func decoding(_ json: JSON) throws(ProtocolError) -> ServerPush {
        guard case .object(let members) = json else { throw .malformed("message must be a JSON object") }
        let fields = FieldReader(members)
        guard let opValue = members["op"] else { throw .malformed("missing op") }
        guard let op = opValue.stringValue else { throw .malformed("op must be a string") }
        guard let serverOp = ServerOp(rawValue: op) else { throw ProtocolError(code: .unknownOp, message: "unknown op \(op)") }
        switch serverOp {
        case .reply:
            let id = try fields.integer("id")
            if try fields.bool("ok") { return .reply(id: id, .success(members)) }
            let code = ErrorCode(rawValue: Int(try fields.integer("code")))
            var error = ProtocolError(code: code, message: try fields.optionalString("message") ?? "")
            error.currentFence = try fields.optionalInteger("fence")
            return .reply(id: id, .failure(error))
        case .pong:
            return .pong(t: members["t"] ?? .null, serverTime: try fields.integer("serverTime"))
        case .kicked:
            return .kicked(room: try room(fields), code: ErrorCode(rawValue: Int(try fields.integer("code"))),
                           reason: try fields.optionalString("reason") ?? "")
        case .tokenWillExpire:
            return .tokenWillExpire(room: try room(fields), remaining: try fields.integer("remaining"))
        case .error:
            let room = try fields.optionalString("room")
            return .error(ProtocolError(code: ErrorCode(rawValue: Int(try fields.integer("code"))),
                                        message: try fields.optionalString("message") ?? ""), room: room)
        case .state, .memberState, .userUpdate, .streamUpdate, .extraInfo, .magix:
            let seq = try fields.integer("seq")
            guard seq >= 0 else { throw .invalidArgument("seq must not be negative") }
            return .room(RoomPush(room: try room(fields), seq: seq, body: try RoomEventBody.decode(op: op, members)))
        }
    }

    private static func room(_ fields: FieldReader) throws(ProtocolError) -> String {
        let room = try fields.string("room")
        guard RoomID.isValid(room) else { throw .invalidArgument("room must be 1–128 characters of A-Z a-z 0-9 _ . : -") }
        return room
    }
}
