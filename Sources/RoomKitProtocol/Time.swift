// Time in the units the protocol speaks: whole milliseconds (PROTOCOL.md
// gives every time and duration in ms). One definition for the engine,
// roomd and the plugin SDK.
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

extension Duration {
    /// Whole milliseconds, rounded down, never negative, and saturating at
    /// `Int64.max` (a Duration of more than ~292 million years cannot trap).
    public var milliseconds: Int64 {
        let (seconds, attoseconds) = components
        let (ms, overflow) = seconds.multipliedReportingOverflow(by: 1000)
        if overflow { return seconds < 0 ? 0 : .max }
        let (total, sumOverflow) = ms.addingReportingOverflow(attoseconds / 1_000_000_000_000_000)
        return sumOverflow ? .max : max(0, total)
    }
}

/// Wall-clock milliseconds since the Unix epoch (token expiry, `ts` fields
/// and recordings are wall time).
public func wallMilliseconds() -> Int64 {
    var now = timespec()
    clock_gettime(CLOCK_REALTIME, &now)
    return Int64(now.tv_sec) * 1000 + Int64(now.tv_nsec) / 1_000_000
}
