#if canImport(Glibc)
import Glibc
#endif
import Foundation

/// CLOCK_MONOTONIC in nanoseconds: the clock the sender stamps magix with.
func monotonicNanos() -> Int64 {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    return Int64(now.tv_sec) * 1_000_000_000 + Int64(now.tv_nsec)
}

/// CPU time of the whole process (all threads), in nanoseconds.
func processCPUNanos() -> Int64 {
    var now = timespec()
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now)
    return Int64(now.tv_sec) * 1_000_000_000 + Int64(now.tv_nsec)
}

/// VmRSS from /proc/self/status.
func residentBytes() -> Int {
    guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return 0 }
    for line in status.split(separator: "\n") where line.hasPrefix("VmRSS:") {
        return (Int(line.split(separator: " ", omittingEmptySubsequences: true)[1]) ?? 0) * 1024
    }
    return 0
}

/// What the benchmark counts, across every connection. Event-loop thread
/// only (read by the command thread through `loop.submit`).
final class Stats: @unchecked Sendable {
    // @unchecked Sendable: mutated on the single event loop only; the command
    // thread reads it through `EventLoop.submit`.
    let recordLatency: Bool
    var events = 0
    var first: Int64 = 0
    var last: Int64 = 0
    var latencies: [Int64] = []
    var reconnected = 0
    var firstReconnected: Int64 = 0
    var lastReconnected: Int64 = 0
    var firstLost: Int64 = 0
    var reconnectTimes: [Int64] = []

    init(recordLatency: Bool) { self.recordLatency = recordLatency }

    func reset() {
        events = 0
        first = 0
        last = 0
        latencies.removeAll(keepingCapacity: true)
    }
}

/// The kinds a plugin is told (the Python peer's numbers).
enum Kind: Int { case state = 3, magix = 8, userUpdate = 9, streamUpdate = 10, extraInfo = 11 }

/// An in-process handler: called directly from the reader, like the Python
/// peer's handler functions (no isolation, no queue hop).
typealias Plugin = (Kind, String, Incoming) -> Void

/// `count` no-op handlers; the last one counts magix and their latency.
func makePlugins(_ count: Int, stats: Stats) -> [Plugin] {
    let noop: Plugin = { _, _, _ in }
    let probe: Plugin = { kind, _, message in
        guard kind == .magix else { return }
        let now = monotonicNanos()
        if stats.events == 0 { stats.first = now }
        stats.last = now
        stats.events += 1
        if stats.recordLatency, let sent = message.payload?["t"]?.int64, sent != 0 {
            stats.latencies.append(now - sent)
        }
    }
    return Array(repeating: noop, count: max(0, count - 1)) + [probe]
}

/// p50/p99/p99.9/max in microseconds (exact ranks, as the Python peer).
func latencySummary(_ samples: [Int64]) -> [String: Any] {
    guard !samples.isEmpty else { return ["count": 0, "p50_us": 0, "p99_us": 0, "p999_us": 0, "max_us": 0] }
    let ordered = samples.sorted()
    func at(_ percentile: Double) -> Double {
        let rank = Int(Double(ordered.count) * percentile / 100 + 0.5) - 1
        return Double(ordered[min(ordered.count - 1, max(0, rank))]) / 1000
    }
    return ["count": ordered.count, "p50_us": at(50), "p99_us": at(99), "p999_us": at(99.9),
            "max_us": Double(ordered[ordered.count - 1]) / 1000]
}
