import Foundation
import RoomKitSQLite
import Logging
import RoomKit
import RoomKitLoop
import RoomKitProtocol
import Synchronization

/// roombot's durable store: one SQLite file (WAL) per bot holding the room
/// set (configured and joined at run time), every session's cursor, and how
/// much of the event log those cursors cover. A restarted bot resumes its
/// sessions from it (`SessionStore`), so a crash within the server's
/// heartbeat timeout is invisible to the other members.
///
/// Durability: every change is one transaction (`synchronous=NORMAL` in WAL
/// mode), so `kill -9` at any moment leaves the last committed state; power
/// loss may lose the last transactions, never the file. Checkpoints run on a
/// thread of their own (`WALCheckpointer`), never inside a commit. Safe to copy while
/// the bot is stopped; delete it (and its `-wal`/`-shm`) to reset the bot.
///
/// Thread safety: every call takes the store's lock; the engine calls
/// `cursor(room:)` and `save(_:)` on the loop thread, the control API calls
/// the room-set methods from its tasks.
public final class BotStore: SessionStore, @unchecked Sendable {
    // @unchecked Sendable: `database` and `stored` are only touched under `lock`.
    public let path: String
    private let lock = NSLock()
    private let database: SQLiteDatabase
    /// Each stored cursor's fingerprint (its snapshot and user, hashed), by
    /// room: a save that moves only the seq need not encode the room
    /// again. The cursors themselves stay in the file (`cursor(room:)`
    /// reads one when its room logs in): a copy of each in memory was about
    /// 300 bytes a room (issue #26).
    private var stored: [String: Int] = [:]
    /// The last row's user and snapshot, read or written (`RowMemo`).
    private var memo = RowMemo()
    private let logger: Logger
    /// Reports the event log's size after the lines written so far (nil: no file log).
    /// Read with `current`, never `withLock { $0 }`: that writes a closure
    /// back one reabstraction thunk deeper per read, so each save walked a
    /// chain as long as the saves before it (13% of the bot's samples while
    /// it logged in to 300,000 rooms, issue #26; `LockedValue.current`).
    private let eventLogSize = LockedValue<(@Sendable () -> Int64?)?>(nil)
    /// The event-log size the last commit covered.
    private var committedLogSize: Int64?
    /// Whether an end-of-turn commit of the event log's size is queued.
    private let logCommitPending = LockedValue(false)
    private let checkpointer: WALCheckpointer

    /// Opens (creating if needed) the store at `path`.
    public init(path: String, logger: Logger) throws(BotStoreError) {
        self.path = path
        self.logger = logger
        database = try SQLiteDatabase(path: path, busyTimeoutMilliseconds: 2000)
        try database.execute("""
            PRAGMA journal_mode=WAL;
            PRAGMA synchronous=NORMAL;
            PRAGMA wal_autocheckpoint=0;
            PRAGMA journal_size_limit=4194304;
            CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
            CREATE TABLE IF NOT EXISTS rooms(room TEXT PRIMARY KEY, origin TEXT NOT NULL);
            CREATE TABLE IF NOT EXISTS cursors(
                room TEXT PRIMARY KEY, session TEXT NOT NULL, member_id INTEGER NOT NULL, seq INTEGER NOT NULL,
                user TEXT NOT NULL, writable INTEGER NOT NULL, snapshot TEXT NOT NULL, saved_at INTEGER NOT NULL);
            INSERT OR IGNORE INTO meta(key, value) VALUES ('schema', '1');
            """)
        // Only the rooms: a row is decoded when its room logs in (`cursor(room:)`),
        // which learns its fingerprint then. Decoding every row here took
        // a fifth of a restarted bot's CPU before its first login, and a
        // million rows are a million JSON snapshots (issue #26).
        var loaded: [String: Int] = [:]
        try database.run("SELECT room FROM cursors") { row in
            loaded[row.text(0) ?? ""] = Self.unknownFingerprint
        }
        stored = loaded
        checkpointer = try WALCheckpointer(path: path, interval: .seconds(1), threadName: "roombot-checkpoint")
        checkpointer.start()
    }

    deinit {
        checkpointer.stop()
    }

    // MARK: SessionStore (loop thread)

    public func cursor(room: String) -> SessionCursor? {
        lock.withLock {
            guard stored[room] != nil else { return nil }
            var found: SessionCursor?
            var unreadable = false
            try? database.run("SELECT room, session, member_id, seq, user, writable, snapshot FROM cursors WHERE room = ?",
                              [.text(room)]) { row in
                found = self.cursor(row)
                unreadable = found == nil
            }
            if unreadable {
                // Left in the file: the room's next save replaces it (its fingerprint stays unknown).
                logger.warning("unreadable stored session ignored", metadata: ["store": "\(path)", "room": "\(room)"])
            }
            if let found { stored[room] = memo.fingerprint }
            return found
        }
    }

    /// A row of `cursors` (room, session, member_id, seq, user, writable,
    /// snapshot), or nil when it cannot be read. Its user and snapshot
    /// become the memo's (read from it when the text is the memo's).
    private func cursor(_ row: SQLiteStatement) -> SessionCursor? {
        guard let userText = row.bytes(4), let snapshotText = row.bytes(6) else { return nil }
        if !memo.holds(userText: userText, snapshotText: snapshotText) {
            guard let user = try? JSON.parse(userText), let id = user["id"]?.stringValue,
                  let fields = try? JSON.parse(snapshotText).objectValue,
                  let snapshot = try? RoomSnapshot(replyFields: fields) else { return nil }
            memo = RowMemo(user: LoginUser(id: id, name: user["name"]?.stringValue, payload: user["payload"]), userText: userText,
                           snapshot: snapshot, snapshotText: snapshotText)
        }
        guard let user = memo.user, let snapshot = memo.snapshot else { return nil }
        return SessionCursor(
            room: row.text(0) ?? "", session: row.text(1) ?? "", memberId: row.int64(2), seq: row.int64(3),
            user: user, writable: row.int64(5) != 0, snapshot: snapshot)
    }

    /// The last row's user and snapshot, as values and as text, and their
    /// fingerprint. A bot's rooms mostly share both (one user; the initial
    /// state and the bot as their member until they diverge), so a save or
    /// a read of the same pair again neither encodes, parses nor hashes it:
    /// a million rooms' first saves, and a restarted bot's million reads.
    /// The text is always one that reads as the values.
    private struct RowMemo {
        var user: LoginUser?
        var userText: [UInt8] = []
        var snapshot: RoomSnapshot?
        var snapshotText: [UInt8] = []
        /// Whether the texts are there: a pair to save is encoded only when a
        /// whole row is written (a save that moves only the seq needs just
        /// the fingerprint).
        var encoded = false
        var fingerprint = BotStore.unknownFingerprint

        init() {}

        /// The pair read from `userText` and `snapshotText`.
        init(user: LoginUser, userText: [UInt8], snapshot: RoomSnapshot, snapshotText: [UInt8]) {
            self.init(user: user, snapshot: snapshot)
            (self.userText, self.snapshotText, encoded) = (userText, snapshotText, true)
        }

        /// The pair to save; encoded by `encode` when needed.
        init(user: LoginUser, snapshot: RoomSnapshot) {
            (self.user, self.snapshot) = (user, snapshot)
            fingerprint = BotStore.fingerprint(snapshot: snapshot, user: user)
        }

        /// Encodes the pair's texts, once.
        mutating func encode() {
            guard !encoded, let user, let snapshot else { return }
            userText = []
            user.appendJSON(to: &userText)
            snapshotText = snapshot.replyFieldsJSON()
            encoded = true
        }

        func holds(userText: [UInt8], snapshotText: [UInt8]) -> Bool {
            encoded && self.userText == userText && self.snapshotText == snapshotText
        }

        /// Whether the memo is this pair. Equal values that share storage
        /// (the rooms of one login reply memo, `SnapshotMemo`) compare at once.
        func holds(user: LoginUser, snapshot: RoomSnapshot) -> Bool {
            self.user == user && self.snapshot == snapshot
        }
    }

    /// What a save compares to know whether the stored snapshot and user still hold.
    private static func fingerprint(snapshot: RoomSnapshot, user: LoginUser) -> Int {
        var hasher = Hasher()
        hasher.combine(snapshot)
        hasher.combine(user)
        let value = hasher.finalize()
        return value == unknownFingerprint ? value &+ 1 : value
    }

    /// The fingerprint of a stored row not decoded yet: no save matches it,
    /// so the room's first save writes the whole row.
    private static let unknownFingerprint = Int.min

    /// One transaction per loop turn: the changed cursors and the event-log
    /// size they cover. A failure is logged; the previous commit stays.
    public func save(_ changes: SessionStoreChanges) {
        let size = eventLogSize.current?()
        lock.withLock {
            var fingerprints: [Int] = []
            fingerprints.reserveCapacity(changes.updated.count)
            do {
                let now = Int64(Date().timeIntervalSince1970 * 1000)
                try database.transaction { () throws(BotStoreError) in
                    for cursor in changes.updated {
                        if !memo.holds(user: cursor.user, snapshot: cursor.snapshot) {
                            memo = RowMemo(user: cursor.user, snapshot: cursor.snapshot)
                        }
                        let fingerprint = memo.fingerprint
                        fingerprints.append(fingerprint)
                        // Most turns only move the seq (magix, own requests): keep the stored
                        // snapshot rather than encode the room again.
                        if stored[cursor.room] == fingerprint {
                            try database.run("""
                                UPDATE cursors SET session = ?, member_id = ?, seq = ?, writable = ?, saved_at = ? WHERE room = ?
                                """, [.text(cursor.session), .int(cursor.memberId), .int(cursor.seq),
                                      .int(cursor.writable ? 1 : 0), .int(now), .text(cursor.room)])
                            continue
                        }
                        memo.encode()
                        try database.run("""
                            INSERT OR REPLACE INTO cursors(room, session, member_id, seq, user, writable, snapshot, saved_at)
                            VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                            """, [.text(cursor.room), .text(cursor.session), .int(cursor.memberId), .int(cursor.seq),
                                  .textBytes(memo.userText), .int(cursor.writable ? 1 : 0),
                                  .textBytes(memo.snapshotText), .int(now)])
                    }
                    for room in changes.removed {
                        try database.run("DELETE FROM cursors WHERE room = ?", [.text(room)])
                    }
                    if let size, size != committedLogSize {
                        try database.run("INSERT OR REPLACE INTO meta(key, value) VALUES ('eventLogSize', ?)", [.text(String(size))])
                    }
                }
                if let size { committedLogSize = size }
                for (cursor, fingerprint) in zip(changes.updated, fingerprints) { stored[cursor.room] = fingerprint }
                for room in changes.removed { stored.removeValue(forKey: room) }
            } catch {
                logger.error("session store not written", metadata: ["store": "\(path)", "error": "\(error)"])
            }
        }
    }

    // MARK: The event log's committed length

    /// Cuts `eventLog` back to the length the last commit covered, before the
    /// bot writes to it: lines past it were written after the store's last
    /// commit (the crashed loop turn), and the room events among them will
    /// be delivered again by the resume. Call before the log is opened.
    public func reconcile(eventLog: String) {
        lock.withLock {
            var stored: Int64?
            var storedPath: String?
            try? database.run("SELECT key, value FROM meta WHERE key IN ('eventLogSize', 'eventLogPath')") { row in
                if row.text(0) == "eventLogSize" { stored = row.text(1).flatMap { Int64($0) } } else { storedPath = row.text(1) ?? "" }
            }
            let actual = (try? FileManager.default.attributesOfItem(atPath: eventLog)[.size] as? NSNumber)?.int64Value
            if let stored, storedPath == eventLog, let actual, actual > stored, let file = FileHandle(forWritingAtPath: eventLog) {
                logger.info("event log cut back to the store's last commit",
                            metadata: ["events": "\(eventLog)", "from": "\(actual)", "to": "\(stored)"])
                try? file.truncate(atOffset: UInt64(stored))
                try? file.close()
            }
            try? database.run("INSERT OR REPLACE INTO meta(key, value) VALUES ('eventLogPath', ?)", [.text(eventLog)])
            committedLogSize = nil
        }
    }

    /// From now on each commit records the event log's size as `size` reports it.
    public func follow(eventLogSize size: @escaping @Sendable () -> Int64?) {
        eventLogSize.withLock { $0 = size }
    }

    /// Notes that the event log was written in this loop turn: its size is
    /// committed once at the end of the turn (if no cursor commit did).
    /// `saveCursors` runs first, so the cursors of every event in the log
    /// are committed with (or before) its length. Loop thread.
    public func eventLogWritten(on loop: EventLoop, saveCursors: @escaping @Sendable () -> Void) {
        let first = logCommitPending.withLock { pending -> Bool in
            defer { pending = true }
            return !pending
        }
        guard first else { return }
        let accepted = loop.execute { [self] in
            logCommitPending.withLock { $0 = false }
            saveCursors()
            commitEventLog()
        }
        if !accepted { logCommitPending.withLock { $0 = false } }
    }

    /// Commits the event log's size when lines were written without a cursor
    /// change (call at the end of a loop turn that wrote lines).
    public func commitEventLog() {
        guard let size = eventLogSize.current?() else { return }
        let pending = lock.withLock { size != committedLogSize }
        if pending { save(SessionStoreChanges()) }
    }

    // MARK: The room set (any thread)

    /// The rooms to be in: the configured ones (recorded as such) and those
    /// joined at run time. Configured rooms no longer configured are dropped.
    public func rooms(configured: [String]) -> [String] {
        lock.withLock {
            var joined: [String] = []
            do {
                try database.transaction { () throws(BotStoreError) in
                    try database.run("DELETE FROM rooms WHERE origin = 'config'")
                    for room in configured {
                        try database.run("INSERT OR IGNORE INTO rooms(room, origin) VALUES (?, 'config')", [.text(room)])
                    }
                }
                try database.run("SELECT room FROM rooms WHERE origin = 'joined' ORDER BY room") { joined.append($0.text(0) ?? "") }
            } catch {
                logger.error("room set not read", metadata: ["store": "\(path)", "error": "\(error)"])
            }
            return configured + joined.filter { !configured.contains($0) && RoomID.isValid($0) }
        }
    }

    /// The rooms joined at run time.
    public var joinedRooms: [String] {
        lock.withLock {
            var joined: [String] = []
            try? database.run("SELECT room FROM rooms WHERE origin = 'joined' ORDER BY room") { joined.append($0.text(0) ?? "") }
            return joined
        }
    }

    /// Records a room joined (or left) at run time. Configured rooms stay configured.
    public func setJoined(_ room: String, _ joined: Bool) throws(BotStoreError) {
        lock.lock()
        defer { lock.unlock() }
        if joined {
            try database.run("INSERT OR IGNORE INTO rooms(room, origin) VALUES (?, 'joined')", [.text(room)])
        } else {
            try database.run("DELETE FROM rooms WHERE room = ? AND origin = 'joined'", [.text(room)])
        }
    }

    /// Imports the rooms of the JSON state file of earlier versions, once:
    /// afterwards the file is never read again (it is left in place).
    public func migrate(legacyStateFile: String) {
        lock.withLock {
            var done = false
            try? database.run("SELECT 1 FROM meta WHERE key = 'migratedStateFile'") { _ in done = true }
            guard !done else { return }
            let rooms = BotStateFile(path: legacyStateFile).load()
            do {
                try database.transaction { () throws(BotStoreError) in
                    for room in rooms {
                        try database.run("INSERT OR IGNORE INTO rooms(room, origin) VALUES (?, 'joined')", [.text(room)])
                    }
                    try database.run("INSERT OR REPLACE INTO meta(key, value) VALUES ('migratedStateFile', ?)", [.text(legacyStateFile)])
                }
                if !rooms.isEmpty {
                    logger.info("rooms imported from the old state file", metadata: ["from": "\(legacyStateFile)", "rooms": .stringConvertible(rooms.count)])
                }
            } catch {
                logger.error("old state file not imported", metadata: ["from": "\(legacyStateFile)", "error": "\(error)"])
            }
        }
    }

    /// SQLite's `PRAGMA integrity_check` result (`ok` when sound).
    public func integrityCheck() -> String {
        lock.withLock {
            var lines: [String] = []
            try? database.run("PRAGMA integrity_check") { lines.append($0.text(0) ?? "") }
            return lines.joined(separator: "\n")
        }
    }

    /// Closes the file (the bot is stopping). Idempotent.
    public func close() {
        checkpointer.stop()
        lock.withLock { database.close() }
    }
}
