// The room state, members and streams (PROTOCOL.md §7), and the snapshot
// that a login reply carries (§6).

/// The shared state of a room. Merge rules are in RoomState+Merge.swift.
public struct RoomState: Sendable, Hashable {
    /// App-defined state; `setState` merges it one level deep.
    public var globalState: [String: JSON]
    /// The current directory's scenes and the current scene.
    public var sceneState: SceneState
    /// The room's view mode and broadcaster.
    public var broadcastState: BroadcastState

    /// Creates a room state; values are not validated.
    public init(globalState: [String: JSON], sceneState: SceneState, broadcastState: BroadcastState) {
        self.globalState = globalState
        self.sceneState = sceneState
        self.broadcastState = broadcastState
    }

    /// The state of a new room: empty `globalState`, one scene `/init`
    /// (no page, no images), view mode `freedom` without a broadcaster.
    public static let initial = RoomState(
        globalState: [:],
        sceneState: SceneState(scenePath: "/init", scenes: SceneState.initialScenes, index: 0),
        broadcastState: BroadcastState(mode: .freedom, broadcasterId: nil))

    /// Decodes and validates `{globalState, sceneState, broadcastState}`;
    /// all three are required.
    public init(json: JSON) throws(ProtocolError) {
        let fields = try FieldReader(json, what: "state")
        globalState = try fields.object("globalState")
        sceneState = try SceneState(json: try fields.require("sceneState"))
        broadcastState = try BroadcastState(json: try fields.require("broadcastState"))
    }

    /// The wire form.
    public var json: JSON {
        .object([
            "globalState": .object(globalState), "sceneState": sceneState.json,
            "broadcastState": broadcastState.json,
        ])
    }
}

/// A member of a room: one logged-in session of a user.
public struct Member: Sendable, Hashable {
    /// The server-assigned member ID, unique in the room (positive).
    public var memberId: Int64
    /// The user ID from the session's token.
    public var userId: String
    /// The display name given at login.
    public var name: String?
    /// App-defined data given at login.
    public var payload: JSON?
    /// The member's own state, merged by `setMemberState`.
    public var memberState: [String: JSON]

    /// Creates a member; values are not validated.
    public init(
        memberId: Int64, userId: String, name: String? = nil, payload: JSON? = nil,
        memberState: [String: JSON] = [:]
    ) {
        self.memberId = memberId
        self.userId = userId
        self.name = name
        self.payload = payload
        self.memberState = memberState
    }

    /// Decodes and validates `{memberId, userId, name?, payload?, memberState?}`
    /// (`memberState` defaults to empty; a `null` payload reads as absent).
    public init(json: JSON) throws(ProtocolError) {
        let fields = try FieldReader(json, what: "member")
        memberId = try fields.integer("memberId")
        userId = try fields.string("userId")
        name = try fields.optionalString("name")
        payload = fields.present("payload")
        if let value = fields.present("memberState") {
            guard let object = value.objectValue else {
                throw .malformed("member.memberState must be an object")
            }
            memberState = object
        } else {
            memberState = [:]
        }
        guard memberId > 0 else { throw .invalidArgument("member.memberId must be positive") }
        guard UserID.isValid(userId) else { throw .invalidArgument("member.userId is not a valid user ID") }
    }

    /// The wire form; `name` and `payload` are left out when `nil`.
    public var json: JSON {
        .object(
            Dictionary(dropNils: [
                "memberId": .int(memberId), "userId": .string(userId), "name": name.map(JSON.string),
                "payload": payload, "memberState": .object(memberState),
            ]))
    }
}

/// A media stream published by a user into a room.
public struct MediaStream: Sendable, Hashable {
    /// The stream ID (same rule as user IDs; see ``UserID``).
    public var id: String
    /// The publishing user.
    public var userId: String
    /// App-defined text about the stream (≤ 4 KiB).
    public var extraInfo: String?

    /// Creates a stream; values are not validated.
    public init(id: String, userId: String, extraInfo: String? = nil) {
        self.id = id
        self.userId = userId
        self.extraInfo = extraInfo
    }

    /// Decodes and validates `{id, userId, extraInfo?}`.
    public init(json: JSON) throws(ProtocolError) {
        let fields = try FieldReader(json, what: "stream")
        id = try fields.string("id")
        userId = try fields.string("userId")
        extraInfo = try fields.optionalString("extraInfo")
        guard UserID.isValid(id) else { throw .invalidArgument("stream.id is not a valid stream ID") }
        guard UserID.isValid(userId) else { throw .invalidArgument("stream.userId is not a valid user ID") }
        if let extraInfo, extraInfo.utf8.count > ProtocolLimits.maxExtraInfoValueBytes {
            throw .invalidArgument("stream.extraInfo is longer than 4096 bytes")
        }
    }

    /// The wire form; `extraInfo` is left out when `nil`.
    public var json: JSON {
        .object(
            Dictionary(dropNils: [
                "id": .string(id), "userId": .string(userId), "extraInfo": extraInfo.map(JSON.string),
            ]))
    }
}

/// Everything a client adopts wholesale on a fresh login (PROTOCOL.md §6),
/// and the snapshot at the head of a recording (§10).
public struct RoomSnapshot: Sendable, Hashable {
    /// The room state.
    public var state: RoomState
    /// The room's members, including the receiving session's own.
    public var members: [Member]
    /// The room's published streams.
    public var streams: [MediaStream]
    /// The room's extra-info map (`setExtraInfo`).
    public var extraInfo: [String: String]

    /// Creates a snapshot.
    public init(state: RoomState, members: [Member] = [], streams: [MediaStream] = [], extraInfo: [String: String] = [:]) {
        self.state = state
        self.members = members
        self.streams = streams
        self.extraInfo = extraInfo
    }

    /// The login-reply fields: `state`, `members`, `streams`, `extraInfo`.
    public var replyFields: [String: JSON] {
        [
            "state": state.json, "members": .array(members.map(\.json)),
            "streams": .array(streams.map(\.json)), "extraInfo": .object(extraInfo.mapValues(JSON.string)),
        ]
    }

    /// The recording form (§10): the RoomState's members plus `members`,
    /// `streams` and `extraInfo` in one object.
    public var recordingJSON: JSON {
        var object = state.json.objectValue ?? [:]
        for (key, value) in replyFields where key != "state" {
            object[key] = value
        }
        return .object(object)
    }

    /// Decodes the login-reply fields (`state`, `members`, `streams`,
    /// `extraInfo`), all required.
    public init(replyFields object: [String: JSON]) throws(ProtocolError) {
        let fields = FieldReader(object)
        let state = try RoomState(json: try fields.require("state"))
        try self.init(state: state, fields: fields)
    }

    /// Decodes the recording form (see ``recordingJSON``).
    public init(recordingJSON json: JSON) throws(ProtocolError) {
        let fields = try FieldReader(json, what: "snapshot")
        try self.init(state: try RoomState(json: json), fields: fields)
    }

    private init(state: RoomState, fields: FieldReader) throws(ProtocolError) {
        try self.init(state: state, members: try Self.members(fields.array("members")), streams: try fields.array("streams"),
                      extraInfo: try fields.object("extraInfo"))
    }

    /// Decodes members given as JSON.
    static func members(_ values: [JSON]) throws(ProtocolError) -> [Member] {
        var members: [Member] = []
        members.reserveCapacity(values.count)
        for value in values {
            members.append(try Member(json: value))
        }
        return members
    }

    /// Decodes the streams and extra info given as JSON (the reply fields',
    /// or a login reply scan's: LoginReplyScan.swift).
    init(state: RoomState, members: [Member], streams streamValues: [JSON],
         extraInfo infoValues: [String: JSON]) throws(ProtocolError) {
        self.state = state
        var streams: [MediaStream] = []
        for value in streamValues {
            streams.append(try MediaStream(json: value))
        }
        var extraInfo: [String: String] = [:]
        for (key, value) in infoValues {
            guard let text = value.stringValue else { throw .malformed("extraInfo values must be strings") }
            extraInfo[key] = text
        }
        self.members = members
        self.streams = streams
        self.extraInfo = extraInfo
    }
}
