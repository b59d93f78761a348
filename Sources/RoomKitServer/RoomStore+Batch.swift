/// Group commit: one SQLite transaction per loop turn, or per
/// `commitDeadline` of a long turn (RoomServer+Commit.swift).
///
/// The first write after a commit opens the transaction (`BEGIN IMMEDIATE`);
/// each multi-statement write runs inside it under a savepoint, so a write
/// that fails (a constraint, a trigger) takes back only its own statements
/// and the turn's other writes stay. `commit()` makes the whole turn durable
/// at once: with `synchronous=NORMAL` one WAL append per turn instead of one
/// per event (and with `FULL` one fsync per turn). Loop thread only.
extension RoomStore {
    /// Opens the turn's transaction unless it is open.
    func beginIfNeeded() throws(StorageError) {
        guard !inTransaction else { return }
        try db.statement("BEGIN IMMEDIATE").run()
        inTransaction = true
        openedAt = monotonicNanoseconds()
    }

    /// Runs `body` (several statements) as one unit inside the turn's
    /// transaction: all of it or, when it throws, none of it.
    func atomically(_ body: () throws(StorageError) -> Void) throws(StorageError) {
        try beginIfNeeded()
        writes += 1
        try db.statement("SAVEPOINT write").run()
        do {
            try body()
            try db.statement("RELEASE write").run()
        } catch {
            try? db.statement("ROLLBACK TO write").run()
            try? db.statement("RELEASE write").run()
            throw error
        }
    }

    /// Runs `body`'s reads in one read transaction: one snapshot, one WAL
    /// read lock. Outside one, each statement takes and drops that lock
    /// (fcntl calls on the -shm file), and restoring 300,000 rooms ran
    /// over a million statements: fcntl was 12% of roomd's start (issue
    /// #26: a roomd killed under a million sessions). Inside the turn's
    /// transaction, `body` just runs in it.
    func reading<T>(_ body: () throws -> T) throws -> T {
        guard !inTransaction else { return try body() }
        try db.statement("BEGIN").run()
        defer { try? db.statement("COMMIT").run() }
        return try body()
    }

    /// Commits the turn's transaction, if one is open. On failure the
    /// transaction is rolled back (nothing of the turn is stored) and the
    /// error is thrown.
    func commit() throws(StorageError) {
        guard inTransaction else { return }
        inTransaction = false
        do throws(StorageError) {
            if let injected = failNextCommit {
                failNextCommit = nil
                throw injected
            }
            try db.statement("COMMIT").run()
        } catch {
            try? db.statement("ROLLBACK").run()
            throw error
        }
    }
}
