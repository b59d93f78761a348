import CoreMetrics

/// One plugin's instruments (swift-metrics), dimension `plugin`:
/// `roomkit_plugin_calls_total`, `roomkit_plugin_failures_total` (failed or
/// over `timeoutMs`) and `roomkit_plugin_call_seconds` (a timer, so the
/// backend keeps a latency histogram). Thread-safe, like the instruments.
final class PluginCallMetrics: Sendable {
    private let calls: Counter
    private let failures: Counter
    private let latency: Timer

    init(plugin: String, factory: any MetricsFactory) {
        let dimensions = [("plugin", plugin)]
        calls = Counter(label: "roomkit_plugin_calls_total", dimensions: dimensions, factory: factory)
        failures = Counter(label: "roomkit_plugin_failures_total", dimensions: dimensions, factory: factory)
        latency = Timer(label: "roomkit_plugin_call_seconds", dimensions: dimensions, factory: factory)
    }

    func record(nanoseconds: UInt64, failed: Bool) {
        calls.increment()
        if failed { failures.increment() }
        latency.recordNanoseconds(Int64(truncatingIfNeeded: nanoseconds))
    }

    /// One successful call's latency (its count comes with `countCalls`).
    func recordLatency(nanoseconds: UInt64) {
        latency.recordNanoseconds(Int64(truncatingIfNeeded: nanoseconds))
    }

    /// `count` successful calls (their latencies recorded one by one).
    func countCalls(_ count: Int) {
        calls.increment(by: Int64(count))
    }
}
