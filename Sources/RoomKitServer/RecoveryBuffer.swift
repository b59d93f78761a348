import RoomKitLoop

/// A room event kept for resume: its seq, time and recipients, and its
/// encoded push while the byte bounds let memory hold it (nil once evicted:
/// a resume then reads it back from the store).
struct RecoveryEntry {
    let seq: Int64
    let ts: Int64
    var frame: WebSocketFrame?
    let recipients: [String]?
}

/// One room's recovery buffer (docs/PROTOCOL.md, "recovered").
///
/// Two rules. *What a resume may recover* is unchanged: at least the last
/// `recoveryEvents` events or those of the last `recoveryWindow`, whichever
/// holds more; only seq, time and recipients are kept for them (a few dozen
/// bytes each). *What memory holds* is bounded by bytes: the newest pushes up
/// to `recoveryBytesPerRoom` per room and `recoveryBytesTotal` in all (the
/// server evicts from the room that grows). A resume whose events are
/// recoverable but no longer in memory is served from the store
/// (`RoomServer.replay`), so it still loses nothing.
///
/// Loop thread only (a field of `ServerRoom`).
struct RecoveryBuffer {
    private(set) var entries: [RecoveryEntry] = []
    /// `entries[head...]` are recoverable; older ones are dead and compacted away.
    private(set) var head = 0
    /// `entries[framesHead...]` hold their frames; `entries[head..<framesHead]` do not.
    private(set) var framesHead = 0
    /// Bytes of the frames held.
    private(set) var bytes = 0

    /// The oldest seq a resume can recover from (events after it are all
    /// recoverable), or `seq` when nothing is buffered.
    func recoverableAfter(roomSeq seq: Int64) -> Int64 {
        head < entries.count ? entries[head].seq - 1 : seq
    }

    /// The time of the newest event buffered (nil: none since start).
    var newestTimestamp: Int64? { entries.last?.ts }

    /// The last seq whose frame is not in memory (nil: every recoverable event is).
    var lastEvictedSeq: Int64? {
        framesHead > head ? entries[framesHead - 1].seq : nil
    }

    /// Appends `entry`; retires entries past the count/window rule. Returns
    /// the bytes added less the bytes freed.
    mutating func append(_ entry: RecoveryEntry, keepAtLeast count: Int, window: Int64, now: Int64) -> Int {
        entries.append(entry)
        var delta = entry.frame?.count ?? 0
        bytes += delta
        if entry.frame == nil {
            // Only what a restart did not reload comes without its frame, and
            // that is older than anything buffered: keep frames a suffix.
            while framesHead < entries.count {
                let freed = entries[framesHead].frame?.count ?? 0
                entries[framesHead].frame = nil
                bytes -= freed
                delta -= freed
                framesHead += 1
            }
        }
        // Drop the oldest only while more than `count` are held AND it is older than `window`.
        while entries.count - head > count, entries[head].ts < now - window {
            if head >= framesHead {
                let freed = entries[head].frame?.count ?? 0
                bytes -= freed
                delta -= freed
                framesHead = head + 1
            }
            entries[head].frame = nil
            head += 1
        }
        if head > 4096 && head * 2 > entries.count {
            entries.removeFirst(head)
            framesHead -= head
            head = 0
        }
        return delta
    }

    /// Evicts the oldest frames (never the newest) until at most `limit`
    /// bytes are held or `needed` bytes were freed. Returns the bytes freed.
    mutating func evict(toAtMost limit: Int, orFreeing needed: Int = .max) -> Int {
        var freed = 0
        while bytes > limit, freed < needed, framesHead < entries.count - 1 {
            let size = entries[framesHead].frame?.count ?? 0
            entries[framesHead].frame = nil
            framesHead += 1
            bytes -= size
            freed += size
        }
        return freed
    }

    /// The recoverable entries after `seq` (those before `framesHead` without frames).
    func entries(after seq: Int64) -> ArraySlice<RecoveryEntry> {
        var low = head, high = entries.count
        while low < high {
            let mid = (low + high) / 2
            if entries[mid].seq <= seq { low = mid + 1 } else { high = mid }
        }
        return entries[low...]
    }
}
