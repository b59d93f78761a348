import CoreMetrics
import RoomKitLoop
import CRoomKitPluginABI
import Dispatch
import Foundation
import Logging
import RoomKitProtocol
import Synchronization

/// A plugin's lifecycle state, as `GET /v1/plugins` and the event log show it.
/// `crashed`, `restarted` and `skipped` (a poison event) are events of a
/// process-isolated plugin only; its status stays `loaded` through them.
public enum PluginStatus: String, Sendable, Hashable {
    case loaded, failed, quarantined, unloaded, crashed, restarted, skipped
}

/// What the host does for a plugin's function-table calls.
protocol PluginHostActions: AnyObject, Sendable {
    func pluginLog(_ plugin: String, level: Int32, _ message: String)
    func pluginDispatchMagix(_ plugin: String, room: String, event: String, payload: JSON, to: [String]?) -> Bool
    func pluginSetGlobalState(_ plugin: String, room: String, patch: [String: JSON]) -> Bool
    func pluginInsertImage(_ plugin: String, room: String, image: Image) -> Bool
    func pluginPutScenes(_ plugin: String, room: String, dir: String, scenes: [Scene], index: Int?) -> Bool
    func pluginRoomState(_ room: String) -> JSON?
}

/// One started plugin: its serial queue, its function table, its counters.
///
/// Isolation: every hook runs on `queue`, never on the loop. Each call has a
/// watchdog; a call that overruns `timeoutMs`, or returns NULL or invalid
/// UTF-8, is a failure, and `quarantineAfter` failures in a row quarantine
/// the plugin: it gets no more calls and the rooms go on without it.
final class PluginRuntime: @unchecked Sendable {
    // @unchecked Sendable: `descriptor` and `table` are immutable after init;
    // mutable state is in `state` (a LockedValue) or touched only on `queue`.

    struct Counters {
        var status: PluginStatus = .loaded
        var calls = 0
        var failures = 0
        var consecutiveFailures = 0
        var totalNanoseconds: UInt64 = 0
        var reason: String?
    }

    let spec: PluginSpec
    let descriptor: UnsafePointer<roomkit_plugin>
    let queue: DispatchQueue
    /// The plugin's log and action rate limits (PluginRateLimit.swift).
    let logBucket: TokenBucket
    let actionBucket: TokenBucket
    /// The process of a process plugin (nil: inline), held directly: no registry.
    let process: PluginProcess?
    /// Its room actions in flight (PluginActionGate.swift).
    let actionGate = PluginActionGate()
    let state = LockedValue(Counters())
    /// Posted calls not yet finished, oldest first (the watchdog's list).
    let outstanding = LockedValue(OutstandingCalls())
    /// Work posted and not yet run (PluginRuntime+Watchdog.swift).
    let pending = LockedValue(PendingWork())
    /// `state.status == .loaded`, mirrored on every status change so the
    /// loop can check it per event without taking the lock the plugin's
    /// thread takes per call.
    let loaded = Atomic<Bool>(true)
    /// `state.consecutiveFailures > 0`, mirrored under its lock: a batch of
    /// successful calls may count itself once at its end (`SuccessTally`)
    /// only while no failure is waiting to be reset by a success.
    let failing = Atomic<Bool>(false)
    /// `state.failures`, mirrored under its lock (see `recordSuccess`).
    let failureCount = Atomic<Int>(0)
    private let table: UnsafeMutablePointer<roomkit_host_api>
    weak var actions: (any PluginHostActions)?
    let onQuarantine: @Sendable (PluginRuntime, String) -> Void
    static let quarantineAfter = 3
    private let timerLock = NSLock()
    /// Guarded by `timerLock` (DispatchSourceTimer is not Sendable).
    nonisolated(unsafe) private var timerTable: [UInt64: any DispatchSourceTimer] = [:]
    private static let nextTimer = Atomic<UInt64>(0)

    /// Per-plugin calls, failures and call latency (swift-metrics).
    let metrics: PluginCallMetrics
    /// Its calls and failures per room and hook (PluginManager+RoomStats.swift).
    let roomCalls = PluginRoomTally()

    init(_ mapped: MappedPlugin, actions: any PluginHostActions, metricsFactory: any MetricsFactory = MetricsSystem.factory,
         onQuarantine: @escaping @Sendable (PluginRuntime, String) -> Void) {
        spec = mapped.spec
        metrics = PluginCallMetrics(plugin: mapped.spec.name, factory: metricsFactory)
        descriptor = mapped.descriptor
        queue = DispatchQueue(label: "roomkit.plugin.\(mapped.spec.name)")
        process = mapped.process
        logBucket = TokenBucket(rate: mapped.spec.rateLimits.logPerSecond, burst: mapped.spec.rateLimits.logBurst)
        actionBucket = TokenBucket(rate: mapped.spec.rateLimits.actionsPerSecond, burst: mapped.spec.rateLimits.actionBurst)
        self.actions = actions
        self.onQuarantine = onQuarantine
        table = .allocate(capacity: 1)
        table.initialize(to: Self.makeTable())
        table.pointee.context = Unmanaged.passUnretained(self).toOpaque()
        // The plugin may keep the table for as long as its library is mapped.
        PluginLoader.keepForProcessLifetime(UnsafeRawPointer(table))
    }

    var isActive: Bool { loaded.load(ordering: .acquiring) }

    /// Calls on_load with the manifest's config and waits for it (bounded by a
    /// generous multiple of the timeout: loading may read files).
    func start() -> String? {
        guard descriptor.pointee.on_load != nil else { return nil }
        let config = spec.config.jsonString
        // Not a hook call: it is neither counted nor able to quarantine.
        let result = callAndWait(timeout: max(spec.timeout * 20, .seconds(2)), counted: false) { [self] () -> Int32? in
            config.withCString { descriptor.pointee.on_load?(descriptor.pointee.`self`, UnsafePointer(table), $0) }
        }
        switch result {
        case .some(0): return nil
        case .some(let code?):
            // A process plugin says why in words (e.g. the signal it died of).
            if let why = process?.loadFailureReason { return why }
            return "on_load failed (returned \(code))"
        default: return "on_load did not return within its time limit"
        }
    }

    /// Stops calls; on_unload runs after the calls already queued. The library stays mapped.
    func stop() {
        let wasActive = state.withLock { counters -> Bool in
            defer { if counters.status == .loaded { counters.status = .unloaded } }
            return counters.status == .loaded
        }
        loaded.store(false, ordering: .releasing)
        let all = timerLock.withLock { () -> [any DispatchSourceTimer] in
            defer { timerTable.removeAll() }
            return Array(timerTable.values)
        }
        for timer in all { timer.cancel() }
        guard wasActive, descriptor.pointee.on_unload != nil else { return }
        queue.async { [self] in descriptor.pointee.on_unload?(descriptor.pointee.`self`) }
    }

    // MARK: Hooks (each reads the immutable descriptor on the plugin's queue)

    /// Whether the plugin has an on_room_event hook; the manager posts a
    /// loop turn's room events to it as one batch (`post(roomEvents:)`).
    var hasRoomEventHook: Bool { descriptor.pointee.on_room_event != nil }

    func playerEvent(kind: Int32, room: String, payload: String) {
        guard descriptor.pointee.on_player_event != nil else { return }
        post(hook: .playerEvent) { [self] in
            room.withCString { r in payload.withCString { descriptor.pointee.on_player_event?(descriptor.pointee.`self`, kind, r, $0) } }
        }
    }

    func throwError(domain: String, code: Int64, message: String) {
        guard descriptor.pointee.throw_error != nil else { return }
        post(hook: .throwError) { [self] in
            domain.withCString { d in message.withCString { descriptor.pointee.throw_error?(descriptor.pointee.`self`, d, code, $0) } }
        }
    }

    /// One step of the URL chain; nil when the step failed (timeout, NULL, invalid UTF-8).
    func interrupt(_ url: String) -> String? {
        guard descriptor.pointee.url_interrupter != nil else { return nil }
        let result = callAndWait { [self] () -> String? in
            guard let raw = url.withCString({ descriptor.pointee.url_interrupter?(descriptor.pointee.`self`, $0) }) else { return nil }
            // Through the host's own free_string, the counterpart of the
            // alloc_string the plugin had to use (roomkit_plugin.h, "Strings").
            defer { freeHostString(raw) }
            return String(validatingCString: raw)
        }
        return result ?? nil
    }

    // MARK: Calls

    /// Runs `body` on the plugin's queue and waits at most `timeout` for it.
    /// nil: the call failed (overran or returned nil); the failure is counted.
    func callAndWait<T: Sendable>(timeout: Duration? = nil, counted: Bool = true,
                                  _ body: @escaping @Sendable () -> T?) -> T?? {
        guard isActive else { return nil }
        let result = LockedValue<T??>(nil)
        let done = DispatchSemaphore(value: 0)
        let started = DispatchTime.now()
        enqueue(.unwatched {
            let value = body()
            result.withLock { $0 = .some(value) }
            done.signal()
        }, watched: 0)
        let limit = timeout ?? spec.timeout
        if done.wait(timeout: .now() + .nanoseconds(Int(limit.components.seconds * 1_000_000_000 + limit.components.attoseconds / 1_000_000_000))) == .timedOut {
            if counted { record(failure: "a call took longer than \(limit)", started: started, hook: nil) }
            return nil
        }
        let value = result.withLock { $0 }
        guard counted else { return value }
        if case .some(.some) = value {
            record(failure: nil, started: started, hook: .urlInterrupter)
        } else {
            record(failure: "a call returned no result", started: started, hook: .urlInterrupter)
        }
        return value
    }

    /// Fire-and-forget call with a watchdog (room events, errors, timers).
    /// A call fails when it runs longer than `timeoutMs` once it is first in
    /// the plugin's queue; one watchdog per runtime checks the oldest call
    /// (PluginRuntime+Watchdog.swift), rather than a dispatch timer per call.
    func post(hook: PluginHookKind, _ body: @escaping @Sendable () -> Void) {
        post(hook: hook, batch: [body])
    }

    func record(failure: String?, started: DispatchTime, hook: PluginHookKind?) {
        record(failure: failure, nanoseconds: DispatchTime.now().uptimeNanoseconds &- started.uptimeNanoseconds, hook: hook)
    }

    /// Counts one call that took `elapsed` ns (a failure when `failure` is
    /// set), timed under `hook` (nil: the watchdog's failure, not timed).
    func record(failure: String?, nanoseconds elapsed: UInt64, hook: PluginHookKind?) {
        metrics.record(nanoseconds: elapsed, failed: failure != nil, hook: hook)
        let quarantined = state.withLock { counters -> String? in
            counters.calls += 1
            counters.totalNanoseconds &+= elapsed
            guard let failure else {
                counters.consecutiveFailures = 0
                failing.store(false, ordering: .relaxed)
                return nil
            }
            counters.failures += 1
            counters.consecutiveFailures += 1
            failing.store(true, ordering: .relaxed)
            failureCount.store(counters.failures, ordering: .releasing)
            guard counters.status == .loaded, counters.consecutiveFailures >= Self.quarantineAfter else { return nil }
            counters.status = .quarantined
            loaded.store(false, ordering: .releasing)
            let reason = "\(counters.consecutiveFailures) failures in a row; last: \(failure)"
            counters.reason = reason
            return reason
        }
        if let failure { noteFailure(failure) }
        if let quarantined { onQuarantine(self, quarantined) }
    }

    /// Successful calls of one batch, counted once at its end (one lock and
    /// one counter update per batch instead of per call). Plugin queue only.
    struct SuccessTally {
        var calls = 0
        var nanoseconds: UInt64 = 0
        /// `failures` when the last of these calls succeeded.
        var failuresAtLastSuccess = 0
    }

    /// Counts one successful call of a batch: its latency now (the timer
    /// keeps every call's), the rest in `tally`; at once when a failure is
    /// waiting to be reset, so a run of failures is never counted across a
    /// success (quarantine sees what per-call counting would show).
    func recordSuccess(nanoseconds elapsed: UInt64, into tally: inout SuccessTally) {
        metrics.recordLatency(nanoseconds: elapsed, hook: .roomEvent)
        tally.calls += 1
        tally.nanoseconds &+= elapsed
        tally.failuresAtLastSuccess = failureCount.load(ordering: .acquiring)
        if failing.load(ordering: .relaxed) { flush(&tally) }
    }

    /// Adds `tally`'s calls to the counters as `record(failure: nil, …)` for
    /// each would have (the failures since the last of them stay consecutive),
    /// and empties it.
    func flush(_ tally: inout SuccessTally) {
        guard tally.calls > 0 else { return }
        metrics.countCalls(tally.calls)
        state.withLock { counters in
            counters.calls += tally.calls
            counters.totalNanoseconds &+= tally.nanoseconds
            counters.consecutiveFailures = max(0, counters.failures - tally.failuresAtLastSuccess)
            failing.store(counters.consecutiveFailures > 0, ordering: .relaxed)
        }
        tally = SuccessTally()
    }

    // MARK: Timers (on the plugin's queue)

    /// The longest timer delay or period a plugin gets: 10^12 ms (about 31
    /// years). A plugin's numbers are outside input (issue #27 §1): a larger
    /// one (`UINT64_MAX`) is clamped here, where `Int(delay)` and the
    /// dispatch time in nanoseconds would otherwise trap the bot.
    static let maxTimerMilliseconds: UInt64 = 1_000_000_000_000

    func setTimer(delay: UInt64, repeatEvery: UInt64, fire: roomkit_timer_fn, user: UnsafeMutableRawPointer?) -> UInt64 {
        let id = Self.nextTimer.add(1, ordering: .relaxed).newValue
        let timer = DispatchSource.makeTimerSource(queue: queue)
        let userAddress = UInt(bitPattern: user)
        let delayMs = Int(min(delay, Self.maxTimerMilliseconds)), periodMs = Int(min(repeatEvery, Self.maxTimerMilliseconds))
        timer.schedule(deadline: .now() + .milliseconds(delayMs),
                       repeating: repeatEvery > 0 ? .milliseconds(periodMs) : .never)
        timer.setEventHandler { [weak self] in
            guard let self, isActive else { return }
            fire(UnsafeMutableRawPointer(bitPattern: userAddress), id)
            if repeatEvery == 0 { _ = timerLock.withLock { timerTable.removeValue(forKey: id) } }
        }
        timerLock.withLock { timerTable[id] = timer }
        timer.resume()
        return id
    }

    func cancelTimer(_ id: UInt64) {
        timerLock.withLock { timerTable.removeValue(forKey: id) }?.cancel()
    }

    // MARK: The host function table

    /// Frees a string a hook returned (allocated with the table's alloc_string).
    func freeHostString(_ string: UnsafeMutablePointer<CChar>) {
        table.pointee.free_string?(table.pointee.context, string)
    }

    /// Whether one more log line fits the plugin's log rate; reports the
    /// lines suppressed before it, at most once a second.
    func mayLog() -> Bool {
        switch logBucket.take() {
        case .allowed(let refused):
            if refused > 0 {
                metrics.countSuppressedLogLines(refused)
                actions?.pluginLog(spec.name, level: 2, "plugin log lines suppressed (logPerSecond \(spec.rateLimits.logPerSecond)): \(refused)")
            }
            return true
        case .refused(let report):
            if report > 0 {
                metrics.countSuppressedLogLines(report)
                actions?.pluginLog(spec.name, level: 2, "plugin log lines suppressed (logPerSecond \(spec.rateLimits.logPerSecond)): \(report)")
            }
            return false
        }
    }

    /// Whether one more room action fits the plugin's action budget; past it
    /// the action returns ROOMKIT_ACTION_BUDGET, and the refusals are logged at most once a second.
    func mayAct() -> Bool {
        switch actionBucket.take() {
        case .allowed: return true
        case .refused(let report):
            if report > 0 {
                actions?.pluginLog(spec.name, level: 2, "plugin action budget exhausted (actionsPerSecond \(spec.rateLimits.actionsPerSecond), "
                                   + "actionBurst \(spec.rateLimits.actionBurst)): \(report) actions refused")
            }
            return false
        }
    }

    /// The function table handed to on_load (for hooks that take it again).
    var hostTable: UnsafePointer<roomkit_host_api> { UnsafePointer(table) }

    private static func makeTable() -> roomkit_host_api {
        makeHostTable()
    }
}

// The C trampolines of the host table: file-scope so they capture nothing.

private func runtime(_ context: UnsafeMutableRawPointer?) -> PluginRuntime? {
    context.map { Unmanaged<PluginRuntime>.fromOpaque($0).takeUnretainedValue() }
}

private func string(_ pointer: UnsafePointer<CChar>?) -> String? {
    pointer.flatMap { String(validatingCString: $0) }
}

private func json(_ pointer: UnsafePointer<CChar>?) -> JSON? {
    string(pointer).flatMap { try? JSON.parse($0) }
}

private func makeHostTable() -> roomkit_host_api {
    var api = roomkit_host_api()
    api.struct_size = UInt32(MemoryLayout<roomkit_host_api>.size)
    api.abi_major = UInt16(ROOMKIT_PLUGIN_ABI_MAJOR)
    api.abi_minor = UInt16(ROOMKIT_PLUGIN_ABI_MINOR)
    api.log = { context, level, message in
        guard let runtime = runtime(context), runtime.mayLog(), let message = string(message) else { return }
        runtime.actions?.pluginLog(runtime.spec.name, level: level, message)
    }
    api.dispatch_magix = { context, room, event, payload, to in
        guard let runtime = runtime(context) else { return -1 }
        guard runtime.mayAct() else { return actionBudgetExhausted }
        guard let room = string(room), let event = string(event),
              let payload = json(payload) else { return -1 }
        let recipients = to.flatMap { json($0)?.arrayValue?.compactMap(\.stringValue) }
        return runtime.actions?.pluginDispatchMagix(runtime.spec.name, room: room, event: event, payload: payload, to: recipients) == true ? 0 : -1
    }
    api.set_global_state = { context, room, patch in
        guard let runtime = runtime(context) else { return -1 }
        guard runtime.mayAct() else { return actionBudgetExhausted }
        guard let room = string(room), let patch = json(patch)?.objectValue else { return -1 }
        return runtime.actions?.pluginSetGlobalState(runtime.spec.name, room: room, patch: patch) == true ? 0 : -1
    }
    api.insert_image = { context, room, image in
        guard let runtime = runtime(context) else { return -1 }
        guard runtime.mayAct() else { return actionBudgetExhausted }
        guard let room = string(room), let json = json(image),
              let image = try? Image(json: json) else { return -1 }
        return runtime.actions?.pluginInsertImage(runtime.spec.name, room: room, image: image) == true ? 0 : -1
    }
    api.put_scenes = { context, room, dir, scenes, index in
        guard let runtime = runtime(context) else { return -1 }
        guard runtime.mayAct() else { return actionBudgetExhausted }
        guard let room = string(room), let dir = string(dir),
              let list = json(scenes)?.arrayValue else { return -1 }
        let parsed = list.compactMap { try? Scene(json: $0) }
        guard parsed.count == list.count else { return -1 }
        return runtime.actions?.pluginPutScenes(runtime.spec.name, room: room, dir: dir, scenes: parsed,
                                                index: index >= 0 ? Int(index) : nil) == true ? 0 : -1
    }
    api.room_state_json = { context, room in
        guard let runtime = runtime(context), let room = string(room),
              let state = runtime.actions?.pluginRoomState(room) else { return nil }
        return strdup(state.jsonString)
    }
    api.set_timer = { context, delay, repeatEvery, fire, user in
        guard let runtime = runtime(context), let fire else { return 0 }
        return runtime.setTimer(delay: delay, repeatEvery: repeatEvery, fire: fire, user: user)
    }
    api.cancel_timer = { context, id in
        runtime(context)?.cancelTimer(id)
    }
    api.alloc_string = { _, text in text.map { strdup($0) } ?? nil }
    api.free_string = { _, text in free(text) }
    addPlatformFunctions(to: &api)
    return api
}
