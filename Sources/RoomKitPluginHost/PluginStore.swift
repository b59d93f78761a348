import RoomKitSQLite
import Foundation
import RoomKitProtocol

/// Why a plugin-store call failed.
public enum PluginStoreError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The write would take the plugin over its quota; nothing was written.
    case full(plugin: String, used: Int, adding: Int, limit: Int)
    /// The storage itself failed (SQLite's message, naming the statement).
    case storage(String)

    public var description: String {
        switch self {
        case .full(let plugin, let used, let adding, let limit):
            return "plugin '\(plugin)' storage is full: \(used) bytes used, this write needs \(adding) more, the limit is \(limit) bytes"
        case .storage(let message):
            return "plugin storage: \(message)"
        }
    }
}

/// Where plugins' key-value data and live config overrides persist, one
/// namespace per plugin name (so a reload, which keeps the name, keeps the
/// data). The bot uses `SQLitePluginStore`; the protocol lets it move into
/// the bot's durable store later. Implementations are thread-safe.
public protocol PluginStore: Sendable {
    /// The value of `key`, or nil.
    func get(plugin: String, key: String) throws(PluginStoreError) -> String?
    /// Sets `key`; throws `.full` when the plugin's bytes (keys + values)
    /// would exceed `limit`.
    func set(plugin: String, key: String, value: String, limit: Int) throws(PluginStoreError)
    /// Removes `key`; whether it existed.
    func delete(plugin: String, key: String) throws(PluginStoreError) -> Bool
    /// Every pair whose key starts with `prefix`, by key.
    func scan(plugin: String, prefix: String) throws(PluginStoreError) -> [(key: String, value: String)]
    /// The config set live (`PUT /v1/plugins/{name}/config`), if any.
    func liveConfig(plugin: String) throws(PluginStoreError) -> JSON?
    /// Persists a live config (the JSON `{"config", "roomConfig"}`).
    func setLiveConfig(plugin: String, _ config: JSON) throws(PluginStoreError)
}

/// A `PluginStore` in memory (no persistence): for tests and for a host
/// that was given no state file.
public final class MemoryPluginStore: PluginStore, @unchecked Sendable {
    // @unchecked Sendable: every field is touched only under `lock`.
    private let lock = NSLock()
    private var data: [String: [String: String]] = [:]
    private var configs: [String: JSON] = [:]

    public init() {}

    /// `body` under `lock`, keeping its typed error.
    private func locked<T>(_ body: () throws(PluginStoreError) -> T) throws(PluginStoreError) -> T {
        lock.lock()
        defer { lock.unlock() }
        return try body()
    }

    public func get(plugin: String, key: String) throws(PluginStoreError) -> String? { lock.withLock { data[plugin]?[key] } }

    public func set(plugin: String, key: String, value: String, limit: Int) throws(PluginStoreError) {
        try locked { () throws(PluginStoreError) in
            let current = data[plugin] ?? [:]
            let used = current.reduce(0) { $0 + $1.key.utf8.count + $1.value.utf8.count }
            let replaced = current[key].map { key.utf8.count + $0.utf8.count } ?? 0
            let adding = key.utf8.count + value.utf8.count - replaced
            if adding > 0, used + adding > limit { throw .full(plugin: plugin, used: used, adding: adding, limit: limit) }
            data[plugin, default: [:]][key] = value
        }
    }

    public func delete(plugin: String, key: String) throws(PluginStoreError) -> Bool {
        lock.withLock { data[plugin]?.removeValue(forKey: key) != nil }
    }

    public func scan(plugin: String, prefix: String) throws(PluginStoreError) -> [(key: String, value: String)] {
        lock.withLock { (data[plugin] ?? [:]).filter { $0.key.hasPrefix(prefix) }.sorted { $0.key < $1.key }.map { ($0.key, $0.value) } }
    }

    public func liveConfig(plugin: String) throws(PluginStoreError) -> JSON? { lock.withLock { configs[plugin] } }

    public func setLiveConfig(plugin: String, _ config: JSON) throws(PluginStoreError) { lock.withLock { configs[plugin] = config } }
}

/// A `PluginStore` in one SQLite file (WAL): roombot's own store, beside
/// its sessions (tables `plugin_kv` and `plugin_config`). One connection,
/// serialised by a lock: plugin calls are small and come from plugin threads.
public final class SQLitePluginStore: PluginStore, @unchecked Sendable {
    // @unchecked Sendable: the connection is used only under `lock`.
    private let lock = NSLock()
    private let db: SQLiteDatabase
    /// The file, for messages.
    public var path: String { db.path }

    /// Opens (creating) `path` and its tables. Throws naming the file.
    public init(path: String) throws(PluginStoreError) {
        do {
            db = try SQLiteDatabase(path: path)
            try db.execute("""
                PRAGMA journal_mode=WAL;
                PRAGMA synchronous=NORMAL;
                CREATE TABLE IF NOT EXISTS plugin_kv (plugin TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL,
                                                      PRIMARY KEY (plugin, key)) WITHOUT ROWID;
                CREATE TABLE IF NOT EXISTS plugin_config (plugin TEXT PRIMARY KEY, json TEXT NOT NULL);
                """)
        } catch {
            throw .storage("\(error)")
        }
    }

    /// `body` under `lock`, keeping its typed error.
    private func locked<T>(_ body: () throws(PluginStoreError) -> T) throws(PluginStoreError) -> T {
        lock.lock()
        defer { lock.unlock() }
        return try body()
    }

    /// Runs `sql` with text bindings; returns the rows' text columns. A
    /// failure names the file and the statement.
    private func query(_ sql: String, _ bindings: [String]) throws(PluginStoreError) -> [[String]] {
        var rows: [[String]] = []
        do {
            try db.run(sql, bindings.map(SQLiteValue.text)) { row in
                rows.append((0..<row.columnCount).map { row.text($0) ?? "" })
            }
        } catch {
            throw .storage("\(error)")
        }
        return rows
    }

    /// `body` in one transaction; rolled back when it throws.
    private func transaction(_ body: () throws(PluginStoreError) -> Void) throws(PluginStoreError) {
        do { try db.execute("BEGIN IMMEDIATE") } catch { throw .storage("\(error)") }
        do throws(PluginStoreError) {
            try body()
            do { try db.execute("COMMIT") } catch { throw PluginStoreError.storage("\(error)") }
        } catch {
            try? db.execute("ROLLBACK")
            throw error
        }
    }

    public func get(plugin: String, key: String) throws(PluginStoreError) -> String? {
        try locked { () throws(PluginStoreError) in
            try query("SELECT value FROM plugin_kv WHERE plugin = ?1 AND key = ?2", [plugin, key]).first?.first
        }
    }

    public func set(plugin: String, key: String, value: String, limit: Int) throws(PluginStoreError) {
        try locked { () throws(PluginStoreError) in
            try transaction { () throws(PluginStoreError) in
                let used = Int(try query("SELECT COALESCE(SUM(LENGTH(CAST(key AS BLOB)) + LENGTH(CAST(value AS BLOB))), 0) FROM plugin_kv WHERE plugin = ?1",
                                         [plugin]).first?.first ?? "0") ?? 0
                let old = try query("SELECT value FROM plugin_kv WHERE plugin = ?1 AND key = ?2", [plugin, key]).first?.first
                let adding = key.utf8.count + value.utf8.count - (old.map { key.utf8.count + $0.utf8.count } ?? 0)
                if adding > 0, used + adding > limit { throw PluginStoreError.full(plugin: plugin, used: used, adding: adding, limit: limit) }
                _ = try query("INSERT INTO plugin_kv (plugin, key, value) VALUES (?1, ?2, ?3) ON CONFLICT (plugin, key) DO UPDATE SET value = excluded.value",
                              [plugin, key, value])
            }
        }
    }

    public func delete(plugin: String, key: String) throws(PluginStoreError) -> Bool {
        try locked { () throws(PluginStoreError) in
            !(try query("DELETE FROM plugin_kv WHERE plugin = ?1 AND key = ?2 RETURNING key", [plugin, key])).isEmpty
        }
    }

    public func scan(plugin: String, prefix: String) throws(PluginStoreError) -> [(key: String, value: String)] {
        try locked { () throws(PluginStoreError) in
            // substr rather than LIKE: a prefix may contain % or _.
            try query("SELECT key, value FROM plugin_kv WHERE plugin = ?1 AND substr(key, 1, length(?2)) = ?2 ORDER BY key",
                      [plugin, prefix]).map { ($0[0], $0[1]) }
        }
    }

    public func liveConfig(plugin: String) throws(PluginStoreError) -> JSON? {
        let text: String? = try locked { () throws(PluginStoreError) in
            try query("SELECT json FROM plugin_config WHERE plugin = ?1", [plugin]).first?.first
        }
        guard let text else { return nil }
        do { return try JSON.parse(text) } catch { throw .storage("\(path): plugin_config[\(plugin)] is not JSON: \(error)") }
    }

    public func setLiveConfig(plugin: String, _ config: JSON) throws(PluginStoreError) {
        try locked { () throws(PluginStoreError) in
            _ = try query("INSERT INTO plugin_config (plugin, json) VALUES (?1, ?2) ON CONFLICT (plugin) DO UPDATE SET json = excluded.json",
                          [plugin, config.jsonString])
        }
    }
}
