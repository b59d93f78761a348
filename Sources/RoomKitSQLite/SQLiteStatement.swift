import CSQLite3

/// A prepared statement, cached by its `SQLiteDatabase`. Bind with 1-based
/// indexes, step, read 0-based columns.
package final class SQLiteStatement {
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

    /// Ready to run again, with no values bound.
    package func reset() {
        sqlite3_reset(raw)
        sqlite3_clear_bindings(raw)
    }

    @discardableResult
    package func bind(_ index: Int32, _ value: Int64?) -> SQLiteStatement {
        if let value { sqlite3_bind_int64(raw, index, value) } else { sqlite3_bind_null(raw, index) }
        return self
    }

    @discardableResult
    package func bind(_ index: Int32, _ value: String?) -> SQLiteStatement {
        if let value {
            sqlite3_bind_text(raw, index, value, -1, transientDestructor)
        } else {
            sqlite3_bind_null(raw, index)
        }
        return self
    }

    /// Binds UTF-8 `bytes` as text (JSON kept without an intermediate String).
    @discardableResult
    package func bind(_ index: Int32, bytes: [UInt8]?) -> SQLiteStatement {
        guard let bytes else {
            sqlite3_bind_null(raw, index)
            return self
        }
        bytes.withUnsafeBufferPointer { buffer in
            buffer.withMemoryRebound(to: CChar.self) { chars in
                _ = sqlite3_bind_text(raw, index, chars.baseAddress, Int32(chars.count), transientDestructor)
            }
        }
        return self
    }

    /// Steps once; true when a row is available.
    package func step() throws(SQLiteError) -> Bool {
        let rc = sqlite3_step(raw)
        switch rc {
        case SQLITE_ROW: return true
        case SQLITE_DONE: return false
        default:
            throw SQLiteError(code: rc, path: database.path, context: String(sql.prefix(60)), message: database.lastMessage)
        }
    }

    /// Runs a statement that returns no rows.
    package func run() throws(SQLiteError) {
        defer { sqlite3_reset(raw) }
        while try step() {}
    }

    /// The number of columns a row of this statement has.
    package var columnCount: Int32 { sqlite3_column_count(raw) }

    package func int64(_ column: Int32) -> Int64 {
        sqlite3_column_int64(raw, column)
    }

    package func isNull(_ column: Int32) -> Bool {
        sqlite3_column_type(raw, column) == SQLITE_NULL
    }

    package func text(_ column: Int32) -> String? {
        guard let pointer = sqlite3_column_text(raw, column) else { return nil }
        return String(cString: pointer)
    }

    /// The column's bytes (for JSON parsed without an intermediate String).
    package func bytes(_ column: Int32) -> [UInt8]? {
        guard let pointer = sqlite3_column_text(raw, column) else { return nil }
        let count = Int(sqlite3_column_bytes(raw, column))
        return Array(UnsafeBufferPointer(start: pointer, count: count))
    }
}
