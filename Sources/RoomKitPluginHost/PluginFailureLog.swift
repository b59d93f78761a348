import Dispatch
import Logging
import RoomKitLoop
import Synchronization

/// Logs each failed plugin call (a timeout, no result, bad UTF-8) at
/// warning, as it happens, not only once the plugin is quarantined: at most
/// `limit` lines per plugin per `interval` ms, the next line counting those
/// held back (docs/SECURITY.md "Limits"). Any thread.
final class PluginFailureLog: Sendable {
    /// Lines per plugin per interval.
    static let limit = 5
    /// The interval, in ms.
    static let interval: Int64 = 10_000

    private let logger: Logger
    private let budgets = LockedValue<[String: LogBudget]>([:])

    init(logger: Logger) {
        self.logger = logger
    }

    /// One failed call of `plugin`; `failures` is its total so far.
    func note(plugin: String, failure: String, failures: Int) {
        let now = Int64(DispatchTime.now().uptimeNanoseconds / 1_000_000)
        let decision = budgets.withLock { budgets in
            budgets[plugin, default: LogBudget(limit: Self.limit, interval: Self.interval)].take(now: now)
        }
        switch decision {
        case .log(let suppressed):
            var metadata: Logger.Metadata = ["plugin": "\(plugin)", "error": "\(failure)", "failures": "\(failures)"]
            if suppressed > 0 { metadata["suppressed"] = "\(suppressed)" }
            logger.warning("plugin call failed", metadata: metadata)
        case .suppress:
            break
        }
    }
}

extension PluginRuntime {
    /// Hands a failed call to its manager's `PluginFailureLog` (the one line
    /// `record(failure:)` adds for it).
    func noteFailure(_ failure: String) {
        (actions as? PluginManager)?.failureLog.note(plugin: spec.name, failure: failure,
                                                      failures: failureCount.load(ordering: .acquiring))
    }
}
