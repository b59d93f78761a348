import CoreMetrics
import Foundation
import Prometheus
import RoomKit
import RoomKitLoop
import RoomKitPlugins
import Synchronization

/// `/metrics` through swift-metrics with Prometheus exposition. Each bot has
/// its own registry (no process-wide bootstrap), so several bots in one
/// process, as in tests, do not mix their numbers.
final class BotMetrics: @unchecked Sendable {
    // @unchecked Sendable: swift-metrics handlers are thread-safe; `rate`,
    // `pluginTotals` and `lagTimer` are guarded by their lock or touched on the loop.
    let registry = PrometheusCollectorRegistry()
    private let factory: PrometheusMetricsFactory
    private let events: CoreMetrics.Counter
    private let eventsPerSecond: CoreMetrics.Gauge
    private let loopLag: CoreMetrics.Gauge
    private let rate = LockedValue<(since: Date, count: Int)>((Date(), 0))
    private let pluginTotals = LockedValue<[String: (calls: Int, failures: Int)]>([:])
    /// Last exported crash/restart/drop/skip totals of process-isolated plugins.
    private let processTotals = LockedValue<[String: [Int]]>([:])
    private var lagTimer: LoopTimer?

    init() {
        factory = PrometheusMetricsFactory(registry: registry)
        events = CoreMetrics.Counter(label: "roombot_events_total", dimensions: [], factory: factory)
        eventsPerSecond = CoreMetrics.Gauge(label: "roombot_events_per_second", dimensions: [], factory: factory)
        loopLag = CoreMetrics.Gauge(label: "roombot_event_loop_lag_seconds", dimensions: [], factory: factory)
    }

    func count(_ event: RoomEvent) {
        events.increment()
        rate.withLock { $0.count += 1 }
    }

    /// Measures how late a 100 ms loop timer fires: the event loop's lag.
    func startLagProbe(loop: EventLoop) throws {
        let period = 0.1
        try loop.runAndWait { [self] in
            var expected = Date().addingTimeInterval(period)
            lagTimer = try loop.scheduleTimer(after: .milliseconds(100), repeating: .milliseconds(100)) { [loopLag] _ in
                let now = Date()
                loopLag.record(max(0, now.timeIntervalSince(expected)))
                expected = now.addingTimeInterval(period)
            }
        }
    }

    func stopLagProbe(loop: EventLoop) {
        try? loop.runAndWait { [self] in lagTimer?.cancel(); lagTimer = nil }
    }

    /// Updates the point-in-time figures, then renders the registry.
    func exposition(host: RoomHost, plugins: PluginManager) -> String {
        var byReason: [RoomReason: Int] = [:]
        for room in host.allRooms { byReason[room.reason, default: 0] += 1 }
        for reason in RoomReason.allCases {
            CoreMetrics.Gauge(label: "roombot_sessions", dimensions: [("reason", reason.rawValue)], factory: factory)
                .record(byReason[reason] ?? 0)
        }
        let perSecond = rate.withLock { window -> Double in
            let elapsed = Date().timeIntervalSince(window.since)
            let value = elapsed > 0 ? Double(window.count) / elapsed : 0
            if elapsed >= 1 { window = (Date(), 0) }
            return value
        }
        eventsPerSecond.record(perSecond)
        for report in plugins.reports {
            let dimensions = [("plugin", report.name)]
            let previous = pluginTotals.withLock { totals -> (calls: Int, failures: Int) in
                defer { totals[report.name] = (report.calls, report.failures) }
                return totals[report.name] ?? (0, 0)
            }
            CoreMetrics.Counter(label: "roombot_plugin_calls_total", dimensions: dimensions, factory: factory)
                .increment(by: max(0, report.calls - previous.calls))
            CoreMetrics.Counter(label: "roombot_plugin_failures_total", dimensions: dimensions, factory: factory)
                .increment(by: max(0, report.failures - previous.failures))
            CoreMetrics.Gauge(label: "roombot_plugin_latency_seconds", dimensions: dimensions, factory: factory)
                .record(report.meanMicroseconds / 1_000_000)
            if let process = report.process { exportProcess(process, plugin: report.name) }
        }
        return registry.emitToString()
    }

    /// The supervisor's counters of one process-isolated plugin, as counters.
    private func exportProcess(_ process: PluginProcessReport, plugin: String) {
        let now = [process.crashes, process.restarts, process.dropped, process.skipped]
        let previous = processTotals.withLock { totals -> [Int] in
            defer { totals[plugin] = now }
            return totals[plugin] ?? [0, 0, 0, 0]
        }
        let labels = ["roombot_plugin_crashes_total", "roombot_plugin_restarts_total",
                      "roombot_plugin_dropped_events_total", "roombot_plugin_skipped_events_total"]
        for (index, label) in labels.enumerated() {
            CoreMetrics.Counter(label: label, dimensions: [("plugin", plugin)], factory: factory)
                .increment(by: max(0, now[index] - previous[index]))
        }
    }
}
