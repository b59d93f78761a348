import CoreMetrics
import Foundation

/// Quarantine recovers by itself (issue 28 §4): a quarantined plugin is
/// retried after `quarantineRetryMs` (a half-open retry: the same path as an
/// operator's Reload, so a new instance, or a new process, gets the calls if
/// it loads), and every quarantine that follows a retry within
/// `quarantineRetryCapMs` doubles the wait, up to that cap. A plugin that
/// keeps failing so stays out, with growing intervals; one that has stayed
/// well for longer than the cap since its last retry starts again at the
/// first interval. `quarantineRetryMs: 0` keeps a quarantined plugin out
/// until someone reloads it. Each retry is logged (`notice`) and counted
/// (`roomkit_plugin_quarantine_retries_total{plugin}`).
struct QuarantineRecovery: Sendable {
    /// Retries since the plugin last stayed well for a whole cap.
    var attempts = 0
    /// When the last retry ran (uptime), if one did.
    var lastRetry: ContinuousClock.Instant?
    /// The sleeping retry, cancelled by a reload, an unload or shutdown.
    var task: Task<Void, Never>?
    /// The wait, in ms, the last quarantine scheduled.
    var lastDelay: Int?

    /// The wait before retry number `attempts` (0-based): `first`, doubled
    /// per attempt, at most `cap`. Pure.
    static func delay(attempt: Int, first: Int, cap: Int) -> Int {
        var delay = max(1, first)
        let cap = max(delay, cap)
        for _ in 0..<min(attempt, 62) where delay < cap { delay = delay > cap / 2 ? cap : delay * 2 }
        return delay
    }
}

extension PluginManager {
    /// `runtime` was just quarantined: schedules its half-open retry.
    func scheduleRecovery(of runtime: PluginRuntime) {
        let supervision = runtime.spec.supervision
        guard supervision.quarantineRetryMs > 0 else { return }
        let name = runtime.spec.name
        let cap = supervision.quarantineRetryCapMs
        let now = ContinuousClock.now
        let (delay, attempt) = recoveries.withLock { table -> (Int, Int) in
            var entry = table[name] ?? QuarantineRecovery()
            if let last = entry.lastRetry, now - last > .milliseconds(cap) { entry.attempts = 0 }
            let delay = QuarantineRecovery.delay(attempt: entry.attempts, first: supervision.quarantineRetryMs, cap: cap)
            entry.attempts += 1
            entry.lastDelay = delay
            entry.task?.cancel()
            entry.task = Task.detached { [weak self, weak runtime] in
                try? await Task.sleep(for: .milliseconds(delay))
                guard !Task.isCancelled, let self, let runtime else { return }
                self.retryQuarantined(runtime)
            }
            table[name] = entry
            return (delay, entry.attempts)
        }
        logger.notice("plugin quarantined; a retry is scheduled", metadata: [
            "plugin": "\(name)", "retryInMs": .stringConvertible(delay), "attempt": .stringConvertible(attempt),
        ])
    }

    /// The half-open retry: `quarantined`, if still the plugin's quarantined
    /// instance, is reloaded from its spec (live config included). Not on the
    /// loop thread (a reload waits for the loop).
    private func retryQuarantined(_ quarantined: PluginRuntime) {
        let name = quarantined.spec.name
        let current = runtimes.withLock { $0.first { $0.spec.name == name } }
        guard current === quarantined, quarantined.state.withLock({ $0.status }) == .quarantined else { return }
        recoveries.withLock { $0[name]?.lastRetry = .now }
        Counter(label: "roomkit_plugin_quarantine_retries_total", dimensions: [("plugin", name)], factory: metricsFactory).increment()
        logger.notice("plugin quarantine: retrying", metadata: ["plugin": "\(name)"])
        do {
            try reload(quarantined.spec)
        } catch {
            logger.warning("plugin quarantine retry failed; it stays out", metadata: ["plugin": "\(name)", "error": "\(error)"])
            scheduleRecovery(of: quarantined)
        }
    }

    /// The wait (ms) before the scheduled retry of `name`, if one was scheduled.
    func recoveryDelay(_ name: String) -> Int? {
        recoveries.withLock { $0[name]?.lastDelay }
    }

    /// Cancels the sleeping retry of `name` (an operator's reload, an
    /// unload), or of every plugin (nil: shutdown).
    func cancelRecovery(_ name: String?) {
        let tasks = recoveries.withLock { table -> [Task<Void, Never>] in
            if let name { return [table.removeValue(forKey: name)?.task].compactMap { $0 } }
            defer { table.removeAll() }
            return table.values.compactMap(\.task)
        }
        for task in tasks { task.cancel() }
    }
}
