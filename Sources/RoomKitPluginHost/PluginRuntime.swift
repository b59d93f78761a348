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

/// One started plugin: its endpoint (PluginEndpoint.swift), its one serial
/// queue, its one watchdog, its counters.
///
/// Isolation: every call runs on `queue`, never on the loop. An inline
/// plugin's hook runs there; a process plugin's events are encoded and
/// written there (the child runs them). The watchdog
/// (PluginRuntime+Watchdog.swift) times the plugin itself: an inline call
/// that overruns `timeoutMs` is a failure; a child that shows no progress
/// for `timeoutMs × hangFactor` is killed (its supervisor restarts it). A
/// call that fails (an overrun, NULL or invalid UTF-8, a handler that raised
/// in a child) counts; `quarantineAfter` failures in a row quarantine the
/// plugin: it gets no more calls and the rooms go on without it.
final class PluginRuntime: @unchecked Sendable {
    // @unchecked Sendable: `endpoint` and `spec` are immutable after init;
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
    let endpoint: PluginEndpoint
    /// The plugin's one queue (its endpoint's: a process writes its frames here).
    let queue: DispatchQueue
    /// The plugin's log and action rate limits (PluginRateLimit.swift).
    let logBucket: TokenBucket
    let actionBucket: TokenBucket
    /// Its room actions in flight (PluginActionGate.swift).
    let actionGate = PluginActionGate()
    let state = LockedValue(Counters())
    /// Posted inline calls not yet finished, oldest first (the watchdog's list).
    let outstanding = LockedValue(OutstandingCalls())
    /// Bumped to start or stop the watchdog's periodic check of a child.
    let watchdogGeneration = Atomic<UInt64>(0)
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
        endpoint = mapped.endpoint
        switch mapped.endpoint {
        case .inline: queue = DispatchQueue(label: "roomkit.plugin.\(mapped.spec.name)")
        case .process(let process): queue = process.queue
        }
        logBucket = TokenBucket(rate: mapped.spec.rateLimits.logPerSecond, burst: mapped.spec.rateLimits.logBurst)
        actionBucket = TokenBucket(rate: mapped.spec.rateLimits.actionsPerSecond, burst: mapped.spec.rateLimits.actionBurst)
        self.actions = actions
        self.onQuarantine = onQuarantine
        switch mapped.endpoint {
        case .inline(let inline): inline.table.pointee.context = Unmanaged.passUnretained(self).toOpaque()
        case .process(let process): process.attach(self)
        }
    }

    var isActive: Bool { loaded.load(ordering: .acquiring) }

    /// The process of a process plugin (nil: inline).
    var process: PluginProcess? { endpoint.process }

    /// Calls on_load (or sends LOAD) with the manifest's config and waits for
    /// it (bounded by a generous multiple of the timeout: loading may read files).
    func start() -> String? {
        let config = spec.config.jsonString
        let bound = max(spec.timeout * 20, .seconds(2))
        switch endpoint {
        case .inline(let inline):
            guard inline.hasOnLoad else { return nil }
            // Not a hook call: it is neither counted nor able to quarantine.
            switch callAndWait(timeout: bound, counted: false, { inline.load(config: config) }) {
            case .some(0): return nil
            case .some(let code?): return "on_load failed (returned \(code))"
            default: return "on_load did not return within its time limit"
            }
        case .process(let process):
            // The process bounds its own wait; it says why in words (e.g. the signal it died of).
            switch callAndWait(timeout: bound + .seconds(1), counted: false, { process.load(config: config) }) {
            case .some(.none): return nil
            case .some(.some(let why)): return why
            default: return "on_load did not return within its time limit"
            }
        }
    }

    /// Stops calls; on_unload (or UNLOAD) runs after the calls already queued.
    /// An inline library stays mapped.
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
        guard wasActive else { return }
        switch endpoint {
        case .inline(let inline): queue.async { inline.unload() }
        case .process(let process): queue.async { process.shutdown() }
        }
    }

    // MARK: Hooks

    /// Whether the plugin takes room events; the manager posts a loop turn's
    /// room events to it as one batch (`post(roomEvents:)`).
    var hasRoomEventHook: Bool { endpoint.hasRoomEventHook(spec) }

    /// The host's error, or a failed action of the plugin's own (a process
    /// plugin gets the latter whether or not it declares the hook).
    func throwError(domain: String, code: Int64, message: String) {
        switch endpoint {
        case .inline(let inline):
            guard inline.hasThrowError else { return }
            post(hook: .throwError) { inline.throwError(domain: domain, code: code, message: message) }
        case .process(let process):
            post(hook: .throwError) { process.send(.throwError(domain: domain, code: code, message: message)) }
        }
    }

    /// One step of the URL chain: `finish` gets the new URL, or nil when the
    /// step failed (timeout, NULL, invalid UTF-8, a process restarting).
    /// An inline step runs on the plugin's queue, waited for off the
    /// caller's thread (the call may block until its timeout). A process
    /// plugin's step is a round trip bounded by `timeoutMs` that no thread
    /// waits for: the child's ANSWER finishes it on the reader thread.
    func interrupt(_ url: String, then finish: @escaping @Sendable (String?) -> Void) {
        switch endpoint {
        case .inline(let inline):
            guard inline.hasURLInterrupter else { return finish(nil) }
            DispatchQueue.global().async { [self] in finish(callAndWait { inline.interrupt(url) } ?? nil) }
        case .process(let process):
            guard isActive, spec.hooks.contains(.urlInterrupter) else { return finish(nil) }
            let started = DispatchTime.now()
            @Sendable func send() {
                process.interrupt(url) { [self] outcome in
                    switch outcome {
                    case .success(let rewritten):
                        record(failure: nil, started: started, hook: .urlInterrupter)
                        finish(rewritten)
                    case .failure(let failure):
                        record(failure: failure.reason, started: started, hook: .urlInterrupter)
                        finish(nil)
                    }
                }
            }
            // A config change on its way: the request goes from the queue,
            // after the change's DONE, so it finds the new config (queued
            // work always runs, so `finish` still runs once).
            if process.configChangesPending.load(ordering: .acquiring) > 0 {
                enqueue(.unwatched(send), watched: 0)
            } else {
                send()
            }
        }
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
        guard isActive else { return }
        enqueue(.call(hook, body), watched: watchesCalls ? 1 : 0)
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
    func recordSuccess(nanoseconds elapsed: UInt64, hook: PluginHookKind = .roomEvent, into tally: inout SuccessTally) {
        metrics.recordLatency(nanoseconds: elapsed, hook: hook)
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

    /// Counts calls a child finished (DONE), all successes, each hook's
    /// latency as its mean over the batch (DONE comes once per batch), and
    /// each room event's time from its loop turn to its DONE.
    func countFinished(_ tally: SuccessTally, hooks: [PluginHookKind: (calls: Int, nanoseconds: UInt64)], dispatch: [UInt64]) {
        for nanoseconds in dispatch { metrics.recordDispatch(nanoseconds: nanoseconds) }
        for (hook, sum) in hooks where sum.calls > 0 {
            let mean = sum.nanoseconds / UInt64(sum.calls)
            metrics.recordLatency(nanoseconds: mean, hook: hook, count: sum.calls)
        }
        metrics.countCalls(tally.calls)
        state.withLock { counters in
            counters.calls += tally.calls
            counters.totalNanoseconds &+= tally.nanoseconds
            counters.consecutiveFailures = 0
            failing.store(false, ordering: .relaxed)
        }
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

    // MARK: Rate limits of the host actions

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
}
