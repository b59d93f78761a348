import CSQLite3
import Foundation

/// A failed SQLite call of the bot's store, naming the file, what was being
/// done, and SQLite's message.
public struct BotStoreError: Error, Sendable, CustomStringConvertible {
    public let path: String
    public let context: String
    public let message: String
    public var description: String { "\(path): \(context): \(message)" }
}

/// The transient-destructor marker: SQLite copies bound text at once.
private let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

/// The few SQLite calls the bot's store needs: one connection, used under
/// the store's lock (never concurrently). roomd has its own wrapper in
/// RoomKitServer, which the bot must not depend on.
final class BotSQLite {
    private var handle: OpaquePointer?
    private var cache: [String: OpaquePointer] = [:]
    let path: String

    init(path: String) throws(BotStoreError) {
        self.path = path
        var db: OpaquePointer?
        let rc = sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nil)
        guard rc == SQLITE_OK, let db else {
            let message = db.map { String(cString: sqlite3_errmsg($0)) } ?? "cannot open"
            sqlite3_close(db)
            throw BotStoreError(path: path, context: "open", message: message)
        }
        handle = db
        sqlite3_busy_timeout(db, 2000)
    }

    deinit { close() }

    func close() {
        for statement in cache.values { sqlite3_finalize(statement) }
        cache.removeAll()
        if let handle { sqlite3_close_v2(handle) }
        handle = nil
    }

    /// Runs statements that return no rows.
    func execute(_ sql: String) throws(BotStoreError) {
        var error: UnsafeMutablePointer<CChar>?
        guard sqlite3_exec(handle, sql, nil, nil, &error) == SQLITE_OK else {
            let message = error.map { String(cString: $0) } ?? lastMessage
            sqlite3_free(error)
            throw BotStoreError(path: path, context: String(sql.prefix(60)), message: message)
        }
    }

    /// Runs `sql` with `values` bound (Int64, String, nil), calling `row` for each result row.
    func run(_ sql: String, _ values: [BotSQLValue] = [], row: ((BotSQLRow) -> Void)? = nil) throws(BotStoreError) {
        let statement: OpaquePointer
        if let cached = cache[sql] {
            statement = cached
        } else {
            var raw: OpaquePointer?
            guard sqlite3_prepare_v2(handle, sql, -1, &raw, nil) == SQLITE_OK, let raw else {
                throw BotStoreError(path: path, context: "prepare \(sql.prefix(60))", message: lastMessage)
            }
            cache[sql] = raw
            statement = raw
        }
        defer { sqlite3_reset(statement); sqlite3_clear_bindings(statement) }
        for (index, value) in values.enumerated() {
            let position = Int32(index + 1)
            switch value {
            case .int(let number): sqlite3_bind_int64(statement, position, number)
            case .text(let text): sqlite3_bind_text(statement, position, text, -1, transient)
            case .null: sqlite3_bind_null(statement, position)
            }
        }
        while true {
            let rc = sqlite3_step(statement)
            if rc == SQLITE_DONE { return }
            guard rc == SQLITE_ROW else {
                throw BotStoreError(path: path, context: String(sql.prefix(60)), message: lastMessage)
            }
            row?(BotSQLRow(statement: statement))
        }
    }

    /// Runs `body` in one transaction; rolls back when it throws.
    func transaction(_ body: () throws(BotStoreError) -> Void) throws(BotStoreError) {
        try execute("BEGIN IMMEDIATE")
        do {
            try body()
            try execute("COMMIT")
        } catch {
            try? execute("ROLLBACK")
            throw error
        }
    }

    private var lastMessage: String { handle.map { String(cString: sqlite3_errmsg($0)) } ?? "closed" }
}

/// A value bound to a statement.
enum BotSQLValue {
    case int(Int64)
    case text(String)
    case null
}

/// The current row of a statement (0-based columns), valid during the callback.
struct BotSQLRow {
    let statement: OpaquePointer
    func int(_ column: Int32) -> Int64 { sqlite3_column_int64(statement, column) }
    func text(_ column: Int32) -> String {
        sqlite3_column_text(statement, column).map { String(cString: $0) } ?? ""
    }
}
