import CoreMetrics
import Synchronization

/// The hook a plugin call went to: the `hook` dimension of
/// `roomkit_plugin_call_seconds`.
enum PluginHookKind: String, Sendable, CaseIterable {
    case roomEvent = "on_room_event"
    case playerEvent = "on_player_event"
    case throwError = "throw_error"
    case urlInterrupter = "url_interrupter"
    case configChanged = "on_config_changed"

    /// The case's place in `allCases`, for tables indexed by hook: a
    /// hook-keyed dictionary hashes the raw value's String on every call.
    var slot: Int {
        switch self {
        case .roomEvent: return 0
        case .playerEvent: return 1
        case .throwError: return 2
        case .urlInterrupter: return 3
        case .configChanged: return 4
        }
    }
}

/// One plugin's instruments (swift-metrics), dimension `plugin`:
/// `roomkit_plugin_calls_total`, `roomkit_plugin_failures_total` (failed or
/// over `timeoutMs`), `roomkit_plugin_call_seconds{hook}` (a timer, so the
/// backend keeps a latency histogram per hook; a call the watchdog already
/// failed is counted in failures only), and `roomkit_plugin_dispatch_seconds`
/// (from the loop turn that raised a room event to the end of the plugin's
/// call for it: queueing included), and
/// `roomkit_plugin_log_lines_suppressed_total` (lines over `logPerSecond`).
/// Thread-safe, like the instruments.
final class PluginCallMetrics: Sendable {
    private let calls: Counter
    private let failures: Counter
    /// By `PluginHookKind.slot`.
    private let latency: [Timer]
    private let dispatch: Timer
    private let suppressedLogLines: Counter

    init(plugin: String, factory: any MetricsFactory) {
        let dimensions = [("plugin", plugin)]
        calls = Counter(label: "roomkit_plugin_calls_total", dimensions: dimensions, factory: factory)
        failures = Counter(label: "roomkit_plugin_failures_total", dimensions: dimensions, factory: factory)
        latency = PluginHookKind.allCases.sorted { $0.slot < $1.slot }.map { hook in
            Timer(label: "roomkit_plugin_call_seconds", dimensions: dimensions + [("hook", hook.rawValue)], factory: factory)
        }
        dispatch = Timer(label: "roomkit_plugin_dispatch_seconds", dimensions: dimensions, factory: factory)
        suppressedLogLines = Counter(label: "roomkit_plugin_log_lines_suppressed_total", dimensions: dimensions, factory: factory)
    }

    /// `count` log lines the plugin's log rate limit dropped (counted when
    /// the "plugin log lines suppressed" line reports them).
    func countSuppressedLogLines(_ count: Int) {
        suppressedLogLines.increment(by: Int64(count))
    }

    /// One call: counted, and timed under `hook` (nil: a watchdog failure, not timed).
    func record(nanoseconds: UInt64, failed: Bool, hook: PluginHookKind?) {
        calls.increment()
        if failed { failures.increment() }
        if let hook { latency[hook.slot].recordNanoseconds(Int64(truncatingIfNeeded: nanoseconds)) }
    }

    /// One successful call's latency (its count comes with `countCalls`).
    func recordLatency(nanoseconds: UInt64, hook: PluginHookKind) {
        latency[hook.slot].recordNanoseconds(Int64(truncatingIfNeeded: nanoseconds))
    }

    /// `count` successful calls of the same latency (a process plugin's DONE
    /// covers a batch): one lookup of the hook's timer for all of them.
    func recordLatency(nanoseconds: UInt64, hook: PluginHookKind, count: Int) {
        let timer = latency[hook.slot]
        for _ in 0..<count { timer.recordNanoseconds(Int64(truncatingIfNeeded: nanoseconds)) }
    }

    /// A room event's time from its loop turn to the end of this plugin's call.
    func recordDispatch(nanoseconds: UInt64) {
        dispatch.recordNanoseconds(Int64(truncatingIfNeeded: nanoseconds))
    }

    /// `count` successful calls (their latencies recorded one by one).
    func countCalls(_ count: Int) {
        calls.increment(by: Int64(count))
    }
}
