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
              let begin = header["beginTimestamp"], let end = header["endTimestamp"] else {
            throw PlayerError(kind: .malformedRecording, code: .malformed, message: "the recording has no valid header line")
        }
        // A server's numbers are outside input: each is checked once against
        // its range, so `end - begin + 1` and the player's clock cannot overflow.
        do {
            beginTimestamp = try ExternalNumber.integer(begin, field: "beginTimestamp", in: ExternalNumber.epochMilliseconds)
            endTimestamp = try ExternalNumber.integer(end, field: "endTimestamp", in: beginTimestamp...ExternalNumber.maxEpochMilliseconds)
            start = try header["sliceStart"].map {
                try ExternalNumber.integer($0, field: "sliceStart", in: ExternalNumber.offsetMilliseconds)
            } ?? 0
            let sliceEnd = try header["sliceEnd"].map {
                try ExternalNumber.integer($0, field: "sliceEnd", in: ExternalNumber.offsetMilliseconds)
            }
            self.end = max(start, sliceEnd ?? (endTimestamp - beginTimestamp + 1))
        } catch {
            throw PlayerError(kind: .malformedRecording, code: .invalidArgument, message: "bad recording header: \(error)")
        }
        framesCount = header["framesCount"]?.intValue ?? lines.count - 1
        if let json = header["snapshot"], json != .null {
            do {
                snapshot = try RoomSnapshot(recordingJSON: json)
            } catch {
                throw PlayerError(kind: .malformedRecording, code: .malformed, message: "bad snapshot: \(error.message)")
            }
        }
        var frames: [RecordedFrame] = []
        frames.reserveCapacity(lines.count - 1)
        // A frame's `t` is a server's number too: outside the recording
        // (0 ... end - begin) it would overflow the player's clock, so such a
        // frame is a bad frame, like one that is not JSON.
        let times = 0...(endTimestamp - beginTimestamp)
        for line in lines.dropFirst() {
            var push = try? JSON.parse(Array(line))
            var t = frames.last?.t ?? start
            if let value = push?["t"] {
                if let checked = try? ExternalNumber.integer(value, field: "t", in: times) { t = checked } else { push = nil }
            }
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
/// by one through the shared `RoomContentModel.apply`, as a live room is. Pure.
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
        guard let current = state else { return Outcome(error: "no state to apply frame \(frame.seq) to") }
        guard let members = frame.push.objectValue, let op = members["op"]?.stringValue else {
            return Outcome(error: "frame \(frame.seq) at \(frame.t) ms is not a room event")
        }
        // The same decode and the same apply as a live room (RoomContentModel).
        var snapshot = RoomSnapshot(state: current.roomState, members: current.members,
                                    streams: current.streams, extraInfo: current.extraInfo)
        let body: RoomEventBody
        do throws(ProtocolError) {
            body = try RoomEventBody.decode(op: op, members)
            try snapshot.apply(body)
        } catch {
            return Outcome(error: "\(op) frame \(frame.seq): \(error.message)")
        }
        var outcome = Outcome()
        switch body {
        case .state(_, let patch):
            if patch["globalState"] != nil { outcome.error = checkGlobalState(snapshot.state.globalState) }
        case .magix(let from, let event, let payload):
            outcome.magix = MagixEvent(room: room, seq: frame.seq, from: from, event: event, payload: payload)
        case .memberState, .userUpdate, .streamUpdate, .extraInfo:
            break
        }
        let next = PlayerState(snapshot: snapshot)
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
