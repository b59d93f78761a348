// Time in the units the protocol speaks: whole milliseconds (PROTOCOL.md
// gives every time and duration in ms). One definition for the engine,
// roomd and the plugin SDK.
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

extension Duration {
    /// Whole milliseconds, rounded down and never negative.
    public var milliseconds: Int64 {
        let (seconds, attoseconds) = components
        return max(0, seconds * 1000 + attoseconds / 1_000_000_000_000_000)
    }
}

/// Wall-clock milliseconds since the Unix epoch (token expiry, `ts` fields
/// and recordings are wall time).
public func wallMilliseconds() -> Int64 {
    var now = timespec()
    clock_gettime(CLOCK_REALTIME, &now)
    return Int64(now.tv_sec) * 1000 + Int64(now.tv_nsec) / 1_000_000
}
