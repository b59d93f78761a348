/// A token bucket with an over-limit episode (PROTOCOL.md §1): `burst`
/// tokens refilling at `perSecond`; a take that finds it empty is refused,
/// and refusals each less than `episodeGap` ms after the previous one form
/// one episode. Once an episode has lasted `grace` ms the connection is over
/// its limit "continuously" and is closed. Admitted takes do not end an
/// episode: a flood keeps getting the odd message through as the bucket
/// trickles back, and is still over its limit. Pure value, no clock.
struct RateBucket: Sendable {
    enum Outcome: Equatable, Sendable {
        case admitted
        case refused
        case overTooLong
    }

    /// The numbers of a bucket: tokens, refill per second, and the grace and
    /// episode gap in ms.
    struct Limits: Sendable {
        var burst: Double
        var perSecond: Double
        var grace: Int64
        var episodeGap: Int64
    }

    let limits: Limits
    private(set) var tokens: Double
    private var lastRefill: Int64
    /// When the current episode of refusals began.
    private var overSince: Int64?
    /// When a take last found the bucket empty.
    private var lastRefusalAt: Int64?

    /// A full bucket at `now` (ms).
    init(_ limits: Limits, now: Int64) {
        self.limits = limits
        tokens = limits.burst
        lastRefill = now
    }

    /// Takes one token at `now` (ms).
    mutating func take(now: Int64) -> Outcome {
        tokens = min(limits.burst, tokens + Double(max(0, now - lastRefill)) / 1000 * limits.perSecond)
        lastRefill = now
        if tokens >= 1 {
            tokens -= 1
            return .admitted
        }
        let sameEpisode = lastRefusalAt.map { now - $0 < limits.episodeGap } ?? false
        let since = sameEpisode ? overSince ?? now : now
        overSince = since
        lastRefusalAt = now
        return now - since >= limits.grace ? .overTooLong : .refused
    }
}
