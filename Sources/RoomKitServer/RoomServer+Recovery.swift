import RoomKitLoop
import RoomKitProtocol

// The recovery buffers' byte bounds and the resume replay (RecoveryBuffer.swift).
extension RoomServer {
    /// Buffers `entry` in `room` for resume, then evicts frames past the
    /// room's and the process's byte bounds (from this room: the one that grew).
    func remember(_ entry: RecoveryEntry, in room: ServerRoom, now: Int64) {
        recoveryBytes += room.recovery.append(entry, keepAtLeast: configuration.recoveryEvents,
                                              window: configuration.recoveryWindow.milliseconds, now: now)
        recoveryBytes -= room.recovery.evict(toAtMost: configuration.recoveryBytesPerRoom)
        if recoveryBytes > configuration.recoveryBytesTotal {
            recoveryBytes -= room.recovery.evict(toAtMost: 0, orFreeing: recoveryBytes - configuration.recoveryBytesTotal)
        }
    }

    /// The frames a resume from `seq` must receive, in order, for `userId`:
    /// those no longer in memory read back from the store, then the
    /// buffered ones. Nil when the store cannot be read (the resume is then
    /// answered as not recovered, with a snapshot: nothing is lost either way).
    func replay(_ room: ServerRoom, after seq: Int64, for userId: String) -> [WebSocketFrame]? {
        var frames: [WebSocketFrame] = []
        var memoryAfter = seq
        if let evicted = room.recovery.lastEvictedSeq, evicted > seq {
            do {
                for event in try store.events(room: room.id, afterSeq: seq, throughSeq: evicted) {
                    if let recipients = event.recipients, !recipients.contains(userId) { continue }
                    frames.append(WebSocketFrame(bytes: event.push))
                }
            } catch {
                logger.error("resume replay not read", metadata: ["room": "\(room.id)", "error": "\(error)"])
                return nil
            }
            memoryAfter = evicted
        }
        for entry in room.recovery.entries(after: memoryAfter) {
            if let recipients = entry.recipients, !recipients.contains(userId) { continue }
            guard let frame = entry.frame else { continue }
            frames.append(frame)
        }
        return frames
    }

    /// Refills `room`'s buffer after a restart without reading more pushes
    /// than the byte bounds let memory hold: seq, time and recipients of the
    /// recoverable tail (`recoveryEvents`), and the pushes of only its newest
    /// events, so a restart costs the same whatever the events' size.
    func refillRecovery(_ room: ServerRoom, now: Int64) throws {
        let tail = try store.lastEventHeads(room: room.id, count: Int64(configuration.recoveryEvents))
        var budget = min(configuration.recoveryBytesPerRoom, max(0, configuration.recoveryBytesTotal - recoveryBytes))
        var firstWithFrame = tail.count
        while firstWithFrame > 0, tail[firstWithFrame - 1].size <= budget {
            firstWithFrame -= 1
            budget -= tail[firstWithFrame].size
        }
        if firstWithFrame == tail.count, !tail.isEmpty { firstWithFrame -= 1 }  // the newest always
        var pushes: [Int64: [UInt8]] = [:]
        if firstWithFrame < tail.count {
            let after = firstWithFrame > 0 ? tail[firstWithFrame - 1].seq : tail[0].seq - 1
            for event in try store.events(room: room.id, afterSeq: after, throughSeq: tail[tail.count - 1].seq) {
                pushes[event.seq] = event.push
            }
        }
        for head in tail {
            remember(RecoveryEntry(seq: head.seq, ts: head.ts, frame: pushes[head.seq].map { WebSocketFrame(bytes: $0) },
                                   recipients: head.recipients), in: room, now: now)
        }
    }
}
