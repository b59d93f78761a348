// Server → client messages (PROTOCOL.md §4, §6, §8): one encoding shared
// by the server and the tests.

/// Every `op` the server sends.
public enum ServerOp: String, Sendable, Hashable, CaseIterable {
    /// The answer to a request.
    case reply
    /// The answer to `ping`.
    case pong
    /// A `setState` patch (or `setViewMode` result) applied to the room.
    case state
    /// A member's merged member state.
    case memberState
    /// Members added or removed.
    case userUpdate
    /// Streams added or removed.
    case streamUpdate
    /// A key of the room's extra-info map set.
    case extraInfo
    /// An app event.
    case magix
    /// The session has ended for good.
    case kicked
    /// The session's token expires soon.
    case tokenWillExpire
    /// A problem with a message that had no usable `id`.
    case error
}

/// Whether a `userUpdate` / `streamUpdate` adds or removes entries.
public enum UpdateType: String, Sendable, Hashable, CaseIterable {
    /// Entries joined / were published.
    case add
    /// Entries left / were withdrawn.
    case delete
}

/// The result fields of a successful `hello` reply (times in milliseconds).
public struct HelloReply: Sendable, Hashable {
    /// The server-assigned connection ID (`c-…`).
    public var connection: String
    /// The server's clock, ms since the Unix epoch.
    public var serverTime: Int64
    /// How often the client should ping.
    public var heartbeatInterval: Int64
    /// Silence after which the server considers the connection dead.
    public var heartbeatTimeout: Int64
    /// How long a lost session stays resumable.
    public var sessionRetention: Int64
    /// The largest message the server accepts, in bytes.
    public var maxMessageBytes: Int64
    /// This connection's request bucket: its size (a burst admitted at once)
    /// and refill per second. nil when the server does not say (then the
    /// client paces to PROTOCOL.md §1's 200 and 200/s).
    public var requestBurst: Double?
    public var requestsPerSecond: Double?
    /// Whether the server batches this connection's messages from the next
    /// one on (the hello asked with `batch: true`; docs/PROTOCOL.md "Batched
    /// messages"). Written as `"batch":true` only when true.
    public var batch: Bool

    /// Creates hello result fields; the defaults are PROTOCOL.md's.
    public init(
        connection: String, serverTime: Int64, heartbeatInterval: Int64 = 10_000,
        heartbeatTimeout: Int64 = 90_000, sessionRetention: Int64 = 1_200_000,
        maxMessageBytes: Int64 = 1_048_576, requestBurst: Double? = nil, requestsPerSecond: Double? = nil,
        batch: Bool = false
    ) {
        self.batch = batch
        self.requestBurst = requestBurst
        self.requestsPerSecond = requestsPerSecond
        self.connection = connection
        self.serverTime = serverTime
        self.heartbeatInterval = heartbeatInterval
        self.heartbeatTimeout = heartbeatTimeout
        self.sessionRetention = sessionRetention
        self.maxMessageBytes = maxMessageBytes
    }

    /// The reply's result fields.
    public var fields: [String: JSON] {
        var fields: [String: JSON] = [
            "connection": .string(connection), "serverTime": .int(serverTime),
            "heartbeatInterval": .int(heartbeatInterval), "heartbeatTimeout": .int(heartbeatTimeout),
            "sessionRetention": .int(sessionRetention), "maxMessageBytes": .int(maxMessageBytes),
        ]
        if let requestBurst { fields["requestBurst"] = .double(requestBurst) }
        if let requestsPerSecond { fields["requestsPerSecond"] = .double(requestsPerSecond) }
        if batch { fields["batch"] = true }
        return fields
    }

    /// Decodes the result fields of a hello reply (client side).
    public init(fields object: [String: JSON]) throws(ProtocolError) {
        let fields = FieldReader(object)
        connection = try fields.string("connection")
        serverTime = try fields.integer("serverTime")
        (heartbeatInterval, heartbeatTimeout) = try Self.heartbeat(fields: object)
        sessionRetention = try fields.integer("sessionRetention")
        maxMessageBytes = try fields.integer("maxMessageBytes")
        requestBurst = object["requestBurst"]?.doubleValue
        requestsPerSecond = object["requestsPerSecond"]?.doubleValue
        batch = Self.confirmsBatching(fields: object)
    }

    /// Whether a hello reply's fields confirm batching (`"batch":true`);
    /// anything else (absent, false, another type) means single messages.
    public static func confirmsBatching(fields: [String: JSON]) -> Bool {
        fields["batch"] == .bool(true)
    }
}

extension HelloReply {
    /// The heartbeat interval and timeout a server announces in `hello`, in
    /// ms, checked: each an integer in ``ExternalNumber/heartbeatMilliseconds``
    /// (1 ms to 1 day). A missing field takes PROTOCOL.md's default (10 000,
    /// 90 000). A hostile or broken server's `Int64.max` is a 1009006
    /// protocol error here, never an overflow in the engine's timers.
    public static func heartbeat(fields: [String: JSON]) throws(ProtocolError) -> (interval: Int64, timeout: Int64) {
        func field(_ key: String, _ fallback: Int64) throws(ProtocolError) -> Int64 {
            guard let value = fields[key] else { return fallback }
            do {
                return try ExternalNumber.integer(value, field: "hello.\(key)", in: ExternalNumber.heartbeatMilliseconds)
            } catch {
                throw error.protocolError
            }
        }
        return (try field("heartbeatInterval", 10_000), try field("heartbeatTimeout", 90_000))
    }
}

/// The result fields of a successful `login` reply (PROTOCOL.md §6).
public struct LoginReply: Sendable, Hashable {
    /// The session ID (`s-…`), to resume with.
    public var session: String
    /// The session's member ID in the room.
    public var memberId: Int64
    /// The room's current event sequence number.
    public var seq: Int64
    /// Whether a resume recovered every missed event (then ``snapshot`` is nil
    /// and the missed events follow the reply).
    public var recovered: Bool
    /// Whether the session is writable.
    public var writable: Bool
    /// The token's expiry, ms since the Unix epoch.
    public var expiresAt: Int64
    /// The fresh snapshot to adopt wholesale; nil when ``recovered``.
    public var snapshot: RoomSnapshot?

    /// Creates login result fields.
    public init(
        session: String, memberId: Int64, seq: Int64, recovered: Bool, writable: Bool,
        expiresAt: Int64, snapshot: RoomSnapshot?
    ) {
        self.session = session
        self.memberId = memberId
        self.seq = seq
        self.recovered = recovered
        self.writable = writable
        self.expiresAt = expiresAt
        self.snapshot = snapshot
    }

    /// The reply's result fields (snapshot fields only when ``snapshot`` is set).
    public var fields: [String: JSON] {
        var object: [String: JSON] = [
            "session": .string(session), "memberId": .int(memberId), "seq": .int(seq),
            "recovered": .bool(recovered), "writable": .bool(writable), "expiresAt": .int(expiresAt),
        ]
        if let snapshot {
            object.merge(snapshot.replyFields) { _, new in new }
        }
        return object
    }

    /// Decodes the result fields of a login reply (client side). The
    /// snapshot is read when `recovered` is false.
    public init(fields object: [String: JSON]) throws(ProtocolError) {
        let fields = FieldReader(object)
        session = try fields.string("session")
        memberId = try fields.integer("memberId")
        seq = try fields.integer("seq")
        recovered = try fields.bool("recovered")
        writable = try fields.bool("writable")
        expiresAt = try fields.integer("expiresAt")
        snapshot = recovered ? nil : try RoomSnapshot(replyFields: object)
    }
}

/// Builders for every server message. Each returns the complete JSON object;
/// serialize it with ``JSON/serialized(sortedKeys:)``.
public enum ServerMessage {
    // MARK: Replies

    /// `{"op":"reply","id":id,"ok":true, ...fields}`. `fields` cannot
    /// override `op`, `id` or `ok`.
    public static func reply(id: Int64, _ fields: [String: JSON] = [:]) -> JSON {
        var object = fields
        object["op"] = .string(ServerOp.reply.rawValue)
        object["id"] = .int(id)
        object["ok"] = .bool(true)
        return .object(object)
    }

    /// `{"op":"reply","id":id,"ok":false,"code":…,"message":…}`.
    public static func replyError(id: Int64, _ error: ProtocolError) -> JSON {
        [
            "op": .string(ServerOp.reply.rawValue), "id": .int(id), "ok": false,
            "code": .int(Int64(error.code.rawValue)), "message": .string(error.message),
        ]
    }

    /// The reply to `hello`.
    public static func reply(id: Int64, hello: HelloReply) -> JSON {
        reply(id: id, hello.fields)
    }

    /// The reply to `login`.
    public static func reply(id: Int64, login: LoginReply) -> JSON {
        reply(id: id, login.fields)
    }

    /// `{seq}`: the reply to a request that appended a room event.
    public static func reply(id: Int64, seq: Int64) -> JSON {
        reply(id: id, ["seq": .int(seq)])
    }

    /// `{expiresAt, writable}`: the reply to `renewToken` (`expiresAt` in ms).
    public static func renewTokenReply(id: Int64, expiresAt: Int64, writable: Bool) -> JSON {
        reply(id: id, ["expiresAt": .int(expiresAt), "writable": .bool(writable)])
    }

    /// `{writable}`: the reply to `setWritable`.
    public static func setWritableReply(id: Int64, writable: Bool) -> JSON {
        reply(id: id, ["writable": .bool(writable)])
    }

    // MARK: Connection messages

    /// `{"op":"pong","t":<echoed>,"serverTime":…}`.
    public static func pong(t: JSON, serverTime: Int64) -> JSON {
        ["op": .string(ServerOp.pong.rawValue), "t": t, "serverTime": .int(serverTime)]
    }

    /// `{"op":"error","code","message","room"?}`: for a message without a usable `id`.
    public static func error(_ error: ProtocolError, room: String? = nil) -> JSON {
        .object(
            Dictionary(dropNils: [
                "op": .string(ServerOp.error.rawValue), "code": .int(Int64(error.code.rawValue)),
                "message": .string(error.message), "room": room.map(JSON.string),
            ]))
    }

    // MARK: Room pushes

    /// `state`: a patch applied to the room by member `from`.
    public static func state(room: String, seq: Int64, from: Int64, patch: [String: JSON]) -> JSON {
        push(.state, room: room, seq: seq, ["from": .int(from), "patch": .object(patch)])
    }

    /// `memberState`: member `memberId`'s whole merged member state.
    public static func memberState(room: String, seq: Int64, memberId: Int64, memberState: [String: JSON]) -> JSON {
        push(.memberState, room: room, seq: seq, ["memberId": .int(memberId), "memberState": .object(memberState)])
    }

    /// `userUpdate`: members added or removed.
    public static func userUpdate(room: String, seq: Int64, type: UpdateType, users: [Member]) -> JSON {
        push(.userUpdate, room: room, seq: seq, ["type": .string(type.rawValue), "users": .array(users.map(\.json))])
    }

    /// `streamUpdate`: streams published or withdrawn.
    public static func streamUpdate(room: String, seq: Int64, type: UpdateType, streams: [MediaStream]) -> JSON {
        push(
            .streamUpdate, room: room, seq: seq,
            ["type": .string(type.rawValue), "streams": .array(streams.map(\.json))])
    }

    /// `extraInfo`: member `from` set `key` to `value`.
    public static func extraInfo(room: String, seq: Int64, from: Int64, key: String, value: String) -> JSON {
        push(.extraInfo, room: room, seq: seq, ["from": .int(from), "key": .string(key), "value": .string(value)])
    }

    /// `magix`: an app event from member `from`.
    public static func magix(room: String, seq: Int64, from: Int64, event: String, payload: JSON) -> JSON {
        push(.magix, room: room, seq: seq, ["from": .int(from), "event": .string(event), "payload": payload])
    }

    /// `kicked`: the session has ended (no `seq`; no resume).
    public static func kicked(room: String, code: ErrorCode, reason: String) -> JSON {
        [
            "op": .string(ServerOp.kicked.rawValue), "room": .string(room),
            "code": .int(Int64(code.rawValue)), "reason": .string(reason),
        ]
    }

    /// `tokenWillExpire`: `remaining` whole seconds are left (no `seq`).
    public static func tokenWillExpire(room: String, remaining: Int64) -> JSON {
        ["op": .string(ServerOp.tokenWillExpire.rawValue), "room": .string(room), "remaining": .int(remaining)]
    }

    private static func push(_ op: ServerOp, room: String, seq: Int64, _ fields: [String: JSON]) -> JSON {
        var object = fields
        object["op"] = .string(op.rawValue)
        object["room"] = .string(room)
        object["seq"] = .int(seq)
        return .object(object)
    }
}
