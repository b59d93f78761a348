import CoreMetrics
import Prometheus

/// The fleet's figures on the bot's `/metrics` (same registry as BotMetrics).
/// swift-metrics handlers are thread-safe.
final class FleetMetrics: Sendable {
    /// Shards this host holds now.
    let shardsHeld: CoreMetrics.Gauge
    /// Shards claimed (each with a new fence).
    let claims: CoreMetrics.Counter
    /// Shards lost (taken in Redis, or expired on the local clock).
    let losses: CoreMetrics.Counter
    /// Logins roomd refused with 1009008 (stale fence).
    let fenceRefusals: CoreMetrics.Counter
    /// Rooms taken over by resuming the previous owner's session.
    let handOverResumes: CoreMetrics.Counter

    init(registry: PrometheusCollectorRegistry) {
        let factory = PrometheusMetricsFactory(registry: registry)
        shardsHeld = CoreMetrics.Gauge(label: "roombot_fleet_shards_held", dimensions: [], factory: factory)
        claims = CoreMetrics.Counter(label: "roombot_fleet_claims_total", dimensions: [], factory: factory)
        losses = CoreMetrics.Counter(label: "roombot_fleet_losses_total", dimensions: [], factory: factory)
        fenceRefusals = CoreMetrics.Counter(label: "roombot_fleet_fence_refusals_total", dimensions: [], factory: factory)
        handOverResumes = CoreMetrics.Counter(label: "roombot_fleet_handover_resumes_total", dimensions: [], factory: factory)
        shardsHeld.record(0)
    }
}
