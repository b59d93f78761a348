import CoreMetrics
import Dispatch

/// What a `RoomHost` reports through swift-metrics, so any app that embeds
/// it (not only roombot) gets them from whatever backend it bootstraps:
///
/// - `roomkit_sessions{reason}` (gauge): rooms by their last reported reason;
/// - `roomkit_reconnects_total` (counter): sessions that went `RECONNECTING`;
/// - `roomkit_events_total{event}` (counter): events raised, by event-log name;
/// - `roomkit_dispatch_seconds` (timer): how long one event took to reach the
///   loop observers (event log, plugin dispatch) and the streams.
///
/// Loop thread only (`emit` runs there); the instruments themselves are
/// thread-safe.
final class RoomHostMetrics {
    private let factory: any MetricsFactory
    private let reconnects: Counter
    private let dispatch: Timer
    private var events: [String: Counter] = [:]
    /// `events["magix"]`, once made.
    private var magixEvents: Counter?
    private var sessions: [RoomReason: Gauge] = [:]
    /// Each room's last reported reason, to move it between the gauges.
    private var reasons: [String: RoomReason] = [:]
    private var counts: [RoomReason: Int] = [:]

    /// Whether the dispatch timer goes anywhere: with swift-metrics' no-op
    /// factory (nothing bootstrapped) the two clock reads per event are skipped.
    private let timesDispatch: Bool

    init(factory: any MetricsFactory) {
        self.factory = factory
        reconnects = Counter(label: "roomkit_reconnects_total", dimensions: [], factory: factory)
        dispatch = Timer(label: "roomkit_dispatch_seconds", dimensions: [], factory: factory)
        timesDispatch = !(factory is NOOPMetricsHandler)
    }

    func clock() -> UInt64 { timesDispatch ? DispatchTime.now().uptimeNanoseconds : 0 }

    /// Counts `event`, moves its room between the session gauges on a
    /// reason change, and records the dispatch time since `started`.
    func raised(_ event: RoomEvent, since started: UInt64) {
        if timesDispatch {
            dispatch.recordNanoseconds(Int64(truncatingIfNeeded: DispatchTime.now().uptimeNanoseconds &- started))
        }
        if case .magix = event {
            // The hot path: its counter is kept aside (no name lookup per event).
            return (magixEvents ?? counter(named: "magix", keepingMagix: true)).increment()
        }
        counter(named: event.logName).increment()
        guard case .roomStateChanged(let room, let reason, _, _) = event else { return }
        if reason == .reconnecting { reconnects.increment() }
        let previous = reasons.updateValue(reason, forKey: room)
        guard previous != reason else { return }
        if let previous { move(previous, by: -1) }
        move(reason, by: 1)
    }

    private func counter(named name: String, keepingMagix: Bool = false) -> Counter {
        let counter = events[name] ?? {
            let made = Counter(label: "roomkit_events_total", dimensions: [("event", name)], factory: factory)
            events[name] = made
            return made
        }()
        if keepingMagix { magixEvents = counter }
        return counter
    }

    private func move(_ reason: RoomReason, by delta: Int) {
        let count = (counts[reason] ?? 0) + delta
        counts[reason] = count
        let gauge = sessions[reason] ?? {
            let made = Gauge(label: "roomkit_sessions", dimensions: [("reason", reason.rawValue)], factory: factory)
            sessions[reason] = made
            return made
        }()
        gauge.record(count)
    }
}
