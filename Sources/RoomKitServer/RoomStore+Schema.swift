import RoomKitSQLite

/// The store's tables, and the migration of a database written by an
/// earlier roomd (`PRAGMA user_version` holds the schema's version).
///
/// - 0: the first schema (issue 17): events keyed (room, seq) and indexed
///   (room, ts).
/// - 1: events carry `t_at`, where a recording frame's `t` goes in the
///   stored push (`EncodedPush`; NULL in rows written before: their frames
///   are re-encoded), and the (room, ts) index is gone: a room's times grow
///   with its seq, so `EventReads.countEvents` searches by seq instead.
///   `rooms.seq` is no longer written at each commit (a room's seq is its
///   newest event's).
extension RoomStore {
    /// The schema this roomd writes.
    static let schemaVersion: Int64 = 1

    /// Creates the tables of a new database, or brings an older one up to
    /// `schemaVersion` in one transaction. A database from a newer roomd is
    /// refused (its rows may mean what this one does not know).
    static func migrate(_ db: SQLiteDatabase) throws(StorageError) {
        let version = Int64(try db.scalarText("PRAGMA user_version") ?? "0") ?? 0
        guard version <= Self.schemaVersion else {
            throw StorageError(code: -1, path: db.path, context: "PRAGMA user_version",
                               message: "schema version \(version) is newer than this roomd's (\(Self.schemaVersion)); use a newer roomd")
        }
        try db.transaction { () throws(SQLiteError) in
            try db.execute("""
                CREATE TABLE IF NOT EXISTS rooms(
                    room TEXT PRIMARY KEY, created INTEGER NOT NULL, seq INTEGER NOT NULL);
                CREATE TABLE IF NOT EXISTS events(
                    room TEXT NOT NULL, seq INTEGER NOT NULL, ts INTEGER NOT NULL,
                    push TEXT NOT NULL, mutation TEXT, recipients TEXT,
                    PRIMARY KEY(room, seq)) WITHOUT ROWID;
                CREATE TABLE IF NOT EXISTS snapshots(
                    room TEXT NOT NULL, seq INTEGER NOT NULL, ts INTEGER NOT NULL, body TEXT NOT NULL,
                    PRIMARY KEY(room, seq)) WITHOUT ROWID;
                CREATE TABLE IF NOT EXISTS sessions(
                    session TEXT PRIMARY KEY, room TEXT NOT NULL, user TEXT NOT NULL,
                    member INTEGER NOT NULL, role TEXT NOT NULL, wants_writable INTEGER NOT NULL,
                    token_exp INTEGER NOT NULL, detached_at INTEGER, visible INTEGER NOT NULL,
                    ended_code INTEGER);
                CREATE TABLE IF NOT EXISTS fences(
                    room TEXT NOT NULL, user TEXT NOT NULL, fence INTEGER NOT NULL,
                    PRIMARY KEY(room, user)) WITHOUT ROWID;
                """)
            if version < 1 {
                try db.execute("ALTER TABLE events ADD COLUMN t_at INTEGER")
                try db.execute("DROP INDEX IF EXISTS events_by_time")
            }
            try db.execute("PRAGMA user_version = \(Self.schemaVersion)")
        }
    }
}
