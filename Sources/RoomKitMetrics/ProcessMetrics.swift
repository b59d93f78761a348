import CoreMetrics
import Foundation
import Synchronization

/// The standard `process_*` metrics of Prometheus client libraries, read
/// from `/proc/self` at each `update()` (call it just before rendering):
/// `process_cpu_seconds_total`, `process_resident_memory_bytes`,
/// `process_virtual_memory_bytes`, `process_open_fds`, `process_max_fds`,
/// `process_start_time_seconds`. On systems without `/proc` they stay 0.
/// Thread-safe.
public final class ProcessMetrics: Sendable {
    /// HELP texts, for `DocumentedMetricsFactory.help`.
    public static let help: [String: String] = [
        "process_cpu_seconds_total": "Total user and system CPU time spent in seconds.",
        "process_resident_memory_bytes": "Resident memory size in bytes.",
        "process_virtual_memory_bytes": "Virtual memory size in bytes.",
        "process_open_fds": "Number of open file descriptors.",
        "process_max_fds": "Maximum number of open file descriptors.",
        "process_start_time_seconds": "Start time of the process since unix epoch in seconds.",
    ]

    private let cpu: CoreMetrics.FloatingPointCounter
    private let resident: CoreMetrics.Gauge
    private let virtual: CoreMetrics.Gauge
    private let openFDs: CoreMetrics.Gauge
    private let maxFDs: CoreMetrics.Gauge
    private let startTime: CoreMetrics.Gauge
    private let lastCPU = Mutex(0.0)

    /// Registers the metrics with `factory` and reads them once.
    public init(factory: any CoreMetrics.MetricsFactory) {
        cpu = CoreMetrics.FloatingPointCounter(label: "process_cpu_seconds_total", dimensions: [], factory: factory)
        resident = CoreMetrics.Gauge(label: "process_resident_memory_bytes", dimensions: [], factory: factory)
        virtual = CoreMetrics.Gauge(label: "process_virtual_memory_bytes", dimensions: [], factory: factory)
        openFDs = CoreMetrics.Gauge(label: "process_open_fds", dimensions: [], factory: factory)
        maxFDs = CoreMetrics.Gauge(label: "process_max_fds", dimensions: [], factory: factory)
        startTime = CoreMetrics.Gauge(label: "process_start_time_seconds", dimensions: [], factory: factory)
        update()
    }

    /// Reads the current figures.
    public func update() {
        let ticks = Double(sysconf(Int32(_SC_CLK_TCK)))
        let pageSize = Double(sysconf(Int32(_SC_PAGESIZE)))
        if let stat = try? String(contentsOfFile: "/proc/self/stat", encoding: .utf8),
           let close = stat.lastIndex(of: ")"), ticks > 0 {
            // Fields after "pid (comm)": state is field 3; utime 14, stime 15, starttime 22, vsize 23, rss 24.
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            func field(_ number: Int) -> Double { Double(fields[safe: number - 3] ?? "") ?? 0 }
            let seconds = (field(14) + field(15)) / ticks
            let delta = lastCPU.withLock { last -> Double in
                defer { last = max(last, seconds) }
                return max(0, seconds - last)
            }
            if delta > 0 { cpu.increment(by: delta) }
            virtual.record(field(23))
            resident.record(field(24) * pageSize)
            if let boot = Self.bootTime() { startTime.record(boot + field(22) / ticks) }
        }
        if let entries = try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd") {
            openFDs.record(max(0, entries.count - 1))  // minus the descriptor listing the directory
        }
        var limit = rlimit()
        if getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 { maxFDs.record(Double(limit.rlim_cur)) }
    }

    /// `btime` of /proc/stat: the boot time, seconds since the epoch.
    private static func bootTime() -> Double? {
        guard let text = try? String(contentsOfFile: "/proc/stat", encoding: .utf8) else { return nil }
        for line in text.split(separator: "\n") where line.hasPrefix("btime ") {
            return Double(line.dropFirst(6).trimmingCharacters(in: .whitespaces))
        }
        return nil
    }
}

extension Array {
    fileprivate subscript(safe index: Int) -> Element? { indices.contains(index) ? self[index] : nil }
}
