import CoreMetrics
import RoomKitLoop

/// One loop turn's room events on their way through the plugins, for the
/// dispatch latency as issue #28 §1 defines it, "push received → last
/// plugin done": `roomkit_event_dispatch_seconds` gets one sample per room
/// event that reached a plugin, from the turn that received it (when the
/// plugin manager batched the turn's first event: the push was received,
/// decoded and applied just before, in the same loop callback) to the end
/// of the last plugin's call for it. `roomkit_plugin_dispatch_seconds` has
/// the same start, per plugin. As there, a process plugin's call ends when
/// the event is handed to its process (its proxy's hook), not at the
/// child's DONE.
///
/// Each plugin reports its batch of the turn once, at the batch's end (one
/// lock per plugin per turn, not per call); the plugin that finishes an
/// event last records it. A call the watchdog timed out counts when it
/// returns. A plugin that never returns, or was quarantined between the
/// turn and its batch, leaves its events unrecorded. Thread-safe.
final class TurnDone: Sendable {
    private struct Pending {
        /// Plugins still to finish each event (by its payload's offset in the turn's buffer).
        var left: [Int: Int]
        /// The latest finish so far of each event (uptime ns).
        var last: [Int: UInt64] = [:]
    }

    private let pending: LockedValue<Pending>
    /// When the turn began (uptime ns).
    let since: UInt64
    let timer: CoreMetrics.Timer

    /// For a turn's batches: each event is counted once per plugin that gets it.
    init(batch: [(runtime: PluginRuntime, calls: [TurnCall])], since: UInt64, timer: CoreMetrics.Timer) {
        var left: [Int: Int] = [:]
        for (runtime, calls) in batch where runtime.isActive {
            for call in calls { left[call.payload.lowerBound, default: 0] += 1 }
        }
        pending = LockedValue(Pending(left: left))
        self.since = since
        self.timer = timer
    }

    /// One plugin finished its calls of this turn: each event's key (its
    /// payload's `startIndex`) and when its call ended. Plugin queue.
    func finished(_ done: [(key: Int, at: UInt64)]) {
        let complete = pending.withLock { pending -> [UInt64] in
            var complete: [UInt64] = []
            for (key, at) in done {
                guard let left = pending.left[key] else { continue }
                let last = max(pending.last[key] ?? 0, at)
                if left <= 1 {
                    pending.left[key] = nil
                    pending.last[key] = nil
                    complete.append(last)
                } else {
                    pending.left[key] = left - 1
                    pending.last[key] = last
                }
            }
            return complete
        }
        for at in complete { timer.recordNanoseconds(Int64(truncatingIfNeeded: at &- since)) }
    }
}
