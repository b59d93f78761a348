import RoomKitProtocol

/// Everything the server knows about a room's content at one sequence number:
/// the protocol snapshot (state, members, streams, extra info) plus the full
/// scene tree (the snapshot only shows the current directory).
///
/// The live server and replay after a restart both change it only through
/// `apply(push:mutation:)`, so what is logged is exactly what is replayed;
/// the server's member joins and leaves apply their body directly
/// (`apply(_:)`), and their push is written so that it decodes to exactly
/// that body (`EncodedPush.userUpdate`, checked against the tree form).
struct RoomModel: Sendable, Hashable {
    var snapshot = RoomSnapshot(state: .initial)
    var scenes = SceneTree()
    var nextMemberId: Int64 = 1

    /// Applies one logged event: the push members saw, plus the scene-tree
    /// mutation for scene operations. The content changes through the one
    /// shared `RoomContentModel.apply`; only the scene tree (which the
    /// snapshot shows one directory of) and member numbering are roomd's own.
    /// Throws only on a corrupt log.
    mutating func apply(push: JSON, mutation: JSON?) throws(ProtocolError) {
        guard let members = push.objectValue, let op = members["op"]?.stringValue else {
            throw .malformed("logged event without op")
        }
        var body = try RoomEventBody.decode(op: op, members)
        if case .state(let from, var patch) = body {
            if let mutation {
                try applySceneMutation(mutation)
                patch["sceneState"] = scenes.sceneState.json
                body = .state(from: from, patch: patch)
            } else if patch["sceneState"] != nil {
                let (next, _) = try snapshot.state.applying(patch: patch)
                scenes = try SceneTree(sceneState: next.sceneState)
            }
        }
        try apply(body)
    }

    /// Applies a decoded event that changes no scene tree (a `state` patch
    /// with a `sceneState` goes through `apply(push:mutation:)`).
    mutating func apply(_ body: RoomEventBody) throws(ProtocolError) {
        try snapshot.apply(body)
        if case .userUpdate(.add, let users) = body {
            for user in users { nextMemberId = max(nextMemberId, user.memberId + 1) }
        }
    }

    private mutating func applySceneMutation(_ mutation: JSON) throws(ProtocolError) {
        switch mutation["op"]?.stringValue {
        case "putScenes":
            let scenesJSON = mutation["scenes"]?.arrayValue ?? []
            let list = try scenesJSON.map { (json) throws(ProtocolError) in try Scene(json: json) }
            try scenes.putScenes(dir: mutation["dir"]?.stringValue ?? "/", scenes: list,
                                 index: mutation["index"]?.intValue)
        case "setScenePath":
            try scenes.setScenePath(mutation["path"]?.stringValue ?? "")
        case "removeScenes":
            try scenes.removeScenes(path: mutation["path"]?.stringValue ?? "")
        case "insertImage":
            try scenes.insertImage(try Image(json: mutation["image"] ?? .null))
        default:
            throw .malformed("unknown scene mutation")
        }
    }

    /// The persisted form (snapshots table).
    var json: JSON {
        .object(["snapshot": snapshot.recordingJSON, "scenes": scenes.json, "nextMemberId": .int(nextMemberId)])
    }

    init() {}

    init(json: JSON) throws(ProtocolError) {
        snapshot = try RoomSnapshot(recordingJSON: json["snapshot"] ?? .null)
        scenes = try SceneTree(json: json["scenes"] ?? .null)
        nextMemberId = json["nextMemberId"]?.int64Value ?? 1
    }
}
