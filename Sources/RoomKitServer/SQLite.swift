import CSQLite3
import Foundation

/// A failed SQLite call, naming what was being done and SQLite's message.
public struct StorageError: Error, CustomStringConvertible, Sendable {
    /// SQLite's result code.
    public let code: Int32
    /// What we were doing, e.g. `open /data/rooms.sqlite` or `INSERT INTO events`.
    public let context: String
    /// SQLite's error text.
    public let message: String

    public var description: String { "\(context): \(message) (sqlite \(code))" }
}

/// The transient-destructor marker: SQLite copies bound text at once.
private let SQLITE_TRANSIENT = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

/// One SQLite connection, used from one thread at a time (the event loop).
///
/// A thin wrapper: prepared statements are cached by SQL text, and every
/// failure becomes a `StorageError` naming the statement.
final class SQLiteDatabase {
    private var handle: OpaquePointer?
    private var statements: [String: Statement] = [:]
    let path: String

    init(path: String) throws(StorageError) {
        self.path = path
        var db: OpaquePointer?
        let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX
        let rc = sqlite3_open_v2(path, &db, flags, nil)
        guard rc == SQLITE_OK, let db else {
            let message = db.map { String(cString: sqlite3_errmsg($0)) } ?? "cannot open"
            sqlite3_close(db)
            throw StorageError(code: rc, context: "open \(path)", message: message)
        }
        handle = db
        sqlite3_busy_timeout(db, 5000)
    }

    deinit {
        close()
    }

    func close() {
        for statement in statements.values { statement.finalize() }
        statements.removeAll()
        if let handle { sqlite3_close_v2(handle) }
        handle = nil
    }

    /// Runs one or more statements that return no rows.
    func execute(_ sql: String) throws(StorageError) {
        var error: UnsafeMutablePointer<CChar>?
        let rc = sqlite3_exec(handle, sql, nil, nil, &error)
        if rc != SQLITE_OK {
            let message = error.map { String(cString: $0) } ?? lastMessage
            sqlite3_free(error)
            throw StorageError(code: rc, context: String(sql.prefix(60)), message: message)
        }
    }

    /// A cached prepared statement for `sql`, reset and unbound.
    func statement(_ sql: String) throws(StorageError) -> Statement {
        if let cached = statements[sql] {
            cached.reset()
            return cached
        }
        var raw: OpaquePointer?
        let rc = sqlite3_prepare_v2(handle, sql, -1, &raw, nil)
        guard rc == SQLITE_OK, let raw else {
            throw StorageError(code: rc, context: "prepare \(sql.prefix(60))", message: lastMessage)
        }
        let statement = Statement(raw, sql: sql, database: self)
        statements[sql] = statement
        return statement
    }

    /// Runs `body` in one transaction; rolls back when it throws.
    func transaction<T>(_ body: () throws(StorageError) -> T) throws(StorageError) -> T {
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
    func scalarText(_ sql: String) throws(StorageError) -> String? {
        let statement = try self.statement(sql)
        defer { statement.reset() }
        guard try statement.step() else { return nil }
        return statement.text(0)
    }

    var lastMessage: String {
        handle.map { String(cString: sqlite3_errmsg($0)) } ?? "closed"
    }
}

/// A prepared statement. Bind with 1-based indexes, step, read 0-based columns.
final class Statement {
    private let raw: OpaquePointer
    private let sql: String
    private unowned let database: SQLiteDatabase

    init(_ raw: OpaquePointer, sql: String, database: SQLiteDatabase) {
        self.raw = raw
        self.sql = sql
        self.database = database
    }

    func finalize() {
        sqlite3_finalize(raw)
    }

    func reset() {
        sqlite3_reset(raw)
        sqlite3_clear_bindings(raw)
    }

    @discardableResult
    func bind(_ index: Int32, _ value: Int64?) -> Statement {
        if let value { sqlite3_bind_int64(raw, index, value) } else { sqlite3_bind_null(raw, index) }
        return self
    }

    @discardableResult
    func bind(_ index: Int32, _ value: String?) -> Statement {
        if let value {
            sqlite3_bind_text(raw, index, value, -1, SQLITE_TRANSIENT)
        } else {
            sqlite3_bind_null(raw, index)
        }
        return self
    }

    @discardableResult
    func bind(_ index: Int32, bytes: [UInt8]?) -> Statement {
        guard let bytes else {
            sqlite3_bind_null(raw, index)
            return self
        }
        bytes.withUnsafeBufferPointer { buffer in
            buffer.withMemoryRebound(to: CChar.self) { chars in
                _ = sqlite3_bind_text(raw, index, chars.baseAddress, Int32(chars.count), SQLITE_TRANSIENT)
            }
        }
        return self
    }

    /// Steps once; true when a row is available.
    func step() throws(StorageError) -> Bool {
        let rc = sqlite3_step(raw)
        switch rc {
        case SQLITE_ROW: return true
        case SQLITE_DONE: return false
        default:
            throw StorageError(code: rc, context: String(sql.prefix(60)), message: database.lastMessage)
        }
    }

    /// Runs a statement that returns no rows.
    func run() throws(StorageError) {
        defer { sqlite3_reset(raw) }
        while try step() {}
    }

    func int64(_ column: Int32) -> Int64 {
        sqlite3_column_int64(raw, column)
    }

    func isNull(_ column: Int32) -> Bool {
        sqlite3_column_type(raw, column) == SQLITE_NULL
    }

    func text(_ column: Int32) -> String? {
        guard let pointer = sqlite3_column_text(raw, column) else { return nil }
        return String(cString: pointer)
    }

    /// The column's bytes (for JSON parsed without an intermediate String).
    func bytes(_ column: Int32) -> [UInt8]? {
        guard let pointer = sqlite3_column_text(raw, column) else { return nil }
        let count = Int(sqlite3_column_bytes(raw, column))
        return Array(UnsafeBufferPointer(start: pointer, count: count))
    }
}
