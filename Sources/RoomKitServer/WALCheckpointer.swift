import Foundation
import RoomKitLoop

/// Copies the write-ahead log back into the database on a thread of its own,
/// so the event loop never waits for a checkpoint's fsyncs.
///
/// With SQLite's default auto-checkpoint, the commit that pushes the WAL past
/// 1,000 pages runs the checkpoint itself, on the loop thread, fsyncing the
/// WAL and the database while every connection waits: the stalls behind
/// roomd's tail latency. The store turns auto-checkpoint off and this thread
/// runs a PASSIVE checkpoint (it never blocks the writer, and the writer never
/// waits for it) every `interval` over its own connection. Commits stay as
/// durable as before: each is in the WAL before it returns.
final class WALCheckpointer: @unchecked Sendable {
    // @unchecked Sendable: `stopping` is guarded by `condition`; `db` is used
    // by the checkpoint thread only once started.
    private let db: SQLiteDatabase
    private let interval: TimeInterval
    private let condition = NSCondition()
    private var stopping = false
    private var started = false
    private let finished = DispatchSemaphore(value: 0)
    private let failureCount = LockedValue(0)

    /// Checkpoints that failed so far (each is retried at the next interval).
    var failures: Int { failureCount.withLock { $0 } }

    /// Opens a second connection to the database at `path`.
    init(path: String, interval: Duration) throws(StorageError) {
        db = try SQLiteDatabase(path: path)
        self.interval = Double(max(1, interval.milliseconds)) / 1000
    }

    func start() {
        condition.withLock { started = true }
        let thread = Thread { [self] in run() }
        thread.name = "roomd-checkpoint"
        thread.start()
    }

    /// Stops the thread (after the checkpoint under way, if any) and closes
    /// its connection. Idempotent.
    func stop() {
        let wasRunning = condition.withLock {
            defer { stopping = true; condition.signal() }
            return started && !stopping
        }
        if wasRunning { finished.wait() }
    }

    private func run() {
        condition.lock()
        while !stopping {
            _ = condition.wait(until: Date().addingTimeInterval(interval))
            if stopping { break }
            condition.unlock()
            do {
                try db.execute("PRAGMA wal_checkpoint(PASSIVE)")
            } catch {
                failureCount.withLock { $0 += 1 }
            }
            condition.lock()
        }
        condition.unlock()
        db.close()
        finished.signal()
    }
}
