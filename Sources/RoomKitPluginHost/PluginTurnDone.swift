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
/// The turn's events are numbered 0, 1, … in the order raised
/// (`TurnCall.index`), and the counts are arrays indexed by that
/// number: no hashing per call. Each plugin reports its batch of the turn
/// once, at the batch's end (one lock per plugin per turn, not per call);
/// the plugin that finishes an event last records it. A call the watchdog
/// timed out counts when it returns. A plugin that never returns, or was
/// quarantined between the turn and its batch, leaves its events
/// unrecorded. Thread-safe.
final class TurnDone: Sendable {
    private struct Pending {
        /// Plugins still to finish each event of the turn, by its index.
        var left: [Int32]
        /// The latest finish so far of each event (uptime ns).
        var last: [UInt64]
    }

    private let pending: LockedValue<Pending>
    /// When the turn began (uptime ns).
    let since: UInt64
    let timer: CoreMetrics.Timer

    /// For a turn of `events` events and its batches: each event is counted
    /// once per plugin that gets it.
    init(events: Int, batch: [(runtime: PluginRuntime, calls: [TurnCall])], since: UInt64, timer: CoreMetrics.Timer) {
        var left = [Int32](repeating: 0, count: events)
        for (runtime, calls) in batch where runtime.isActive {
            // Player events share the turn but not this latency (it is the room events').
            for call in calls where call.hook == .roomEvent { left[Int(call.index)] += 1 }
        }
        pending = LockedValue(Pending(left: left, last: [UInt64](repeating: 0, count: events)))
        self.since = since
        self.timer = timer
    }

    /// One plugin finished its calls of this turn: each event's index and
    /// when its call ended. Plugin queue.
    func finished(_ done: [(index: Int32, at: UInt64)]) {
        let complete = pending.withLock { pending -> [UInt64] in
            var complete: [UInt64] = []
            for (index, at) in done {
                Self.finish(index: Int(index), at: at, &pending, into: &complete)
            }
            return complete
        }
        for at in complete { timer.recordNanoseconds(Int64(truncatingIfNeeded: at &- since)) }
    }

    /// One plugin finished every one of `events` at `at` (a process plugin:
    /// its batch was handed to the child at once). Plugin queue.
    func finished(_ events: PluginRoomEvents, at: UInt64) {
        let complete = pending.withLock { pending -> [UInt64] in
            var complete: [UInt64] = []
            for call in events.calls {
                Self.finish(index: Int(call.index), at: at, &pending, into: &complete)
            }
            return complete
        }
        for at in complete { timer.recordNanoseconds(Int64(truncatingIfNeeded: at &- since)) }
    }

    private static func finish(index: Int, at: UInt64, _ pending: inout Pending, into complete: inout [UInt64]) {
        guard pending.left.indices.contains(index), pending.left[index] > 0 else { return }
        let last = max(pending.last[index], at)
        pending.last[index] = last
        pending.left[index] -= 1
        if pending.left[index] == 0 { complete.append(last) }
    }
}
