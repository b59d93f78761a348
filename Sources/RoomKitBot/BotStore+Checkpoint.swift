import Foundation

/// Copies the bot store's write-ahead log back into the database on a
/// thread of its own, so the event loop (which commits the store once per
/// turn) never waits for a checkpoint's fsyncs; roomd does the same
/// (`WALCheckpointer`). The store turns SQLite's auto-checkpoint off; this
/// thread runs a PASSIVE checkpoint (it never blocks the writer) every
/// `interval` over its own connection. Commits stay as durable as before:
/// each is in the WAL before it returns.
final class BotStoreCheckpointer: @unchecked Sendable {
    // @unchecked Sendable: `stopping` and `started` are guarded by `condition`;
    // `database` is used by the checkpoint thread only, once started.
    private let database: BotSQLite
    private let interval: TimeInterval
    private let condition = NSCondition()
    private var stopping = false
    private var started = false
    private let finished = DispatchSemaphore(value: 0)

    /// Opens a second connection to the store at `path`.
    init(path: String, interval: TimeInterval) throws(BotStoreError) {
        database = try BotSQLite(path: path)
        self.interval = interval
    }

    func start() {
        condition.withLock { started = true }
        let thread = Thread { [self] in run() }
        thread.name = "roombot-checkpoint"
        thread.start()
    }

    /// Stops the thread (after the checkpoint under way, if any) and closes
    /// its connection. Idempotent.
    func stop() {
        let wasRunning = condition.withLock {
            defer { stopping = true; condition.signal() }
            return started && !stopping
        }
        if wasRunning { finished.wait() } else { database.close() }
    }

    private func run() {
        condition.lock()
        while !stopping {
            _ = condition.wait(until: Date().addingTimeInterval(interval))
            if stopping { break }
            condition.unlock()
            // A failure (the writer holding a lock) is retried at the next interval.
            try? database.execute("PRAGMA wal_checkpoint(PASSIVE)")
            condition.lock()
        }
        condition.unlock()
        database.close()
        finished.signal()
    }
}
