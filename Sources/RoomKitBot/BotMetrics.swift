import Foundation
import Prometheus
import RoomKit
import RoomKitLoop
import RoomKitPlugins
import Synchronization

/// `/metrics` in Prometheus exposition, every family with a `# HELP` line.
/// Each bot has its own registry (no process-wide bootstrap), so several
/// bots in one process, as in tests, do not mix their numbers.
///
/// Rates are left to Prometheus (`rate(roombot_events_total[1m])`): a scrape
/// only reads, so any number of scrapers see the same monotonic counters.
final class BotMetrics: @unchecked Sendable {
    // @unchecked Sendable: Prometheus metrics are thread-safe; `pluginTotals`
    // is guarded by its lock; `lagTimer` is touched on the loop thread only.
    let registry = PrometheusCollectorRegistry()
    private let events: Prometheus.Counter
    private let loopLag: Prometheus.Gauge
    private let pluginTotals = LockedValue<[String: (calls: Int, failures: Int)]>([:])
    /// Last exported crash/restart/drop/skip totals of process-isolated plugins.
    private let processTotals = LockedValue<[String: [Int]]>([:])
    private var lagTimer: LoopTimer?

    init() {
        events = registry.makeCounter(descriptor: Self.named("roombot_events_total", "Framework events raised since the bot started (one per event-log line)."), labels: [])
        loopLag = registry.makeGauge(descriptor: Self.named("roombot_event_loop_lag_seconds", "How late the last 100 ms event-loop timer fired."), labels: [])
    }

    /// A metric's name and `# HELP` text (the unit is part of `name`).
    private static func named(_ name: String, _ help: String) -> MetricNameDescriptor {
        MetricNameDescriptor(metricName: name, unitName: "", helpText: help)
    }

    func count(_ event: RoomEvent) {
        events.increment()
    }

    /// Measures how late a 100 ms loop timer fires: the event loop's lag.
    func startLagProbe(loop: EventLoop) throws {
        let period = 0.1
        try loop.runAndWait { [self] in
            var expected = Date().addingTimeInterval(period)
            lagTimer = try loop.scheduleTimer(after: .milliseconds(100), repeating: .milliseconds(100)) { [loopLag] _ in
                let now = Date()
                loopLag.set(max(0, now.timeIntervalSince(expected)))
                expected = now.addingTimeInterval(period)
            }
        }
    }

    func stopLagProbe(loop: EventLoop) {
        try? loop.runAndWait { [self] in lagTimer?.cancel(); lagTimer = nil }
    }

    /// Brings the point-in-time figures up to date, then renders the registry.
    /// Counters only ever move forward: plugin totals advance by what the
    /// plugin host counted since the previous scrape.
    func exposition(host: RoomHost, plugins: PluginManager) -> String {
        var byReason: [RoomReason: Int] = [:]
        for room in host.allRooms { byReason[room.reason, default: 0] += 1 }
        for reason in RoomReason.allCases {
            registry.makeGauge(descriptor: Self.named("roombot_sessions", "Rooms of this bot by their last reported reason."), labels: [("reason", reason.rawValue)])
                .set(Double(byReason[reason] ?? 0))
        }
        for report in plugins.reports {
            let labels = [("plugin", report.name)]
            let previous = pluginTotals.withLock { totals -> (calls: Int, failures: Int) in
                defer { totals[report.name] = (report.calls, report.failures) }
                return totals[report.name] ?? (0, 0)
            }
            registry.makeCounter(descriptor: Self.named("roombot_plugin_calls_total", "Calls into each plugin."), labels: labels)
                .increment(by: Int64(max(0, report.calls - previous.calls)))
            registry.makeCounter(descriptor: Self.named("roombot_plugin_failures_total", "Plugin calls that failed or ran over their timeoutMs."), labels: labels)
                .increment(by: Int64(max(0, report.failures - previous.failures)))
            registry.makeGauge(descriptor: Self.named("roombot_plugin_latency_seconds", "Mean duration of one plugin call."), labels: labels)
                .set(report.meanMicroseconds / 1_000_000)
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
        let families = [
            ("roombot_plugin_crashes_total", "Crashes of each process-isolated plugin (signal, exit, broken pipe, bad frame)."),
            ("roombot_plugin_restarts_total", "Restarts of each process-isolated plugin after a crash or a hang."),
            ("roombot_plugin_dropped_events_total", "Events dropped for a plugin whose queue was full during a restart."),
            ("roombot_plugin_skipped_events_total", "Poison events skipped for a plugin after they crashed it twice."),
        ]
        for (index, (name, help)) in families.enumerated() {
            registry.makeCounter(descriptor: Self.named(name, help), labels: [("plugin", plugin)])
                .increment(by: Int64(max(0, now[index] - previous[index])))
        }
    }
}
