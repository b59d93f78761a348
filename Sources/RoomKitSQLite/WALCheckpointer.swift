import Foundation

/// Copies a database's write-ahead log back into it on a thread of its own,
/// so the writer's thread (roomd's or roombot's event loop) never waits for
/// a checkpoint's fsyncs.
///
/// With SQLite's default auto-checkpoint, the commit that pushes the WAL past
/// 1,000 pages runs the checkpoint itself, on the committing thread, fsyncing
/// the WAL and the database while every connection waits: stalls in the tail
/// latency. A store turns auto-checkpoint off and this thread runs a PASSIVE
/// checkpoint (it never blocks the writer, and the writer never waits for it)
/// every `interval` over its own connection. Commits stay as durable as
/// before: each is in the WAL before it returns.
package final class WALCheckpointer: @unchecked Sendable {
    // @unchecked Sendable: `stopping`, `started` and `failed` are guarded by
    // `condition`; `database` is used by the checkpoint thread only once started.
    private let database: SQLiteDatabase
    private let interval: TimeInterval
    private let threadName: String
    private let condition = NSCondition()
    private var stopping = false
    private var started = false
    private var failed = 0
    private let finished = DispatchSemaphore(value: 0)

    /// Checkpoints that failed so far (each is retried at the next interval).
    package var failures: Int { condition.withLock { failed } }

    /// Opens a second connection to the database at `path`. `threadName`
    /// names the thread in `top -H` and debuggers.
    package init(path: String, interval: Duration, threadName: String) throws(SQLiteError) {
        database = try SQLiteDatabase(path: path)
        let (seconds, attoseconds) = interval.components
        self.interval = max(0.001, Double(seconds) + Double(attoseconds) / 1e18)
        self.threadName = threadName
    }

    package func start() {
        condition.withLock { started = true }
        let thread = Thread { [self] in run() }
        thread.name = threadName
        thread.start()
    }

    /// Stops the thread (after the checkpoint under way, if any) and closes
    /// its connection. Idempotent.
    package func stop() {
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
            let ok = (try? database.execute("PRAGMA wal_checkpoint(PASSIVE)")) != nil
            condition.lock()
            if !ok { failed += 1 }
        }
        condition.unlock()
        database.close()
        finished.signal()
    }
}
