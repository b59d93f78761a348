import RoomKitProtocol

/// Counters behind `/metrics`. Loop thread only.
struct ServerMetrics {
    var eventsTotal = 0
    var bytesOut = 0
    var kicks = 0
    var authFailures = 0
    /// Messages without `id` that arrived over the rate limit.
    var unsolicitedOverLimit = 0
    /// Requests refused 1009004.
    var requestsOverLimit = 0
    /// Group commits (one per loop turn that wrote), and those that failed.
    var commits = 0
    var commitFailures = 0
    var eventsPerSecond = 0.0
    var lastRateSample: (at: Int64, events: Int) = (0, 0)
    /// WebSocket messages and their bytes received from clients.
    var messagesIn = 0
    var bytesIn = 0
    /// Error replies and error messages sent, by protocol error code.
    var errors: [Int: Int] = [:]
    /// Closed client connections, by close code (1006: none).
    var disconnects: [UInt16: Int] = [:]
    /// Logins that asked to resume a session, by outcome
    /// (`recovered`, `resumed`, `expired`; see RoomServer+Metrics).
    var recoveries: [String: Int] = [:]

    /// Counts one error sent to a client.
    mutating func sent(_ error: ProtocolError) { errors[error.code.rawValue, default: 0] += 1 }
}
