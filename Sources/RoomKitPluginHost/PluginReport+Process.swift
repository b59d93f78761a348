import RoomKitProtocol

/// The supervisor's view of a process-isolated plugin (`GET /v1/plugins`, metrics).
public struct PluginProcessReport: Sendable, Hashable {
    /// `running`, `restarting`, `quarantined`, `stopping` or `stopped` (`starting` before on_load).
    public let state: String
    /// The current (or last) process id.
    public let pid: Int32
    /// Crashes so far (signals, non-zero exits, broken pipes, bad frames, hangs, limits).
    public let crashes: Int
    /// Successful restarts so far.
    public let restarts: Int
    /// Events dropped because the queue was full (e.g. during a restart) or the plugin was quarantined.
    public let dropped: Int
    /// Poison events skipped (each crashed the plugin twice).
    public let skipped: Int
    /// Events sent or queued that the process has not finished yet.
    public let pending: Int
}

extension PluginProcessReport {
    /// The `process` object of `GET /v1/plugins`.
    public var json: JSON {
        ["state": .string(state), "pid": .int(Int64(pid)), "crashes": .int(Int64(crashes)), "restarts": .int(Int64(restarts)),
         "dropped": .int(Int64(dropped)), "skipped": .int(Int64(skipped)), "pending": .int(Int64(pending))]
    }
}

extension PluginReport {
    /// This report with `runtime`'s isolation and process counters filled in.
    func withProcess(of runtime: PluginRuntime) -> PluginReport {
        var report = self
        report.isolation = runtime.spec.isolation
        if let process = runtime.process {
            let (_, phase, stats, pending) = process.report
            report.process = PluginProcessReport(state: phase.rawValue, pid: stats.pid, crashes: stats.crashes,
                                                 restarts: stats.restarts, dropped: stats.dropped, skipped: stats.skipped,
                                                 pending: pending)
        }
        return report
    }
}
