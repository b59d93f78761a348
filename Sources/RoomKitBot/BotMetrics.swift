import CoreMetrics
import Foundation
import Prometheus
import RoomKit
import RoomKitLoop
import RoomKitMetrics
import RoomKitPluginHost
import Synchronization

/// `/metrics` in Prometheus exposition, every family with a `# HELP` line
/// (`DocumentedMetricsFactory`). Each bot has its own registry (no
/// process-wide bootstrap), so several bots in one process, as in tests, do
/// not mix their numbers. The same factory goes to the engine (`roomkit_*`
/// of `RoomHost`) and to the plugin manager (`roomkit_plugin_*`), so their
/// histograms reach this `/metrics` too.
///
/// Rates are left to Prometheus (`rate(roombot_events_total[1m])`): a scrape
/// only reads, so any number of scrapers see the same monotonic counters.
final class BotMetrics: @unchecked Sendable {
    // @unchecked Sendable: Prometheus metrics are thread-safe; the totals
    // are guarded by their locks; `lagTimer` is a `LoopBound` (checked).
    let factory: DocumentedMetricsFactory
    /// `factory`, with `roomkit_event_dispatch_seconds` (push received →
    /// last plugin done) also feeding `activity`: the plugin manager's factory.
    let pluginFactory: any MetricsFactory
    /// The Activity charts' history (`GET /v1/bot/activity`).
    let activity: BotActivity
    var registry: PrometheusCollectorRegistry { factory.registry }
    private let process: ProcessMetrics
    private let events: CoreMetrics.Counter
    private let loopLag: CoreMetrics.Gauge
    private let pluginTotals = LockedValue<[String: (calls: Int, failures: Int)]>([:])
    /// Last exported crash/restart/drop/skip totals of process-isolated plugins.
    private let processTotals = LockedValue<[String: [Int]]>([:])
    /// The lag probe's timer, on the loop thread only (set by `startLagProbe`).
    private let lagTimer = LockedValue<LoopBound<LoopTimer?>?>(nil)

    init(version: String, revision: String) {
        factory = DocumentedMetricsFactory(help: Self.help)
        activity = BotActivity(bounds: factory.durationBuckets)
        pluginFactory = DispatchTapFactory(base: factory, tapped: "roomkit_event_dispatch_seconds", tap: activity.dispatch)
        process = ProcessMetrics(factory: factory)
        events = CoreMetrics.Counter(label: "roombot_events_total", dimensions: [], factory: factory)
        loopLag = CoreMetrics.Gauge(label: "roombot_event_loop_lag_seconds", dimensions: [], factory: factory)
        CoreMetrics.Gauge(label: "roombot_build_info", dimensions: [("version", version), ("revision", revision)], factory: factory)
            .record(1)
    }

    func count(_ event: RoomEvent) {
        events.increment()
        activity.countEvent()
    }

    /// A plugin's status changed (the manager's `onStatus`): quarantines are counted.
    func pluginStatus(_ plugin: String, _ status: PluginStatus) {
        guard status == .quarantined else { return }
        CoreMetrics.Counter(label: "roombot_plugin_quarantines_total", dimensions: [("plugin", plugin)], factory: factory).increment()
    }

    /// Measures how late a 100 ms loop timer fires: the event loop's lag;
    /// and starts the Activity sampler.
    func startLagProbe(loop: EventLoop) throws {
        let period = 0.1
        try loop.runAndWait { [self] in
            var expected = Date().addingTimeInterval(period)
            let timer = try loop.scheduleTimer(after: .milliseconds(100), repeating: .milliseconds(100)) { [loopLag] _ in
                let now = Date()
                loopLag.record(max(0, now.timeIntervalSince(expected)))
                expected = now.addingTimeInterval(period)
            }
            lagTimer.withLock { $0 = LoopBound(timer, loop: loop) }
            try activity.start(loop: loop)
        }
    }

    func stopLagProbe(loop: EventLoop) {
        try? loop.runAndWait { [self] in
            if let bound = lagTimer.withLock({ $0 }) {
                bound.value?.cancel()
                bound.value = nil
            }
            activity.stop()
        }
    }

    /// Brings the point-in-time figures up to date, then renders the registry.
    /// Counters only ever move forward: plugin totals advance by what the
    /// plugin host counted since the previous scrape.
    func exposition(host: RoomHost, plugins: PluginManager) -> String {
        var byReason: [RoomReason: Int] = [:]
        for room in host.allRooms { byReason[room.reason, default: 0] += 1 }
        for reason in RoomReason.allCases {
            CoreMetrics.Gauge(label: "roombot_sessions", dimensions: [("reason", reason.rawValue)], factory: factory)
                .record(byReason[reason] ?? 0)
        }
        let depths = plugins.queueDepths
        for report in plugins.reports {
            let labels = [("plugin", report.name)]
            let previous = pluginTotals.withLock { totals -> (calls: Int, failures: Int) in
                defer { totals[report.name] = (report.calls, report.failures) }
                return totals[report.name] ?? (0, 0)
            }
            CoreMetrics.Counter(label: "roombot_plugin_calls_total", dimensions: labels, factory: factory)
                .increment(by: max(0, report.calls - previous.calls))
            CoreMetrics.Counter(label: "roombot_plugin_failures_total", dimensions: labels, factory: factory)
                .increment(by: max(0, report.failures - previous.failures))
            CoreMetrics.Counter(label: "roombot_plugin_quarantines_total", dimensions: labels, factory: factory).increment(by: 0)
            CoreMetrics.Gauge(label: "roombot_plugin_quarantined", dimensions: labels, factory: factory)
                .record(report.status == .quarantined ? 1 : 0)
            CoreMetrics.Gauge(label: "roombot_plugin_queue_depth", dimensions: labels, factory: factory)
                .record(report.process?.pending ?? depths[report.name] ?? 0)
            if let process = report.process { exportProcess(process, plugin: report.name) }
        }
        process.update()
        return registry.emitToString()
    }

    /// The supervisor's counters of one process-isolated plugin, as counters.
    private func exportProcess(_ process: PluginProcessReport, plugin: String) {
        let now = [process.crashes, process.restarts, process.dropped, process.skipped]
        let previous = processTotals.withLock { totals -> [Int] in
            defer { totals[plugin] = now }
            return totals[plugin] ?? [0, 0, 0, 0]
        }
        let families = ["roombot_plugin_crashes_total", "roombot_plugin_restarts_total",
                        "roombot_plugin_dropped_events_total", "roombot_plugin_skipped_events_total"]
        for (index, name) in families.enumerated() {
            CoreMetrics.Counter(label: name, dimensions: [("plugin", plugin)], factory: factory)
                .increment(by: max(0, now[index] - previous[index]))
        }
    }
}
