import Logging
import RoomKitLoop

extension RoomServer {
    /// At most this many rejected-token lines per interval (ms); the lines
    /// held back are counted on the next one (docs/SECURITY.md "Limits").
    static let tokenRejectionLogLimit = 10
    static let tokenRejectionLogInterval: Int64 = 10_000

    /// roomd refused a token (`authFailures`): say so at info, with where
    /// (login, renewToken, hello, HTTP), what for and why, rate-limited so
    /// that a client retrying a bad token cannot flood the log. The token
    /// itself is never logged. Loop thread only.
    func noteTokenRejected(_ reason: String, in context: String, room: String?, connection: String?, now: Int64) {
        metrics.authFailures += 1
        switch tokenRejectionLog.take(now: now) {
        case .log(let suppressed):
            var metadata: Logger.Metadata = ["in": "\(context)", "reason": "\(reason)"]
            if let room { metadata["room"] = "\(room)" }
            if let connection { metadata["connection"] = "\(connection)" }
            if suppressed > 0 { metadata["suppressed"] = "\(suppressed)" }
            logger.info("token rejected", metadata: metadata)
        case .suppress:
            break
        }
    }
}
