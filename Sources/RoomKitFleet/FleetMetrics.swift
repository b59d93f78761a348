import CoreMetrics

/// The fleet's figures on the bot's `/metrics` (the bot passes its metrics factory).
/// swift-metrics handlers are thread-safe.
public final class FleetMetrics: Sendable {
    /// `# HELP` texts.
    public static let help: [String: String] = [
        "roombot_fleet_shards_held": "Shards this host holds now.",
        "roombot_fleet_claims_total": "Shards claimed by this host (each with a new fence).",
        "roombot_fleet_losses_total": "Shards this host lost (taken in Redis, or its lease expired on the local clock).",
        "roombot_fleet_fence_refusals_total": "Logins roomd refused with 1009008 (stale fence).",
        "roombot_fleet_handover_resumes_total": "Rooms taken over by resuming the previous owner's session.",
        "roombot_fleet_redis_up": "1 when this host's Redis connection is up at the last claim round, else 0.",
        "roombot_fleet_live_hosts": "Live hosts in the fleet, as of the last claim round.",
        "roombot_fleet_unhomed_rooms": "Rooms in shards no live host holds (expired leases), as of the last claim round.",
    ]

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
    /// Whether Redis is connected (set each claim round).
    let redisUp: CoreMetrics.Gauge
    /// Live hosts, from the claim script.
    let liveHosts: CoreMetrics.Gauge
    /// Rooms in expired shards, from the claim script (no scan per scrape).
    let unhomedRooms: CoreMetrics.Gauge

    public init(factory: any MetricsFactory) {
        shardsHeld = CoreMetrics.Gauge(label: "roombot_fleet_shards_held", dimensions: [], factory: factory)
        claims = CoreMetrics.Counter(label: "roombot_fleet_claims_total", dimensions: [], factory: factory)
        losses = CoreMetrics.Counter(label: "roombot_fleet_losses_total", dimensions: [], factory: factory)
        fenceRefusals = CoreMetrics.Counter(label: "roombot_fleet_fence_refusals_total", dimensions: [], factory: factory)
        handOverResumes = CoreMetrics.Counter(label: "roombot_fleet_handover_resumes_total", dimensions: [], factory: factory)
        redisUp = CoreMetrics.Gauge(label: "roombot_fleet_redis_up", dimensions: [], factory: factory)
        liveHosts = CoreMetrics.Gauge(label: "roombot_fleet_live_hosts", dimensions: [], factory: factory)
        unhomedRooms = CoreMetrics.Gauge(label: "roombot_fleet_unhomed_rooms", dimensions: [], factory: factory)
        shardsHeld.record(0)
        redisUp.record(0)
        liveHosts.record(0)
        unhomedRooms.record(0)
    }
}
