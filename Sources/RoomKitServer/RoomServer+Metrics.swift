import CoreMetrics
import Dispatch
import RoomKitMetrics
import RoomKitProtocol

/// roomd's `/metrics` through swift-metrics onto a Prometheus registry of
/// its own (`DocumentedMetricsFactory`, so every family has HELP and
/// `promtool check metrics` passes). The counters of `ServerMetrics` stay
/// plain integers on the loop thread and are carried over at each scrape;
/// the latency histograms are recorded where the work happens. Loop thread
/// only, like the server that owns it.
final class ServerMetricsExporter {
    static let help: [String: String] = ProcessMetrics.help.merging([
        "roomd_connections": "Open WebSocket connections.",
        "roomd_connections_refused_total": "WebSocket upgrades refused with HTTP 503 at a connection limit.",
        "roomd_unsolicited_over_limit_total": "Messages without id (pings, malformed, binary) that arrived over the rate limit.",
        "roomd_rooms": "Rooms known to the server.",
        "roomd_members": "Members visible in rooms.",
        "roomd_sessions": "Retained sessions (attached, detached or ended).",
        "roomd_events_total": "Room events appended.",
        "roomd_events_per_second": "Room events appended per second (last second).",
        "roomd_bytes_out_total": "Bytes queued to clients.",
        "roomd_kicks_total": "Sessions ended by a kick.",
        "roomd_auth_failures_total": "Rejected tokens.",
        "roomd_requests_over_limit_total": "Requests refused 1009004 (over the connection's request bucket).",
        "roomd_commits_total": "Group commits: one SQLite transaction per loop turn that wrote.",
        "roomd_commit_failures_total": "Group commits that failed (their turn was rolled back).",
        "roomd_request_duration_seconds": "Time to handle one request message, by op (decoding excluded).",
        "roomd_append_commit_duration_seconds": "Time to commit one room event to SQLite (WAL), snapshot included.",
        "roomd_fanout_duration_seconds": "Time to queue one room event to every recipient.",
        "roomd_recording_downloads": "Recording downloads streaming now.",
        "roomd_recording_downloads_refused_total": "Recording downloads answered 503 at --max-recording-downloads.",
        "roomd_recording_buffered_bytes": "Bytes of recording downloads waiting for their clients now.",
        "roomd_recording_buffered_bytes_peak": "The most bytes one recording download had waiting for its client since start.",
        "roomd_recovery_bytes": "Bytes of recent events held in memory for resume, over every room.",
        "roomd_build_info": "Version and git revision of this roomd; always 1.",
        "roomd_messages_in_total": "WebSocket messages received from clients.",
        "roomd_bytes_in_total": "Bytes of WebSocket messages received from clients.",
        "roomd_errors_total": "Errors sent to clients (replies and error messages), by protocol error code.",
        "roomd_disconnects_total": "Closed client connections, by WebSocket close code (1006: closed without a handshake).",
        "roomd_recoveries_total": "Logins that asked to resume a session, by outcome: recovered (missed events replayed), resumed (session kept, snapshot sent: history gone), expired (session no longer retained: a fresh login).",
    ]) { $1 }

    let factory = DocumentedMetricsFactory(help: ServerMetricsExporter.help)
    private let process: ProcessMetrics
    let commitLatency: CoreMetrics.Timer
    let fanoutLatency: CoreMetrics.Timer
    private var requestLatency: [ClientOp: CoreMetrics.Timer] = [:]
    private var carried: [String: Int] = [:]

    init(version: String, revision: String) {
        process = ProcessMetrics(factory: factory)
        commitLatency = CoreMetrics.Timer(label: "roomd_append_commit_duration_seconds", dimensions: [], factory: factory)
        fanoutLatency = CoreMetrics.Timer(label: "roomd_fanout_duration_seconds", dimensions: [], factory: factory)
        CoreMetrics.Gauge(label: "roomd_build_info", dimensions: [("version", version), ("revision", revision)], factory: factory)
            .record(1)
    }

    /// The timer for requests of `op` (made on first use).
    func requestTimer(_ op: ClientOp) -> CoreMetrics.Timer {
        if let timer = requestLatency[op] { return timer }
        let timer = CoreMetrics.Timer(label: "roomd_request_duration_seconds", dimensions: [("op", op.rawValue)], factory: factory)
        requestLatency[op] = timer
        return timer
    }

    /// Adds what a running total gained since the last scrape.
    private func carry(_ label: String, _ dimensions: [(String, String)] = [], total: Int) {
        let key = label + dimensions.map { "|\($0.0)=\($0.1)" }.joined()
        let gained = total - (carried[key] ?? 0)
        carried[key] = total
        CoreMetrics.Counter(label: label, dimensions: dimensions, factory: factory).increment(by: max(0, gained))
    }

    private func gauge(_ label: String, _ value: Double) {
        CoreMetrics.Gauge(label: label, dimensions: [], factory: factory).record(value)
    }

    /// Updates the point-in-time figures from `server`, then renders the registry.
    func render(_ server: RoomServer) -> String {
        let metrics = server.metrics
        gauge("roomd_connections", Double(server.links.count))
        gauge("roomd_rooms", Double(server.rooms.count))
        gauge("roomd_members", Double(server.rooms.values.reduce(0) { $0 + $1.visibleCount }))
        gauge("roomd_sessions", Double(server.rooms.values.reduce(0) { $0 + $1.sessions.count }))
        gauge("roomd_events_per_second", metrics.eventsPerSecond)
        carry("roomd_connections_refused_total", [("limit", "process")], total: server.web?.refusedAtConnectionLimit ?? 0)
        carry("roomd_connections_refused_total", [("limit", "address")], total: server.web?.refusedAtAddressLimit ?? 0)
        carry("roomd_unsolicited_over_limit_total", total: metrics.unsolicitedOverLimit)
        carry("roomd_events_total", total: metrics.eventsTotal)
        carry("roomd_bytes_out_total", total: metrics.bytesOut)
        carry("roomd_kicks_total", total: metrics.kicks)
        carry("roomd_auth_failures_total", total: metrics.authFailures)
        carry("roomd_requests_over_limit_total", total: metrics.requestsOverLimit)
        carry("roomd_commits_total", total: metrics.commits)
        carry("roomd_commit_failures_total", total: metrics.commitFailures)
        carry("roomd_messages_in_total", total: metrics.messagesIn)
        carry("roomd_bytes_in_total", total: metrics.bytesIn)
        for (code, count) in metrics.errors { carry("roomd_errors_total", [("code", String(code))], total: count) }
        for (code, count) in metrics.disconnects { carry("roomd_disconnects_total", [("code", String(code))], total: count) }
        for outcome in ["recovered", "resumed", "expired"] {
            carry("roomd_recoveries_total", [("outcome", outcome)], total: metrics.recoveries[outcome] ?? 0)
        }
        gauge("roomd_recovery_bytes", Double(server.recoveryBytes))
        gauge("roomd_recording_downloads", Double(server.recordings.active.count))
        gauge("roomd_recording_buffered_bytes", Double(server.recordings.bufferedBytes))
        gauge("roomd_recording_buffered_bytes_peak", Double(server.recordings.peakBufferedBytes))
        carry("roomd_recording_downloads_refused_total", total: server.recordings.refused)
        process.update()
        return factory.registry.emitToString()
    }
}

/// Nanoseconds on a monotonic clock, for latency histograms.
@inline(__always) func monotonicNanoseconds() -> UInt64 { DispatchTime.now().uptimeNanoseconds }

extension CoreMetrics.Timer {
    /// Records the time since `start` (from `monotonicNanoseconds()`).
    func recordSince(_ start: UInt64) {
        recordNanoseconds(Int64(min(UInt64(Int64.max), monotonicNanoseconds() &- start)))
    }
}
