import RoomKitProtocol

/// One room event of a recording: the push as members saw it.
public struct RecordedFrame: Sendable, Hashable {
    /// When it happened, ms after the recording's `beginTimestamp`.
    public var t: Int64
    /// The room event sequence number (0 for a line that was not a JSON object).
    public var seq: Int64
    /// The push (`op`, `room`, `seq` and the op's fields, plus `t` and `to`).
    public var push: JSON

    public init(t: Int64, seq: Int64, push: JSON) {
        self.t = t
        self.seq = seq
        self.push = push
    }
}

/// One answer of the recording endpoint (docs/PROTOCOL.md "Recording
/// slices"): the header's time line, the snapshot at the slice's start when
/// asked for, and the slice's frames in order.
public struct RecordingSlice: Sendable, Hashable {
    /// Start and end of the whole recording, ms since the epoch.
    public var beginTimestamp: Int64
    public var endTimestamp: Int64
    /// Frames in the whole recording.
    public var framesCount: Int
    /// The slice, ms after `beginTimestamp`: frames have `start <= t < end`.
    public var start: Int64
    public var end: Int64
    /// The room just before `start`.
    public var snapshot: RoomSnapshot?
    /// The slice's frames, in order.
    public var frames: [RecordedFrame]

    public init(beginTimestamp: Int64, endTimestamp: Int64, framesCount: Int, start: Int64, end: Int64,
                snapshot: RoomSnapshot?, frames: [RecordedFrame]) {
        self.beginTimestamp = beginTimestamp
        self.endTimestamp = endTimestamp
        self.framesCount = framesCount
        self.start = start
        self.end = end
        self.snapshot = snapshot
        self.frames = frames
    }

    /// The recording's length in ms.
    public var duration: Int64 { endTimestamp - beginTimestamp }

    /// Parses the NDJSON body. A bad header or snapshot throws
    /// `.malformedRecording`; a bad frame line becomes a frame whose push is
    /// `null`, so applying it raises `errorWhenAppendFrame` and playback goes on.
    public init(ndjson body: [UInt8]) throws(PlayerError) {
        let lines = body.split(separator: 10, omittingEmptySubsequences: true)
        guard let first = lines.first, let header = try? JSON.parse(Array(first)),
              let begin = header["beginTimestamp"]?.int64Value, let end = header["endTimestamp"]?.int64Value,
              begin <= end else {
            throw PlayerError(kind: .malformedRecording, code: .malformed, message: "the recording has no valid header line")
        }
        beginTimestamp = begin
        endTimestamp = end
        framesCount = header["framesCount"]?.intValue ?? lines.count - 1
        start = header["sliceStart"]?.int64Value ?? 0
        self.end = max(start, header["sliceEnd"]?.int64Value ?? (end - begin + 1))
        if let json = header["snapshot"], json != .null {
            do {
                snapshot = try RoomSnapshot(recordingJSON: json)
            } catch {
                throw PlayerError(kind: .malformedRecording, code: .malformed, message: "bad snapshot: \(error.message)")
            }
        }
        var frames: [RecordedFrame] = []
        frames.reserveCapacity(lines.count - 1)
        for line in lines.dropFirst() {
            let push = try? JSON.parse(Array(line))
            let t = push?["t"]?.int64Value ?? frames.last?.t ?? start
            guard let push, push.objectValue != nil else {
                frames.append(RecordedFrame(t: t, seq: 0, push: .null))
                continue
            }
            frames.append(RecordedFrame(t: t, seq: push["seq"]?.int64Value ?? 0, push: push))
        }
        self.frames = frames
    }
}

/// The room as a player rebuilds it: a snapshot, then frames applied one
/// by one with the client's rules (the same as `RoomHost`'s). Pure.
struct PlayerStateModel {
    /// Checks a `globalState` against the registered custom type (name, check).
    typealias GlobalStateCheck = (name: String, check: @Sendable (JSON) throws -> Void)

    private(set) var state: PlayerState?
    var globalStateCheck: GlobalStateCheck?

    /// What applying a frame produced.
    struct Outcome {
        var diff = PlayerStateDiff()
        var magix: MagixEvent?
        /// Why the frame (or its `globalState`) could not be taken as is.
        var error: String?
    }

    /// Replaces the state with `snapshot` (not a frame: its `globalState`,
    /// often the empty `{}` of a new room, is not checked); returns what changed.
    mutating func reset(to snapshot: RoomSnapshot) -> Outcome {
        let next = PlayerState(snapshot: snapshot)
        let outcome = Outcome(diff: PlayerStateDiff(from: state, to: next))
        state = next
        return outcome
    }

    /// Applies one frame. A frame that cannot be applied leaves the state as
    /// it was and reports why; one whose `globalState` does not decode as the
    /// registered type is applied and reported.
    mutating func apply(_ frame: RecordedFrame, room: String) -> Outcome {
        guard var next = state else { return Outcome(error: "no state to apply frame \(frame.seq) to") }
        guard let op = frame.push["op"]?.stringValue else {
            return Outcome(error: "frame \(frame.seq) at \(frame.t) ms is not a room event")
        }
        let push = frame.push
        var outcome = Outcome()
        switch op {
        case "state":
            guard let patch = push["patch"]?.objectValue else { return Outcome(error: "state frame \(frame.seq) has no patch") }
            do {
                let (room, _) = try next.roomState.applying(patch: patch)
                next.globalState = room.globalState
                next.sceneState = room.sceneState
                next.broadcastState = room.broadcastState
            } catch {
                return Outcome(error: "state frame \(frame.seq): \(error.message)")
            }
            if patch["globalState"] != nil { outcome.error = checkGlobalState(next.globalState) }
        case "memberState":
            guard let memberId = push["memberId"]?.int64Value, let memberState = push["memberState"]?.objectValue else {
                return Outcome(error: "memberState frame \(frame.seq) lacks memberId or memberState")
            }
            if let index = next.members.firstIndex(where: { $0.memberId == memberId }) {
                next.members[index].memberState = memberState
            }
        case "userUpdate":
            var users: [Member] = []
            for json in push["users"]?.arrayValue ?? [] {
                guard let user = try? Member(json: json) else { return Outcome(error: "userUpdate frame \(frame.seq): bad member") }
                users.append(user)
            }
            let ids = Set(users.map(\.memberId))
            next.members.removeAll { ids.contains($0.memberId) }
            if push["type"]?.stringValue == "add" { next.members.append(contentsOf: users) }
        case "streamUpdate":
            var streams: [RoomKitProtocol.Stream] = []
            for json in push["streams"]?.arrayValue ?? [] {
                guard let stream = try? RoomKitProtocol.Stream(json: json) else {
                    return Outcome(error: "streamUpdate frame \(frame.seq): bad stream")
                }
                streams.append(stream)
            }
            let ids = Set(streams.map(\.id))
            next.streams.removeAll { ids.contains($0.id) }
            if push["type"]?.stringValue == "add" { next.streams.append(contentsOf: streams) }
        case "extraInfo":
            guard let key = push["key"]?.stringValue, let value = push["value"]?.stringValue else {
                return Outcome(error: "extraInfo frame \(frame.seq) lacks key or value")
            }
            next.extraInfo[key] = value
        case "magix":
            guard let from = push["from"]?.int64Value, let event = push["event"]?.stringValue else {
                return Outcome(error: "magix frame \(frame.seq) lacks from or event")
            }
            outcome.magix = MagixEvent(room: room, seq: frame.seq, from: from, event: event, payload: push["payload"] ?? .null)
        default:
            return Outcome(error: "frame \(frame.seq) has an unknown op \(op)")
        }
        outcome.diff = PlayerStateDiff(from: state, to: next)
        state = next
        return outcome
    }

    private func checkGlobalState(_ globalState: [String: JSON]) -> String? {
        guard let custom = globalStateCheck else { return nil }
        do {
            try custom.check(.object(globalState))
            return nil
        } catch {
            return "globalState does not decode as \(custom.name): \(error)"
        }
    }
}
