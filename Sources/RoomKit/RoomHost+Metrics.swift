import CoreMetrics
import Dispatch
import RoomKitProtocol

/// What a `RoomHost` reports through swift-metrics, so any app that embeds
/// it (not only roombot) gets them from whatever backend it bootstraps:
///
/// - `roomkit_sessions{reason}` (gauge): rooms by their last reported reason;
/// - `roomkit_reconnects_total{reason}` (counter): sessions that went
///   `RECONNECTING`, by how the connection ended (`closed_by_peer`, `closed`,
///   `aborted`, `connect_failed`, `hello_refused`, `bad_hello`, `timeout`);
/// - `roomkit_connection_losses_total{reason}` (counter): lost connections, same reasons;
/// - `roomkit_connection_up{server}` (gauge): 1 while the connection to the
///   server is open and greeted, else 0;
/// - `roomkit_kicks_total{code}`, `roomkit_login_failures_total{code}` (counters);
/// - `roomkit_login_seconds`, `roomkit_resume_seconds` (timers): `LOGINING`
///   to `LOGINED`, `RECONNECTING` to `RECONNECTED`, per room;
/// - `roomkit_url_interrupter_seconds` (timer): one run of the URL chain;
/// - `roomkit_events_total{event}` (counter): events raised, by event-log name;
/// - `roomkit_dispatch_seconds` (timer): how long one event took to reach the
///   loop observers (event log, plugin dispatch) and the streams.
///
/// Loop thread only (`emit` runs there), except `urlChain` (any thread); the
/// instruments themselves are thread-safe.
final class RoomHostMetrics {
    private let factory: any MetricsFactory
    private let dispatch: Timer
    private let login: Timer
    private let resume: Timer
    /// The URL chain's timer; any thread (`interruptURL` is async).
    let urlChain: Timer
    private let connectionUp: Gauge
    private var labelled: [String: Counter] = [:]
    /// `roomkit_events_total` by `RoomEvent.kind`, each made on first use
    /// (an index, not a name lookup per event: five per login).
    private var events = [Counter?](repeating: nil, count: RoomEvent.kinds)
    /// `roomkit_sessions` by reason (`RoomReason.index`), each made on
    /// first use, and how many rooms each holds. A room's own place (its
    /// last reason, when it began logging in) is in its `SessionRecord`: a
    /// dictionary keyed by room here was 5% of a bot's loop while a million
    /// rooms logged in.
    private var sessions = [Gauge?](repeating: nil, count: RoomReason.allCases.count)
    private var counts = [Int](repeating: 0, count: RoomReason.allCases.count)
    /// How the connection ended, while `linkClosed` (or a close because no
    /// room needs it: `unwanted`, not counted) handles it.
    var pendingLossKind: String?
    /// `pendingLossKind` of a connection closed because no room needs it.
    static let unwanted = "unwanted"
    /// How the connection last ended: the reason of the reconnects it causes.
    private var lastLossKind = "timeout"

    /// Whether the dispatch timer goes anywhere: with swift-metrics' no-op
    /// factory (nothing bootstrapped) the two clock reads per event are skipped.
    private let timesDispatch: Bool

    init(factory: any MetricsFactory, server: String) {
        self.factory = factory
        dispatch = Timer(label: "roomkit_dispatch_seconds", dimensions: [], factory: factory)
        login = Timer(label: "roomkit_login_seconds", dimensions: [], factory: factory)
        resume = Timer(label: "roomkit_resume_seconds", dimensions: [], factory: factory)
        urlChain = Timer(label: "roomkit_url_interrupter_seconds", dimensions: [], factory: factory)
        connectionUp = Gauge(label: "roomkit_connection_up", dimensions: [("server", server)], factory: factory)
        connectionUp.record(0)
        timesDispatch = !(factory is NOOPMetricsHandler)
    }

    func clock() -> UInt64 { timesDispatch ? DispatchTime.now().uptimeNanoseconds : 0 }

    /// The connection became ready (hello answered), or went away.
    func connection(up: Bool) {
        connectionUp.record(up ? 1 : 0)
    }

    /// A ready connection was lost; `kind` says how (one word).
    func connectionLost(kind: String) {
        lastLossKind = kind
        counter("roomkit_connection_losses_total", ("reason", kind)).increment()
    }

    /// Counts `event` and records the dispatch time since `started`.
    func raised(_ event: RoomEvent, since started: UInt64) {
        if timesDispatch {
            dispatch.recordNanoseconds(Int64(truncatingIfNeeded: DispatchTime.now().uptimeNanoseconds &- started))
        }
        counter(for: event).increment()
        if case .kickedWithReason(_, let code, _) = event {
            counter("roomkit_kicks_total", ("code", String(code.rawValue))).increment()
        }
    }

    /// `record`'s room reports `reason`: it moves between the session
    /// gauges, its login or resume is timed, and reconnects and login
    /// failures are counted.
    func reported(_ reason: RoomReason, _ code: ErrorCode, _ record: SessionRecord) {
        time(reason, record)
        switch reason {
        case .reconnecting: counter("roomkit_reconnects_total", ("reason", lastLossKind)).increment()
        case .loginFailed: counter("roomkit_login_failures_total", ("code", String(code.rawValue))).increment()
        case .logining, .logined, .reconnected, .reconnectFailed, .kickOut, .logout, .logoutFailed: break
        }
        let previous = record.reason
        guard previous != reason else { return }
        record.reason = reason
        if let previous { move(previous, by: -1) }
        move(reason, by: 1)
    }

    /// Login and resume latency: from LOGINING or RECONNECTING to their success.
    private func time(_ reason: RoomReason, _ record: SessionRecord) {
        switch reason {
        case .logining, .reconnecting:
            record.timedSince = DispatchTime.now().uptimeNanoseconds
        case .logined, .reconnected:
            guard record.timedSince != 0 else { return }
            let elapsed = Int64(truncatingIfNeeded: DispatchTime.now().uptimeNanoseconds &- record.timedSince)
            record.timedSince = 0
            (reason == .logined ? login : resume).recordNanoseconds(elapsed)
        case .loginFailed, .reconnectFailed, .kickOut, .logout, .logoutFailed:
            record.timedSince = 0
        }
    }

    /// The counter `label` with one dimension (made on first use).
    private func counter(_ label: String, _ dimension: (String, String)) -> Counter {
        let key = label + "|" + dimension.1
        if let made = labelled[key] { return made }
        let made = Counter(label: label, dimensions: [dimension], factory: factory)
        labelled[key] = made
        return made
    }

    private func counter(for event: RoomEvent) -> Counter {
        let kind = event.kind
        if let made = events[kind] { return made }
        let made = Counter(label: "roomkit_events_total", dimensions: [("event", event.logName)], factory: factory)
        events[kind] = made
        return made
    }

    private func move(_ reason: RoomReason, by delta: Int) {
        let index = reason.index
        counts[index] += delta
        let gauge = sessions[index] ?? {
            let made = Gauge(label: "roomkit_sessions", dimensions: [("reason", reason.rawValue)], factory: factory)
            sessions[index] = made
            return made
        }()
        gauge.record(counts[index])
    }
}

extension RoomReason {
    /// The reason's position in `allCases`, for tables indexed by reason.
    fileprivate var index: Int {
        switch self {
        case .logining: 0
        case .logined: 1
        case .loginFailed: 2
        case .reconnecting: 3
        case .reconnected: 4
        case .reconnectFailed: 5
        case .kickOut: 6
        case .logout: 7
        case .logoutFailed: 8
        }
    }
}

extension Timer {
    /// Records the time since `start` on the continuous clock.
    func recordInterval(since start: ContinuousClock.Instant) {
        let elapsed = ContinuousClock.now - start
        recordNanoseconds(elapsed.components.seconds * 1_000_000_000 + elapsed.components.attoseconds / 1_000_000_000)
    }
}
