/// A reconnect backoff, pure: the first retry within `first` ms, each later
/// ceiling doubling up to `cap` ms. Shared by the engine's connection
/// (`ConnectionMachine`, with full jitter) and `RedisClient` (the ceilings).
public struct Backoff: Sendable, Hashable {
    /// The first retry's ceiling (ms).
    public var first: Int64
    /// The largest ceiling (ms).
    public var cap: Int64
    /// A backoff from `first` doubling up to `cap` (ms).
    public init(first: Int64 = 1000, cap: Int64 = 30_000) {
        self.first = first
        self.cap = cap
    }

    /// Full jitter: uniform in [0, min(cap, first * 2^attempt)].
    public func delay(attempt: Int, random: Double) -> Int64 {
        let ceiling = min(Double(cap), Double(first) * pow2(min(attempt, 30)))
        return Int64(ceiling * min(max(random, 0), 1))
    }

    private func pow2(_ n: Int) -> Double { Double(1 << n) }

    /// The delay ceiling of retry `attempt`: min(cap, first * 2^attempt).
    public func ceiling(attempt: Int) -> Int64 {
        Int64(min(Double(cap), Double(first) * pow2(min(attempt, 30))))
    }

    /// Whether the failure of connection attempt `attempt` (0 the first
    /// of a run of failures) deserves a log line: the first one, each one
    /// that moves the backoff to its next step (the ceiling doubles),
    /// and, once at the cap, attempts 2^k only. A server down for an hour
    /// costs a dozen lines, not one per retry.
    public func reportsFailure(ofAttempt attempt: Int) -> Bool {
        if attempt <= 0 { return true }
        if ceiling(attempt: attempt) != ceiling(attempt: attempt - 1) { return true }
        return attempt & (attempt - 1) == 0
    }
}
