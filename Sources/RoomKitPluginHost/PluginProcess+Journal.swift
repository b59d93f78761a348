import CRoomKitPluginWire
import Dispatch
import Foundation

/// The journal of a process plugin: every event encoded once as an EVENTS
/// record (PLUGIN-WIRE.md section 4), batched into frames on the plugin's
/// queue, kept until the child reports it finished (DONE) or failed
/// (FAILED), and resent to a restarted child. Each finished record is one
/// call of the plugin, counted as the runtime counts an inline call.
extension PluginProcess {
    /// A loop turn's room and player events: each encoded once into the
    /// journal and written in EVENTS frames (this is the plugin's queue), a
    /// slice of `deliverSlice` at a time. When the loop outran the queue, the
    /// runtime drains its backlog of turns as one batch (millions of events
    /// in the bench): journaling all of it before the first write left the
    /// child idle until the end, and grew the journal by its whole size
    /// (fresh pages). A slice at a time, the child works on one slice while
    /// the next is encoded.
    func deliver(_ events: PluginRoomEvents, since: UInt64) {
        let now = DispatchTime.now().uptimeNanoseconds
        let posted = since == 0 ? now : since
        // The turn's calls and payload bytes read in place: no slice of the
        // payload array per record (each was a retain and a release of it).
        events.payloads.withUnsafeBufferPointer { payloads in
            events.rooms.withUnsafeBufferPointer { rooms in
                events.calls.withUnsafeBufferPointer { calls in
                    var from = 0
                    while from < calls.count {
                        let to = min(calls.count, from + Self.deliverSlice)
                        let taken = lock.withLock { () -> Bool in
                            guard acceptsRecordsLocked else { return false }
                            for index in from..<to {
                                let isPlayer = calls[index].hook == .playerEvent
                                let type = isPlayer ? ROOMKIT_WIRE_RECORD_PLAYER : ROOMKIT_WIRE_RECORD_ROOM
                                let room = rooms[Int(calls[index].room)]
                                appendLocked(type, number: Int64(calls[index].kind), a: room,
                                             b: UnsafeBufferPointer(rebasing: payloads[calls[index].payload.dropLast()]),
                                             posted: posted, room: room)
                            }
                            flushScheduled = true  // this flush, now: no second one from the queue
                            return true
                        }
                        guard taken else { return }
                        flush()
                        from = to
                    }
                }
            }
        }
    }

    /// How many records `deliver` journals before it writes them.
    static let deliverSlice = 1024

    /// An error or a config change, queued in order with the room and
    /// player events and written with the next flush. Returns its seq (nil: not queued).
    @discardableResult
    func send(_ record: Record) -> UInt64? {
        let now = DispatchTime.now().uptimeNanoseconds
        return lock.withLock { () -> UInt64? in
            guard acceptsRecordsLocked else { return nil }
            let seq: UInt64?
            switch record {
            case .throwError(let domain, let code, let message):
                seq = appendLocked(ROOMKIT_WIRE_RECORD_THROW_ERROR, number: code, a: domain, b: message.utf8, posted: now)
            case .configChanged(let room, let config):
                seq = appendLocked(ROOMKIT_WIRE_RECORD_CONFIG_CHANGED, number: 0, a: room, b: config.utf8, posted: now)
            }
            if seq != nil { scheduleFlushLocked() }
            return seq
        }
    }

    /// Appends one record to the journal's bytes (`lock` held, and
    /// `acceptsRecordsLocked` checked by the caller, once per batch), unless
    /// its queue is full (then it is dropped and counted).
    @discardableResult
    private func appendLocked<Payload: Collection<UInt8>>(_ type: roomkit_wire_record, number: Int64, a: String?, b: Payload,
                                                          posted: UInt64, room: String? = nil) -> UInt64? {
        guard journal.count - journalHead < spec.supervision.queueLimit else {
            stats.dropped += 1
            return nil
        }
        nextSeq += 1
        let seq = nextSeq
        let length = WireRecord.length(a: a, b: b)
        // Written in place at once (no closure per record).
        let (chunk, start, out) = journalBytes.reserve(length)
        WireRecord.write(type, seq: seq, number: number, a: a, b: b, into: out)
        journal.append(Entry(seq: seq, type: UInt8(type.rawValue), number: number, chunk: chunk, start: start, length: length,
                             posted: posted, room: room))
        return seq
    }

    /// Whether records are still taken (`lock` held): not once the plugin is
    /// gone for good or stopping.
    private var acceptsRecordsLocked: Bool {
        switch phase {
        case .quarantined, .stopping, .stopped: return false
        case .starting, .running, .restarting: return true
        }
    }

    /// Empties the journal of everything the child has not finished, and
    /// its bytes (`lock` held). What it finished stays until it is counted.
    func clearJournalLocked() {
        journal.removeSubrange(journalHead...)
        written = journalHead
        journalBytes.removeAll()
    }

    /// on_config_changed: sent now, and finished before this returns: a URL
    /// request (which jumps the child's queue of records) after this call
    /// must find the new config (PLUGIN-WIRE.md section 5).
    func configChanged(room: String?, config: String) {
        let seq = send(.configChanged(room: room, config: config))
        flush()
        if let seq, let child = lock.withLock({ phase == .running ? current : nil }) {
            _ = child.waitDone(seq, timeout: loadBound)
        }
    }

    /// Schedules one write of everything unsent on the plugin's queue (`lock` held).
    func scheduleFlushLocked() {
        guard phase == .running, !flushScheduled else { return }
        flushScheduled = true
        queue.async { [self] in flush() }
    }

    /// Writes the unsent events as EVENTS frames (the plugin's queue), in
    /// sends of about `flushChunkBytes`. A send gathers the frames' headers
    /// and the records where they are in the journal's chunks (`sendmsg`):
    /// a record's bytes are not copied again before the kernel copies them.
    /// Flushes are serialized (`flushing`), so frames go out in journal
    /// order even when a config change flushes from another thread.
    func flush() {
        flushing.lock()
        defer { flushing.unlock() }
        var frames = GatheredFrames()
        lock.withLock {
            flushScheduled = false
            swap(&frames, &gathered)
        }
        while let child = nextFrames(into: &frames) {
            frames.send(to: child)
        }
        frames.clear()
        // Handed back for the next flush (its arrays' capacity reused).
        lock.withLock { swap(&frames, &gathered) }
    }

    /// Fills `frames` with the next unsent records as EVENTS frames, up to
    /// about `flushChunkBytes`, and marks them sent; nil when nothing is
    /// left to send (or no child to send it to).
    private func nextFrames(into frames: inout GatheredFrames) -> PluginChild? {
        lock.withLock { () -> PluginChild? in
            guard phase == .running || phase == .stopping, let child = current else { return nil }
            trimLocked(done: child.doneSeq)
            guard written < journal.count else { return nil }
            frames.clear()
            var last: UInt64 = 0
            var next = written
            // Records next to each other in one chunk go as one piece (a
            // journal's records are back to back): one piece per run, not
            // per record. The entries in place: no copy of one (nor a retain
            // of its room) per record.
            journal.withUnsafeBufferPointer { entries in
                while next < entries.count, frames.bytes < Self.flushChunkBytes {
                    defer { next += 1 }
                    guard !entries[next].skip else { continue }
                    if frames.frameRecords >= ROOMKIT_WIRE_BATCH_RECORDS || frames.frameBytes >= Int(ROOMKIT_WIRE_BATCH_BYTES) {
                        frames.closeFrame()
                    }
                    let chunk = entries[next].chunk
                    if frames.add(chunk: chunk, start: entries[next].start, length: entries[next].length) {
                        frames.hold(journalBytes.owner(of: chunk))
                    }
                    last = entries[next].seq
                }
            }
            frames.closeFrame()
            written = next
            if last != 0 { machine.sent(through: last, now: PluginChild.monotonicNow()) }
            return frames.isEmpty ? nil : child
        }
    }

    /// About how many bytes one send of a flush carries.
    static let flushChunkBytes = 1 << 20

    /// Marks the events the process has finished (`lock` held): they are
    /// not resent after a crash, and their bytes go a chunk at a time. Each
    /// entry stays where it is, between `countedHead` and `journalHead`,
    /// until the DONE frame that covers it is counted (the progress page may
    /// run ahead of the socket, where a FAILED for it comes before that
    /// DONE): no copy of it, no retain of its room, per record.
    func trimLocked(done: UInt64) {
        while journalHead < journal.count, journalHead < written, journal[journalHead].seq <= done {
            journalHead += 1
        }
        if journalHead == journal.count {
            journalBytes.removeAll()
        } else {
            // The chunks whose records are all finished go now, whatever the entries do.
            journalBytes.release(before: journal[journalHead].chunk)
        }
        compactLocked()
    }

    /// Drops the counted entries from the journal's front (`lock` held):
    /// all at once when everything is counted, else once they are more than
    /// half of it (each entry moves at most once on average).
    private func compactLocked() {
        if countedHead == journal.count {
            journal.removeAll(keepingCapacity: true)
            countedHead = 0
            journalHead = 0
            written = 0
        } else if countedHead > 1024, countedHead * 2 > journal.count {
            journal.removeFirst(countedHead)
            journalHead -= countedHead
            written -= countedHead
            countedHead = 0
        }
    }

    /// Counts the finished calls up to `seq` (a DONE frame's, or everything
    /// when the child is gone): each one that did not fail is a success,
    /// counted as the runtime counts a batch of inline calls (one lock per
    /// batch); its latency runs from its post (or the previous finish) to now,
    /// and a room event's dispatch time from its loop turn to now. A room
    /// event is counted in its room's calls here, when the child finished
    /// it, as an inline call is when it returns (a failed one was counted
    /// at its FAILED, a crashed one at the crash). One the tick found over
    /// `timeoutMs` counts as one failure (PluginCallDeadline).
    func countFinished(through seq: UInt64) {
        var dispatch: [UInt64] = []
        var rooms = PluginRoomTally.Runs()
        var late: [Entry] = []
        let (tally, hooks, target) = lock.withLock { () -> (PluginRuntime.SuccessTally, [PluginHookKind: (calls: Int, nanoseconds: UInt64)], PluginRuntime?) in
            if let current { trimLocked(done: min(current.doneSeq, seq)) }
            var tally = PluginRuntime.SuccessTally()
            var hooks: [PluginHookKind: (calls: Int, nanoseconds: UInt64)] = [:]
            let now = DispatchTime.now().uptimeNanoseconds
            var taken = 0
            // The hook's sums run over consecutive records of one hook (a
            // batch is mostly one): one dictionary update per run, not per record.
            var runHook: PluginHookKind?
            var run: (calls: Int, nanoseconds: UInt64) = (0, 0)
            func endRun() {
                guard let hook = runHook, run.calls > 0 else { return }
                hooks[hook, default: (0, 0)].calls += run.calls
                hooks[hook, default: (0, 0)].nanoseconds &+= run.nanoseconds
                run = (0, 0)
            }
            journal.withUnsafeBufferPointer { entries in
                for index in countedHead..<journalHead {
                    guard entries[index].seq <= seq else { break }
                    taken += 1
                    guard !entries[index].skip, !entries[index].failed else { continue }
                    guard !entries[index].late else {
                        late.append(entries[index])
                        continue
                    }
                    let posted = entries[index].posted
                    let elapsed = now &- max(posted, lastFinish)
                    lastFinish = now
                    tally.calls += 1
                    tally.nanoseconds &+= elapsed
                    let hook = entries[index].hook
                    if hook != runHook {
                        endRun()
                        runHook = hook
                    }
                    run.calls += 1
                    run.nanoseconds &+= elapsed
                    if hook == .roomEvent {
                        dispatch.append(now &- posted)
                        if let room = entries[index].room { rooms.add(room) }
                    }
                }
            }
            endRun()
            countedHead += taken
            compactLocked()
            return (tally, hooks, runtime)
        }
        guard let target else { return }
        if tally.calls > 0 {
            target.roomCalls.count(rooms, .roomEvent)
            target.countFinished(tally, hooks: hooks, dispatch: dispatch)
        }
        for entry in late {
            let failure = PluginCallDeadline.failure(spec.timeout)
            if entry.hook == .roomEvent, let room = entry.room { target.roomCalls.count(room, .roomEvent, failure: failure) }
            target.record(failure: failure, nanoseconds: 0, hook: nil)
        }
    }

    /// DONE from the child (its reader thread): the records up to `seq` are finished.
    func childProgressed(done seq: UInt64) {
        countFinished(through: seq)
    }

    /// FAILED from the child (its reader thread): record `seq`'s handler
    /// failed. Every record before it finished first (records run in order);
    /// then this one is one failed call, as an inline hook's failure is:
    /// logged at warning (rate limited), counted toward quarantine.
    func childFailed(seq: UInt64, reason: String) {
        let found = lock.withLock { () -> Entry? in
            if let current { trimLocked(done: current.doneSeq) }
            guard let index = journal[countedHead...].firstIndex(where: { $0.seq == seq && !$0.skip }) else { return nil }
            journal[index].failed = true
            return journal[index]
        }
        guard let found else { return }
        countFinished(through: seq &- 1)
        guard let target = lock.withLock({ runtime }) else { return }
        let why = reason.isEmpty ? "its handler failed" : oneLine(reason)
        let failure = "\(found.label) failed in the plugin process: \(why)"
        if found.hook == .roomEvent, let room = found.room { target.roomCalls.count(room, .roomEvent, failure: failure) }
        target.record(failure: failure, nanoseconds: 0, hook: nil)
    }
}
