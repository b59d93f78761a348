import RoomKitProtocol

/// A recording request as checked on the loop (RoomServer+HTTP.swift): the
/// window, the slice and the room's seq at the time of the request.
struct RecordingRequest: Sendable {
    var room: String
    /// `from` and `to` (ms since the epoch).
    var begin: Int64
    var end: Int64
    /// `sliceStart` as applied and `sliceEnd` as asked (ms after `begin`).
    var sliceStart: Int64
    var sliceEnd: Int64
    /// The slice's frames: `sliceFrom <= ts <= sliceTo` (possibly none).
    var sliceFrom: Int64
    var sliceTo: Int64
    var wantsSnapshot: Bool
    /// The room's seq when the request arrived: later events are not read,
    /// so a download is one consistent cut of the log however long it takes.
    var throughSeq: Int64
}

/// What the first pass over the log found: the header line, where the
/// frames are, and the exact length of the body (sent as `Content-Length`,
/// so a client can tell a truncated download from a whole one).
struct RecordingPlan: Sendable {
    /// The NDJSON header line, newline included.
    var header: [UInt8]
    /// Frames are read from the events with `afterSeq < seq <= lastSeq`.
    var afterSeq: Int64
    var lastSeq: Int64
    var frames: Int64
    /// Header plus every frame line, in bytes.
    var bodyLength: Int64
}

/// Builds a recording answer (PROTOCOL.md §10 and "Recording slices") from
/// the store in two passes, so it can be streamed in bounded pieces: `plan()`
/// replays up to the slice and measures the frames, `frames(_:chunkBytes:emit:)`
/// serialises them in chunks. Object members are written in sorted order,
/// so two downloads of the same window are the same bytes (and the length
/// the first pass measured is the length the second writes). Pure apart from the reads; runs on whichever
/// thread owns `reads` (a download's reader thread in roomd).
struct RecordingWriter {
    let request: RecordingRequest
    let reads: EventReads
    /// Events read per query: at most this many, and no more once their
    /// pushes reach `batchBytes` (the reader's memory, whatever the events' size).
    var batchSize: Int64 = 2000
    var batchBytes = 1 << 20

    /// The first pass: the state just before `sliceFrom` (nearest stored
    /// snapshot, then the events before it), the header, and the frames'
    /// seq range, count and size. Throws a StorageError or a JSON error.
    func plan() throws -> RecordingPlan {
        let r = request
        var model = RoomModel()
        var cursor: Int64 = 0
        if let snapshot = try reads.snapshot(room: r.room, beforeTime: r.sliceFrom) {
            if r.wantsSnapshot { model = try RoomModel(json: snapshot.body) }
            cursor = snapshot.seq
        }
        var firstAfter: Int64?
        var lastSeq: Int64 = cursor
        var frames: Int64 = 0
        var frameBytes: Int64 = 0
        var line: [UInt8] = []
        scan: while r.sliceFrom <= r.sliceTo || r.wantsSnapshot {
            let batch = try reads.events(room: r.room, afterSeq: cursor, throughSeq: r.throughSeq, limit: batchSize,
                                         maxBytes: batchBytes)
            guard let last = batch.last else { break }
            var previous = cursor
            cursor = last.seq
            for event in batch {
                defer { previous = event.seq }
                if event.ts < r.sliceFrom {
                    if r.wantsSnapshot { try model.apply(push: JSON.parse(event.push), mutation: event.mutation) }
                } else if event.ts <= r.sliceTo {
                    if firstAfter == nil { firstAfter = previous }
                    frames += 1
                    lastSeq = event.seq
                    line.removeAll(keepingCapacity: true)
                    frameLine(event, into: &line)
                    frameBytes += Int64(line.count)
                } else {
                    break scan
                }
            }
        }
        let total = r.sliceStart == 0 && r.sliceTo == r.end
            ? frames : try reads.countEvents(room: r.room, fromTime: r.begin, throughTime: r.end)
        var header: [String: JSON] = [
            "room": .string(r.room), "beginTimestamp": .int(r.begin), "endTimestamp": .int(r.end),
            "framesCount": .int(total), "sliceStart": .int(r.sliceStart),
            "sliceEnd": .int(min(r.sliceEnd, r.end - r.begin + 1)), "sliceFramesCount": .int(frames),
        ]
        if r.wantsSnapshot {
            var snapshot = model.snapshot.recordingJSON
            if case .object(var fields) = snapshot {
                fields["state"] = nil
                for (key, value) in model.snapshot.state.json.objectValue ?? [:] { fields[key] = value }
                snapshot = .object(fields)
            }
            header["snapshot"] = snapshot
        }
        var headerBytes: [UInt8] = []
        JSON.object(header).serialize(into: &headerBytes, sortedKeys: true)
        headerBytes.append(10)
        let afterSeq = firstAfter ?? lastSeq
        return RecordingPlan(header: headerBytes, afterSeq: afterSeq, lastSeq: frames == 0 ? afterSeq : lastSeq,
                             frames: frames, bodyLength: Int64(headerBytes.count) + frameBytes)
    }

    /// The second pass: the frame lines of `plan`, handed to `emit` in
    /// chunks of about `chunkBytes` (a chunk ends at a line's end, so one
    /// very large event makes one larger chunk). `emit` returns false to stop
    /// early (the client has gone); so does this function then.
    @discardableResult
    func frames(_ plan: RecordingPlan, chunkBytes: Int, emit: ([UInt8]) throws -> Bool) throws -> Bool {
        var cursor = plan.afterSeq
        var chunk: [UInt8] = []
        chunk.reserveCapacity(chunkBytes + 4096)
        while cursor < plan.lastSeq {
            let batch = try reads.events(room: request.room, afterSeq: cursor, throughSeq: plan.lastSeq,
                                         limit: batchSize, maxBytes: batchBytes)
            guard let last = batch.last else { break }
            cursor = last.seq
            for event in batch where event.ts >= request.sliceFrom && event.ts <= request.sliceTo {
                frameLine(event, into: &chunk)
                if chunk.count >= chunkBytes {
                    guard try emit(chunk) else { return false }
                    chunk.removeAll(keepingCapacity: true)
                }
            }
        }
        if !chunk.isEmpty { return try emit(chunk) }
        return true
    }

    /// The whole body at once (the reference the streamed answer must equal).
    func body() throws -> [UInt8] {
        let plan = try plan()
        var body = plan.header
        try frames(plan, chunkBytes: 1 << 16) { chunk in
            body.append(contentsOf: chunk)
            return true
        }
        return body
    }

    /// One frame: the push as members saw it, plus `t` and (magix) `to`:
    /// the stored bytes with `t` spliced in (`EncodedPush`), or, for a row
    /// an older roomd wrote, the push re-encoded with sorted keys.
    private func frameLine(_ event: StoredEvent, into bytes: inout [UInt8]) {
        if let timeAt = event.timeAt {
            return EncodedPush.appendRecordingLine(push: event.push, timeAt: timeAt, t: event.ts - request.begin, to: &bytes)
        }
        var line = (try? JSON.parse(event.push).objectValue) ?? [:]
        line["t"] = .int(event.ts - request.begin)
        if let recipients = event.recipients { line["to"] = .array(recipients.map(JSON.string)) }
        JSON.object(line).serialize(into: &bytes, sortedKeys: true)
        bytes.append(10)
    }
}
