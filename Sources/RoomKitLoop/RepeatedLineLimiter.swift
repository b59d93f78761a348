/// Lets a repeated log line through once per interval and counts the
/// copies it held back, so a condition that repeats on every loop turn
/// (lws's "accept: errno 24" at file-descriptor exhaustion: 200,000 lines in
/// 10 s) costs a line per interval, not a line per turn. Pure: the caller
/// passes the time, so tests need no clock.
public struct RepeatedLineLimiter: Sendable {
    /// What to do with one line.
    public enum Verdict: Equatable, Sendable {
        /// Log it; `suppressed` copies were held back since it was last logged.
        case log(suppressed: Int)
        /// Hold it back (counted).
        case suppress
    }

    /// A line is logged at most once per this many nanoseconds.
    public let intervalNanoseconds: UInt64
    /// Distinct lines remembered; past it the oldest window is forgotten.
    public let capacity: Int
    private var windows: [String: (start: UInt64, suppressed: Int)] = [:]

    public init(intervalNanoseconds: UInt64, capacity: Int = 64) {
        self.intervalNanoseconds = intervalNanoseconds
        self.capacity = capacity
    }

    /// The verdict for `line` at monotonic time `now` (nanoseconds).
    public mutating func line(_ line: String, now: UInt64) -> Verdict {
        if let window = windows[line], now &- window.start < intervalNanoseconds {
            windows[line] = (window.start, window.suppressed + 1)
            return .suppress
        }
        let suppressed = windows[line]?.suppressed ?? 0
        if windows[line] == nil && windows.count >= capacity,
           let oldest = windows.min(by: { $0.value.start < $1.value.start })?.key {
            windows[oldest] = nil
        }
        windows[line] = (now, 0)
        return .log(suppressed: suppressed)
    }
}
