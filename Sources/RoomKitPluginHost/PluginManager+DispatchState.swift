import Dispatch
import RoomKitLoop

/// What dispatch keeps between events, on the loop thread only: held in a
/// `LoopOwned`, so every access checks the thread (and traps elsewhere).
struct DispatchState {
    /// The room events raised during the current loop turn, per plugin in
    /// order, posted as one batch per plugin when the turn ends.
    var turnBatch: [(runtime: PluginRuntime, calls: [TurnCall])] = []
    /// For each of `targets`, its batch's place in `turnBatch` this turn (-1: none yet).
    var turnSlots: [Int] = []
    /// The payload texts of the turn's events, back to back, each
    /// NUL-terminated; the turn's calls point into it, and every plugin's
    /// batch shares it (one buffer per turn, not one per event).
    var turnPayloads: [UInt8] = []
    /// The rooms of the turn's events, each once per run of events in it
    /// (`TurnCall.room` is a place here).
    var turnRooms: [String] = []
    /// How many distinct events the turn's batches hold (each event's
    /// `TurnCall.index` is its number among them).
    var turnEvents: Int32 = 0
    /// When the turn's first batched event was raised (uptime ns), the
    /// start of its plugins' dispatch latency.
    var turnStarted: UInt64 = 0
    /// `runtimes` with what dispatch checks per event read out once (hooks,
    /// room globs, ABI), as of `targetsVersion`.
    var targets: [DispatchTarget] = []
    /// The runtimes of `targets`, held strongly (each target's reference is unretained).
    var targetRuntimes: [PluginRuntime] = []
    var targetsVersion = -1

    /// The next event's number in this turn.
    mutating func nextEventIndex() -> Int32 {
        defer { turnEvents += 1 }
        return turnEvents
    }

    /// `room`'s place in `turnRooms`: the last one again when the event is
    /// in the same room as the one before it, else a new place.
    mutating func roomIndex(_ room: String) -> Int32 {
        if let last = turnRooms.last, last == room { return Int32(turnRooms.count - 1) }
        turnRooms.append(room)
        return Int32(turnRooms.count - 1)
    }
}

/// A value only its loop's thread may touch, checked on every access
/// (`preconditionInEventLoop`: one thread-local read): `LoopBound`'s check,
/// without Swift's dynamic exclusivity check on the stored value, which the
/// dispatch hot path would pay per event (docs/ARCHITECTURE.md, "Loop
/// ownership, measured": about 19 ns an access against 0.6 ns for the
/// thread check).
///
/// Why dropping the exclusivity check is safe here: the value is reached
/// only through `withValue`, on the one loop thread, and no `withValue` body
/// of the plugin manager calls back into code that could reach it again
/// (dispatch and flushTurn post work, they never run it inline).
final class LoopOwned<Value>: @unchecked Sendable {
    // @unchecked Sendable: `stored` is read and written only after
    // `preconditionInEventLoop()` passed, i.e. on the one loop thread.

    let loop: EventLoop
    /// `loop.identity`: the per-access check reads it, not `loop` (no retain of the loop per access).
    private let loopIdentity: UnsafeMutableRawPointer
    @exclusivity(unchecked) private var stored: Value

    init(_ value: Value, loop: EventLoop) {
        self.loop = loop
        loopIdentity = loop.identity
        stored = value
    }

    /// Whether the caller is on the loop thread (`withValue` may be used).
    var onLoop: Bool { EventLoop.isCurrent(loopIdentity) }

    /// Runs `body` with the value. Traps unless called on the loop thread.
    func withValue<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        precondition(onLoop, "must be called on the event loop thread")
        return try body(&stored)
    }
}
