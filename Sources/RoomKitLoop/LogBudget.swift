/// A rate limit for one kind of log line: at most `limit` lines per
/// `interval`; the lines past it are counted, and the next line written
/// carries that count, so a flood (a client retrying a bad token, a plugin
/// failing every call) costs a few lines and says how many were held back.
///
/// A value with no clock of its own: the caller passes the time (ms, any
/// monotonic clock) and keeps it where its lines are written (the loop
/// thread, or under a lock).
public struct LogBudget: Sendable, Hashable {
    /// Lines allowed per interval.
    public let limit: Int
    /// The interval, in ms.
    public let interval: Int64
    private var windowStart: Int64?
    private var used = 0
    private var held = 0

    /// What `take(now:)` decided.
    public enum Decision: Sendable, Hashable {
        /// Write the line; `suppressed` lines were held back since the last one written.
        case log(suppressed: Int)
        /// Hold it back (counted).
        case suppress
    }

    public init(limit: Int, interval: Int64) {
        self.limit = max(1, limit)
        self.interval = max(1, interval)
    }

    /// One line wants out at `now`.
    public mutating func take(now: Int64) -> Decision {
        if let start = windowStart, now - start < interval, now >= start {
            guard used < limit else {
                held += 1
                return .suppress
            }
        } else {
            windowStart = now
            used = 0
        }
        used += 1
        let suppressed = held
        held = 0
        return .log(suppressed: suppressed)
    }
}
