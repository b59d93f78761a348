import CoreMetrics
import Prometheus

/// A swift-metrics factory writing to one Prometheus registry, like
/// swift-prometheus's `PrometheusMetricsFactory`, except that every metric
/// family gets a `# HELP` line: from `help[label]`, or the label itself.
/// `promtool check metrics` rejects a family without HELP, and the stock
/// factory has no way to give one.
///
/// Each server or bot makes its own (no process-wide `MetricsSystem`
/// bootstrap), so several in one process, as in tests, keep their numbers
/// apart. Thread-safe, as the registry is.
public struct DocumentedMetricsFactory: CoreMetrics.MetricsFactory, Sendable {
    /// Where the metrics live; `registry.emitToString()` is the `/metrics` text.
    public let registry: PrometheusCollectorRegistry
    /// HELP text by metric name.
    public var help: [String: String]
    /// Buckets of every timer (swift-metrics `Timer`): 100 µs to 10 s.
    public var durationBuckets: [Duration] = [
        .microseconds(100), .microseconds(250), .microseconds(500), .milliseconds(1), .microseconds(2500),
        .milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(50), .milliseconds(100),
        .milliseconds(250), .milliseconds(500), .seconds(1), .milliseconds(2500), .seconds(5), .seconds(10),
    ]
    /// Buckets of every aggregating recorder (a value histogram).
    public var valueBuckets: [Double] = [1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000]

    /// A factory onto `registry` (a fresh one by default) with `help` by metric name.
    public init(registry: PrometheusCollectorRegistry = PrometheusCollectorRegistry(), help: [String: String] = [:]) {
        self.registry = registry
        self.help = help
    }

    private func descriptor(_ label: String) -> MetricNameDescriptor {
        MetricNameDescriptor(namespace: nil, subsystem: nil, metricName: label, unitName: "", helpText: help[label] ?? label.split(separator: "_").joined(separator: " "))
    }

    // MetricsFactory: each handler is the registry's own metric, made with HELP.

    public func makeCounter(label: String, dimensions: [(String, String)]) -> any CoreMetrics.CounterHandler {
        registry.makeCounter(descriptor: descriptor(label), labels: dimensions)
    }

    public func makeFloatingPointCounter(label: String, dimensions: [(String, String)]) -> any FloatingPointCounterHandler {
        registry.makeCounter(descriptor: descriptor(label), labels: dimensions)
    }

    public func makeRecorder(label: String, dimensions: [(String, String)], aggregate: Bool) -> any CoreMetrics.RecorderHandler {
        guard aggregate else { return registry.makeGauge(descriptor: descriptor(label), labels: dimensions) }
        return registry.makeValueHistogram(descriptor: descriptor(label), labels: dimensions, buckets: valueBuckets)
    }

    public func makeMeter(label: String, dimensions: [(String, String)]) -> any CoreMetrics.MeterHandler {
        registry.makeGauge(descriptor: descriptor(label), labels: dimensions)
    }

    public func makeTimer(label: String, dimensions: [(String, String)]) -> any CoreMetrics.TimerHandler {
        registry.makeDurationHistogram(descriptor: descriptor(label), labels: dimensions, buckets: durationBuckets)
    }

    public func destroyCounter(_ handler: any CoreMetrics.CounterHandler) {
        if let counter = handler as? Prometheus.Counter { registry.unregisterCounter(counter) }
    }

    public func destroyFloatingPointCounter(_ handler: any FloatingPointCounterHandler) {
        if let counter = handler as? Prometheus.Counter { registry.unregisterCounter(counter) }
    }

    public func destroyRecorder(_ handler: any CoreMetrics.RecorderHandler) {
        switch handler {
        case let gauge as Prometheus.Gauge: registry.unregisterGauge(gauge)
        case let histogram as Prometheus.Histogram<Double>: registry.unregisterValueHistogram(histogram)
        default: break
        }
    }

    public func destroyMeter(_ handler: any CoreMetrics.MeterHandler) {
        if let gauge = handler as? Prometheus.Gauge { registry.unregisterGauge(gauge) }
    }

    public func destroyTimer(_ handler: any CoreMetrics.TimerHandler) {
        if let histogram = handler as? Prometheus.Histogram<Duration> { registry.unregisterDurationHistogram(histogram) }
    }
}
