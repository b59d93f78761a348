import Foundation
import Histogram
import RoomKitProtocol
import RoomKitTokens

/// CLOCK_MONOTONIC in nanoseconds: the clock every bench process (and the
/// Python peer's `time.monotonic_ns()`) shares, so one process can stamp an
/// event and another can measure its latency.
public func monotonicNanos() -> Int64 {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    return Int64(now.tv_sec) * 1_000_000_000 + Int64(now.tv_nsec)
}

/// This process's resident set size in bytes (VmRSS of /proc/self/status).
public func residentBytes() -> Int {
    guard let text = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return 0 }
    for line in text.split(separator: "\n") where line.hasPrefix("VmRSS:") {
        let digits = line.dropFirst(6).filter(\.isNumber)
        return (Int(String(digits)) ?? 0) * 1024
    }
    return 0
}

/// `--name value` command-line options (every option takes a value).
public struct Options: Sendable {
    public let values: [String: String]

    public init(_ arguments: ArraySlice<String>) {
        var values: [String: String] = [:]
        var iterator = arguments.makeIterator()
        while let key = iterator.next() {
            guard key.hasPrefix("--") else { continue }
            values[String(key.dropFirst(2))] = iterator.next() ?? ""
        }
        self.values = values
    }

    public func string(_ key: String, _ fallback: String) -> String { values[key] ?? fallback }
    public func int(_ key: String, _ fallback: Int) -> Int { values[key].flatMap { Int($0) } ?? fallback }
    public func double(_ key: String, _ fallback: Double) -> Double { values[key].flatMap { Double($0) } ?? fallback }
}

/// Writes one JSON object as one line on stdout (what the orchestrator reads).
public func report(_ fields: [String: JSON]) {
    FileHandle.standardOutput.write(Data((JSON.object(fields).jsonString + "\n").utf8))
}

/// A line on stderr (progress; the orchestrator logs it).
public func note(_ message: String) {
    FileHandle.standardError.write(Data("[bench] \(message)\n".utf8))
}

/// A writer token valid in every room (`room: "*"`) for `user`, one hour.
public func benchToken(secret: String, user: String, role: TokenRole = .writer) -> String {
    let now = Int64(Date().timeIntervalSince1970)
    return TokenSigner(secret: secret).sign(TokenClaims(sub: user, room: "*", role: role, exp: now + 3600, iat: now))
}

/// Lines from stdin, read on a background thread (the orchestrator's commands).
public func stdinLines() -> AsyncStream<String> {
    AsyncStream { continuation in
        Thread.detachNewThread {
            while let line = readLine() { continuation.yield(line.trimmingCharacters(in: .whitespaces)) }
            continuation.finish()
        }
    }
}

/// p50/p99/p99.9/max of latencies in nanoseconds, through an HdrHistogram
/// (3 significant digits), reported in microseconds.
public func latencySummary(_ nanoseconds: some Sequence<Int64>) -> [String: JSON] {
    var histogram = Histogram<UInt64>(highestTrackableValue: 60_000_000_000, numberOfSignificantValueDigits: .three)
    for value in nanoseconds { _ = histogram.record(UInt64(max(1, value))) }
    func micros(_ value: UInt64) -> JSON { .double(Double(value) / 1000) }
    return [
        "count": .int(Int64(histogram.totalCount)),
        "p50_us": micros(histogram.valueAtPercentile(50)),
        "p99_us": micros(histogram.valueAtPercentile(99)),
        "p999_us": micros(histogram.valueAtPercentile(99.9)),
        "max_us": micros(histogram.max),
    ]
}

/// glibc's malloc_trim(0): returns free heap pages to the OS, so that RSS
/// shows live memory rather than what the allocator keeps cached. Looked up
/// at run time (the Glibc module does not export it).
public func trimHeap() {
    typealias Trim = @convention(c) (Int) -> Int32
    guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "malloc_trim") else { return }
    _ = unsafeBitCast(symbol, to: Trim.self)(0)
}

/// CPU time (user + system, every thread) this process has used, in ns.
public func processCPUNanos() -> Int64 {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    let user = Int64(usage.ru_utime.tv_sec) * 1_000_000_000 + Int64(usage.ru_utime.tv_usec) * 1000
    let system = Int64(usage.ru_stime.tv_sec) * 1_000_000_000 + Int64(usage.ru_stime.tv_usec) * 1000
    return user + system
}
