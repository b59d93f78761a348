import CRoomKitPluginWire
import Foundation
import RoomKit
import RoomKitLoop

/// One plugin's calls in one room, for one hook: a row of the room detail
/// view (`GET /v1/rooms/{id}`'s `pluginCalls`, docs/DASHBOARD.md).
public struct PluginRoomCalls: Sendable, Hashable {
    public let plugin: String
    /// The hook's C name (`on_room_event`, `on_player_event`).
    public let hook: String
    /// Calls the plugin finished for this room since its instance started
    /// (a reload or a half-open retry starts over, as `GET /v1/plugins`
    /// does): an inline call when it returns, a process plugin's when its
    /// child reports it done (DONE), failed (FAILED) or crashed in it.
    public let calls: Int
    /// Of those, the ones that failed: a timeout (over `timeoutMs`), or,
    /// for a process plugin, a crash while handling one of the room's
    /// events (each crash; the second is the poison skip).
    public let failures: Int
    /// The last failure, in words, and when it was counted (ms since epoch).
    public let lastError: String?
    public let lastErrorAt: Int64?
}

/// One plugin instance's calls per room and hook. Only rooms that had a
/// call have an entry, and a room's entry goes when the room's session ends
/// (LOGOUT, after the plugin's calls for it), so the memory follows the live
/// rooms the plugin serves: one flat table per hook, an entry per room (no
/// table per room). A batch of calls costs one lock and one lookup per run
/// of calls in one room (`Runs`); a failure is counted on its own.
/// Thread-safe.
final class PluginRoomTally: Sendable {
    struct Counts: Sendable {
        var calls = 0
        var failures = 0
        var lastError: String?
        var lastErrorAt: Int64 = 0
    }

    /// One batch's successful calls per room, gathered on the plugin's
    /// thread with no lock and no hashing per call: consecutive calls in
    /// one room make one run (one String comparison per call).
    struct Runs {
        fileprivate var runs: [(room: String, calls: Int)] = []

        mutating func add(_ room: String) {
            if let last = runs.indices.last, runs[last].room == room {
                runs[last].calls += 1
            } else {
                runs.append((room, 1))
            }
        }
    }

    /// The longest `lastError` kept (a crash reason can quote a signal and a label).
    static let maxErrorLength = 300

    /// Per hook (by `PluginHookKind.slot`), per room.
    private let rooms = LockedValue<[[String: Counts]]>(Array(repeating: [:], count: PluginHookKind.allCases.count))

    /// Counts one call for `room` to `hook`; a failure when `failure` gives
    /// a text (read only then). Any thread (the plugin's, usually).
    func count(_ room: String, _ hook: PluginHookKind, call: Bool = true, failure: @autoclosure () -> String? = nil) {
        let error = failure()
        let at = error == nil ? 0 : Int64(Date().timeIntervalSince1970 * 1000)
        rooms.withLock { rooms in
            rooms[hook.slot][room, default: Counts()].add(call: call, error: error, at: at)
        }
    }

    /// Counts a batch's successful calls to `hook`, under one lock. Any thread.
    func count(_ runs: Runs, _ hook: PluginHookKind) {
        guard !runs.runs.isEmpty else { return }
        rooms.withLock { rooms in
            for run in runs.runs { rooms[hook.slot][run.room, default: Counts()].calls += run.calls }
        }
    }

    /// Forgets `room` (its session ended).
    func forget(_ room: String) {
        rooms.withLock { rooms in
            for slot in rooms.indices { rooms[slot].removeValue(forKey: room) }
        }
    }

    /// `room`'s counts per hook (empty when it had no call).
    func counts(of room: String) -> [PluginHookKind: Counts] {
        rooms.withLock { rooms in
            var counts: [PluginHookKind: Counts] = [:]
            for hook in PluginHookKind.allCases { counts[hook] = rooms[hook.slot][room] }
            return counts
        }
    }

    /// How many rooms have an entry (tests: the memory bound).
    var roomCount: Int {
        rooms.withLock { rooms in rooms.reduce(into: Set<String>()) { $0.formUnion($1.keys) }.count }
    }
}

extension PluginRoomTally.Counts {
    mutating func add(call: Bool, error: String?, at: Int64) {
        if call { calls += 1 }
        guard let error else { return }
        failures += 1
        lastError = error.count > PluginRoomTally.maxErrorLength ? String(error.prefix(PluginRoomTally.maxErrorLength)) + "…" : error
        lastErrorAt = at
    }
}

extension PluginManager {
    /// Every plugin's calls in `room`, by plugin then hook (the current
    /// instance of each loaded or quarantined plugin). Any thread.
    public func roomCalls(_ room: String) -> [PluginRoomCalls] {
        var rows: [PluginRoomCalls] = []
        for runtime in runtimes.withLock({ $0 }) {
            for (hook, counts) in runtime.roomCalls.counts(of: room) {
                rows.append(PluginRoomCalls(plugin: runtime.spec.name, hook: hook.rawValue, calls: counts.calls,
                                            failures: counts.failures, lastError: counts.lastError,
                                            lastErrorAt: counts.lastError == nil ? nil : counts.lastErrorAt))
            }
        }
        return rows.sorted { ($0.plugin, $0.hook) < ($1.plugin, $1.hook) }
    }

    /// At a room's LOGOUT, forgets its calls in every plugin, after the
    /// calls already queued for it (the LOGOUT event's own included: the
    /// turn's batch is posted by a loop task queued before this one).
    /// Loop thread (from dispatch); costs nothing for other events.
    func forgetRoomCalls(after event: RoomEvent) {
        guard case .roomStateChanged(let room, .logout, _, _) = event else { return }
        _ = host.loop.execute { [weak self] in
            guard let self else { return }
            for runtime in runtimes.withLock({ $0 }) {
                let tally = runtime.roomCalls
                runtime.enqueue(.unwatched { tally.forget(room) }, watched: 0)
            }
        }
    }
}

extension PluginProcess {
    /// A crash (or a hang the supervisor killed) while the child handled one
    /// of a room's events: counted as one failed call of that room (the
    /// call never reached DONE; resent to the next child, it counts again
    /// when that one finishes it), the poison skip as such. Called with
    /// `lock` held, before the journal is trimmed.
    func countCrashInRoom(_ suspect: PluginSupervisorMachine.Suspect, _ result: PluginSupervisorMachine.ExitedResult) {
        guard case .event(let seq, _) = suspect, let runtime,
              let entry = journal[journalHead...].first(where: { $0.seq == seq }), let (room, hook) = entry.roomAndHook else { return }
        switch result {
        case .finished: return
        case .restart(_, let message, let skip, let note), .quarantine(_, let message, let skip, let note):
            let text = skip == seq ? "poison: \(note ?? message)" : "crash: \(message)"
            runtime.roomCalls.count(room, hook, failure: text)
        }
    }
}

extension PluginProcess.Entry {
    /// The room and hook of a room or player event record (nil for others),
    /// from the room noted when it was queued: no second decode of the record.
    var roomAndHook: (String, PluginHookKind)? {
        room.map { ($0, hook) }
    }
}
