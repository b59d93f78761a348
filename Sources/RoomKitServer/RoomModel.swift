import RoomKitProtocol

/// Everything the server knows about a room's content at one sequence number:
/// the protocol snapshot (state, members, streams, extra info) plus the full
/// scene tree (the snapshot only shows the current directory).
///
/// The live server and replay after a restart both change it only through
/// `apply(push:mutation:)`, so what is logged is exactly what is replayed.
struct RoomModel: Sendable, Hashable {
    var snapshot = RoomSnapshot(state: .initial)
    var scenes = SceneTree()
    var nextMemberId: Int64 = 1

    /// Applies one logged event: the push members saw, plus the scene-tree
    /// mutation for scene operations. Throws only on a corrupt log.
    mutating func apply(push: JSON, mutation: JSON?) throws(ProtocolError) {
        guard let op = push["op"]?.stringValue else {
            throw .malformed("logged event without op")
        }
        switch op {
        case "state":
            guard let patch = push["patch"]?.objectValue else { throw .malformed("state without patch") }
            if let mutation {
                try applySceneMutation(mutation)
            } else if patch["sceneState"] != nil {
                let (next, _) = try snapshot.state.applying(patch: patch)
                scenes = try SceneTree(sceneState: next.sceneState)
            }
            var effective = patch
            if mutation != nil { effective["sceneState"] = scenes.sceneState.json }
            snapshot.state = try snapshot.state.applying(patch: effective).0
        case "memberState":
            guard let memberId = push["memberId"]?.int64Value, let state = push["memberState"]?.objectValue else {
                throw .malformed("memberState without memberId")
            }
            if let index = snapshot.members.firstIndex(where: { $0.memberId == memberId }) {
                snapshot.members[index].memberState = state
            }
        case "userUpdate":
            let users = try (push["users"]?.arrayValue ?? []).map { (json) throws(ProtocolError) in try Member(json: json) }
            if push["type"]?.stringValue == "add" {
                for user in users {
                    snapshot.members.removeAll { $0.memberId == user.memberId }
                    snapshot.members.append(user)
                    nextMemberId = max(nextMemberId, user.memberId + 1)
                }
            } else {
                let gone = Set(users.map(\.memberId))
                snapshot.members.removeAll { gone.contains($0.memberId) }
            }
        case "streamUpdate":
            let streams = try (push["streams"]?.arrayValue ?? []).map { (json) throws(ProtocolError) in try Stream(json: json) }
            let ids = Set(streams.map(\.id))
            snapshot.streams.removeAll { ids.contains($0.id) }
            if push["type"]?.stringValue == "add" {
                snapshot.streams.append(contentsOf: streams)
            }
        case "extraInfo":
            guard let key = push["key"]?.stringValue, let value = push["value"]?.stringValue else {
                throw .malformed("extraInfo without key/value")
            }
            snapshot.extraInfo[key] = value
        case "magix":
            break
        default:
            throw .malformed("unknown logged op \(op)")
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
