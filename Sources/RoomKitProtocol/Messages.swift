// Client → server messages (PROTOCOL.md §4, §5): typed requests and their
// wire encoding. Decoding and validation are in Messages+Decode.swift.

/// Every `op` a client may send.
public enum ClientOp: String, Sendable, Hashable, CaseIterable {
    /// First message of a connection (§4).
    case hello
    /// Heartbeat; answered by `pong`, never by a `reply`.
    case ping
    /// Joins or resumes a room session (§6).
    case login
    /// Leaves a room.
    case logout
    /// Patches the room state (§7).
    case setState
    /// Merges the sender's member state.
    case setMemberState
    /// Sends an app event to other members.
    case magix
    /// Adds or replaces scenes in a directory.
    case putScenes
    /// Changes the current scene.
    case setScenePath
    /// Removes a scene or a directory.
    case removeScenes
    /// Adds an image to the current scene.
    case insertImage
    /// Changes the view mode / broadcaster.
    case setViewMode
    /// Publishes a media stream.
    case publishStream
    /// Withdraws a media stream.
    case unpublishStream
    /// Sets a key of the room's extra-info map.
    case setExtraInfo
    /// Replaces the session's token.
    case renewToken
    /// Switches the session between read-only and writable.
    case setWritable

    /// Whether the op is a request that must carry `id` and gets a `reply`
    /// (every op except `ping`).
    public var isRequest: Bool { self != .ping }

    /// Whether the op must carry a valid `room` (every op except `hello` and `ping`).
    public var isRoomScoped: Bool { self != .hello && self != .ping }

    /// Whether the op needs a writable session, else 1009003 (§5).
    public var requiresWritable: Bool {
        switch self {
        case .setState, .magix, .putScenes, .setScenePath, .removeScenes, .insertImage, .setViewMode:
            return true
        default:
            return false
        }
    }
}

/// The `user` object of a `login`.
public struct LoginUser: Sendable, Hashable {
    /// The user ID; must equal the token's `sub`.
    public var id: String
    /// A display name (≤ 256 bytes).
    public var name: String?
    /// App-defined data shown to other members.
    public var payload: JSON?

    /// Creates a login user.
    public init(id: String, name: String? = nil, payload: JSON? = nil) {
        self.id = id
        self.name = name
        self.payload = payload
    }

    /// The wire form; `nil` fields are left out.
    public var json: JSON {
        .object(Dictionary(dropNils: ["id": .string(id), "name": name.map(JSON.string), "payload": payload]))
    }
}

/// The `resume` object of a `login`: the session to continue and the last
/// room `seq` the client processed.
public struct ResumePoint: Sendable, Hashable {
    /// The session ID from the earlier login reply.
    public var session: String
    /// The last `seq` the client saw in this room (≥ 0).
    public var seq: Int64

    /// Creates a resume point.
    public init(session: String, seq: Int64) {
        self.session = session
        self.seq = seq
    }

    /// The wire form.
    public var json: JSON { .object(["session": .string(session), "seq": .int(seq)]) }
}

/// A `login` request's fields.
public struct LoginRequest: Sendable, Hashable {
    /// The room token (§9). Not validated by the decoder; the server's token
    /// check reports problems as 1002033.
    public var token: String
    /// Who is logging in.
    public var user: LoginUser
    /// Whether the session asks to be writable (default `true`).
    public var writable: Bool
    /// Present to resume an earlier session (§6).
    public var resume: ResumePoint?
    /// The fleet's fence for this room (§6, docs/FLEET.md): the server refuses
    /// a login whose fence is lower than the highest it has seen for this
    /// room and user (1009008). Nil: no fence.
    public var fence: Int64?

    /// Creates a login request.
    public init(token: String, user: LoginUser, writable: Bool = true, resume: ResumePoint? = nil,
                fence: Int64? = nil) {
        self.token = token
        self.user = user
        self.writable = writable
        self.resume = resume
        self.fence = fence
    }
}

/// A decoded, validated client message (everything but `op`, `id`, `room`).
public enum ClientRequest: Sendable, Hashable {
    /// `hello` with the optional client name, and the optional connection
    /// token (a `service` token: the connection gets the service request
    /// bucket; docs/PROTOCOL.md "Service connections"), and whether the
    /// client asks for batched messages (`batch`; docs/PROTOCOL.md "Batched
    /// messages").
    case hello(client: String?, token: String? = nil, batch: Bool = false)
    /// `ping` with the client's clock value to echo (any JSON; `null` if absent).
    case ping(t: JSON)
    /// `login`.
    case login(LoginRequest)
    /// `logout`.
    case logout
    /// `setState` with a patch whose shape has been checked (§7).
    case setState(patch: [String: JSON])
    /// `setMemberState` with the object to merge.
    case setMemberState([String: JSON])
    /// `magix`: `event` (1–128 bytes), `payload` (`null` if absent), and the
    /// recipients' user IDs when addressed.
    case magix(event: String, payload: JSON, to: [String]?)
    /// `putScenes` into directory `dir`, at `index` (≥ 0) or appended.
    case putScenes(dir: String, scenes: [Scene], index: Int?)
    /// `setScenePath` with a syntactically valid scene or directory path.
    case setScenePath(path: String)
    /// `removeScenes` with a syntactically valid scene or directory path.
    case removeScenes(path: String)
    /// `insertImage`.
    case insertImage(Image)
    /// `setViewMode`.
    case setViewMode(ViewMode)
    /// `publishStream` of stream `id` with optional `extraInfo` (≤ 4 KiB).
    case publishStream(id: String, extraInfo: String?)
    /// `unpublishStream`.
    case unpublishStream(streamID: String)
    /// `setExtraInfo`: `key` 1–128 bytes, `value` ≤ 4 KiB.
    case setExtraInfo(key: String, value: String)
    /// `renewToken`.
    case renewToken(token: String)
    /// `setWritable`.
    case setWritable(Bool)

    /// The op of this request.
    public var op: ClientOp {
        switch self {
        case .hello: return .hello
        case .ping: return .ping
        case .login: return .login
        case .logout: return .logout
        case .setState: return .setState
        case .setMemberState: return .setMemberState
        case .magix: return .magix
        case .putScenes: return .putScenes
        case .setScenePath: return .setScenePath
        case .removeScenes: return .removeScenes
        case .insertImage: return .insertImage
        case .setViewMode: return .setViewMode
        case .publishStream: return .publishStream
        case .unpublishStream: return .unpublishStream
        case .setExtraInfo: return .setExtraInfo
        case .renewToken: return .renewToken
        case .setWritable: return .setWritable
        }
    }

    /// The request's own wire fields (without `op`, `id`, `room`).
    public var fields: [String: JSON] {
        switch self {
        case .hello(let client, let token, let batch):
            return Dictionary(dropNils: ["client": client.map(JSON.string), "token": token.map(JSON.string),
                                         "batch": batch ? Optional(JSON.bool(true)) : Optional<JSON>.none])
        case .ping(let t):
            return ["t": t]
        case .login(let login):
            return Dictionary(dropNils: [
                "token": .string(login.token), "user": login.user.json, "writable": .bool(login.writable),
                "resume": login.resume?.json, "fence": login.fence.map(JSON.int),
            ])
        case .logout:
            return [:]
        case .setState(let patch):
            return ["patch": .object(patch)]
        case .setMemberState(let memberState):
            return ["memberState": .object(memberState)]
        case .magix(let event, let payload, let to):
            return Dictionary(dropNils: [
                "event": .string(event), "payload": payload, "to": to.map { .array($0.map(JSON.string)) },
            ])
        case .putScenes(let dir, let scenes, let index):
            return Dictionary(dropNils: [
                "dir": .string(dir), "scenes": .array(scenes.map(\.json)), "index": index.map { .int(Int64($0)) },
            ])
        case .setScenePath(let path), .removeScenes(let path):
            return ["path": .string(path)]
        case .insertImage(let image):
            return ["image": image.json]
        case .setViewMode(let mode):
            return ["mode": .string(mode.rawValue)]
        case .publishStream(let id, let extraInfo):
            return ["stream": .object(Dictionary(dropNils: ["id": .string(id), "extraInfo": extraInfo.map(JSON.string)]))]
        case .unpublishStream(let streamID):
            return ["streamID": .string(streamID)]
        case .setExtraInfo(let key, let value):
            return ["key": .string(key), "value": .string(value)]
        case .renewToken(let token):
            return ["token": .string(token)]
        case .setWritable(let writable):
            return ["writable": .bool(writable)]
        }
    }
}

/// A whole client message: the envelope fields and the typed request.
public struct ClientEnvelope: Sendable, Hashable {
    /// The `op` string as sent (always a known ``ClientOp`` after decoding).
    public var op: String
    /// The request ID (positive); `nil` only for `ping` without one.
    public var id: Int64?
    /// The room, for room-scoped ops (a valid room ID); `nil` otherwise.
    public var room: String?
    /// The typed request.
    public var request: ClientRequest

    /// Creates an envelope; `op` is taken from the request.
    public init(id: Int64?, room: String?, request: ClientRequest) {
        self.op = request.op.rawValue
        self.id = id
        self.room = room
        self.request = request
    }

    /// The wire form, as a client sends it.
    public var json: JSON {
        var object = request.fields
        object["op"] = .string(op)
        if let id { object["id"] = .int(id) }
        if let room { object["room"] = .string(room) }
        return .object(object)
    }
}

/// Why a client message could not be decoded, with what the server needs to
/// answer it: a `reply` error when ``id`` is set, else an `error` push.
public struct DecodeFailure: Error, Hashable, Sendable {
    /// The `op` string if the message had one.
    public var op: String?
    /// The message's `id` when it was present and a positive integer.
    public var id: Int64?
    /// The message's `room` when it was present and a valid room ID.
    public var room: String?
    /// The code and message to send.
    public var error: ProtocolError

    /// Creates a failure.
    public init(op: String? = nil, id: Int64? = nil, room: String? = nil, error: ProtocolError) {
        self.op = op
        self.id = id
        self.room = room
        self.error = error
    }

    /// The message to send back: `reply` `ok:false` to ``id``, or an
    /// `error` push (with ``room`` when known) if there is no usable id.
    public var response: JSON {
        if let id { return ServerMessage.replyError(id: id, error) }
        return ServerMessage.error(error, room: room)
    }
}
