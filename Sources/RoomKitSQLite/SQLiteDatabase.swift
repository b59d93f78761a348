import CSQLite3
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A failed SQLite call: the file, what was being done, and SQLite's message.
public struct SQLiteError: Error, CustomStringConvertible, Sendable {
    /// SQLite's result code (`SQLITE_BUSY`, …); 0 when the failure is not SQLite's own.
    public let code: Int32
    /// The database file.
    public let path: String
    /// What was being done, e.g. `open` or the statement's first 60 characters.
    public let context: String
    /// SQLite's error text.
    public let message: String

    public init(code: Int32, path: String, context: String, message: String) {
        self.code = code
        self.path = path
        self.context = context
        self.message = message
    }

    public var description: String { "\(path): \(context): \(message)" }
}

/// The transient-destructor marker: SQLite copies bound text at once.
let transientDestructor = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

/// A value bound to a statement by `SQLiteDatabase.run`.
package enum SQLiteValue {
    case int(Int64)
    case text(String)
    /// UTF-8 text given as bytes (JSON written straight into a buffer).
    case textBytes([UInt8])
    case null
}

/// One SQLite connection, used from one thread at a time (its owner's lock
/// or loop thread; SQLite is opened without its own mutex).
///
/// The one wrapper every RoomKit store uses (roombot's state, plugin
/// storage): prepared statements are cached by SQL text, and every failure
/// is an `SQLiteError` naming the file and the statement.
package final class SQLiteDatabase {
    private var handle: OpaquePointer?
    private var statements: [String: SQLiteStatement] = [:]
    /// The file, for messages.
    package let path: String

    /// Opens (creating) `path`. `busyTimeoutMilliseconds`: how long a write
    /// waits for another connection's lock before failing with SQLITE_BUSY.
    ///
    /// A new file is created 0600 (owner only) whatever the umask: it holds
    /// rooms, sessions and cursors. SQLite gives its `-wal` and `-shm` files
    /// the main file's permissions, so they are 0600 too.
    package init(path: String, busyTimeoutMilliseconds: Int32 = 5000) throws(SQLiteError) {
        self.path = path
        Self.createPrivately(path)
        var db: OpaquePointer?
        let rc = sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nil)
        guard rc == SQLITE_OK, let db else {
            let message = db.map { String(cString: sqlite3_errmsg($0)) } ?? "cannot open"
            sqlite3_close(db)
            throw SQLiteError(code: rc, path: path, context: "open", message: message)
        }
        handle = db
        sqlite3_busy_timeout(db, busyTimeoutMilliseconds)
    }

    /// Creates `path` empty with mode 0600 when it does not exist (SQLite
    /// would create it 0644 under the usual umask). An in-memory or temporary
    /// database (`:memory:`, empty path, `file:` URI) is left to SQLite.
    package static func createPrivately(_ path: String) {
        guard !path.isEmpty, path != ":memory:", !path.hasPrefix("file:") else { return }
        createOwnerOnly(path)
    }

    deinit { close() }

    /// Finalises the cached statements and closes the connection. Idempotent.
    package func close() {
        for statement in statements.values { statement.finalize() }
        statements.removeAll()
        if let handle { sqlite3_close_v2(handle) }
        handle = nil
    }

    /// Runs one or more statements that return no rows.
    package func execute(_ sql: String) throws(SQLiteError) {
        var error: UnsafeMutablePointer<CChar>?
        let rc = sqlite3_exec(handle, sql, nil, nil, &error)
        if rc != SQLITE_OK {
            let message = error.map { String(cString: $0) } ?? lastMessage
            sqlite3_free(error)
            throw SQLiteError(code: rc, path: path, context: String(sql.prefix(60)), message: message)
        }
    }

    /// A cached prepared statement for `sql`, reset and unbound.
    package func statement(_ sql: String) throws(SQLiteError) -> SQLiteStatement {
        if let cached = statements[sql] {
            cached.reset()
            return cached
        }
        var raw: OpaquePointer?
        let rc = sqlite3_prepare_v2(handle, sql, -1, &raw, nil)
        guard rc == SQLITE_OK, let raw else {
            throw SQLiteError(code: rc, path: path, context: "prepare \(sql.prefix(60))", message: lastMessage)
        }
        let statement = SQLiteStatement(raw, sql: sql, database: self)
        statements[sql] = statement
        return statement
    }

    /// Runs `sql` with `values` bound in order, calling `row` for each result
    /// row (read its 0-based columns during the call).
    package func run(_ sql: String, _ values: [SQLiteValue] = [],
                     row: ((SQLiteStatement) throws(SQLiteError) -> Void)? = nil) throws(SQLiteError) {
        let statement = try self.statement(sql)
        defer { statement.reset() }
        for (index, value) in values.enumerated() {
            let position = Int32(index + 1)
            switch value {
            case .int(let number): statement.bind(position, number)
            case .text(let text): statement.bind(position, text)
            case .textBytes(let bytes): statement.bind(position, bytes: bytes)
            case .null: statement.bind(position, nil as Int64?)
            }
        }
        while try statement.step() { try row?(statement) }
    }

    /// Runs `body` in one transaction (`BEGIN IMMEDIATE`: the write lock is
    /// taken up front); rolls back when it throws.
    package func transaction<T>(_ body: () throws(SQLiteError) -> T) throws(SQLiteError) -> T {
        try execute("BEGIN IMMEDIATE")
        do {
            let result = try body()
            try execute("COMMIT")
            return result
        } catch {
            try? execute("ROLLBACK")
            throw error
        }
    }

    /// A single text value from a one-row query (PRAGMAs).
    package func scalarText(_ sql: String) throws(SQLiteError) -> String? {
        let statement = try self.statement(sql)
        defer { statement.reset() }
        guard try statement.step() else { return nil }
        return statement.text(0)
    }

    /// SQLite's message for the last failure on this connection.
    package var lastMessage: String {
        handle.map { String(cString: sqlite3_errmsg($0)) } ?? "closed"
    }
}

/// Creates `path` with mode 0600 unless it exists (outside the class: its
/// `close()` would shadow the system call).
private func createOwnerOnly(_ path: String) {
    let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
    guard fd >= 0 else { return }
    _ = fchmod(fd, 0o600)  // the umask only takes bits away; explicit anyway
    close(fd)
}
