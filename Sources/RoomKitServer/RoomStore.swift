import Foundation
import RoomKitSQLite
import RoomKitProtocol

/// One room event as stored: the push exactly as members saw it, the
/// internal mutation needed to replay it (scene operations), and the magix
/// recipients when the event was addressed.
struct StoredEvent: Sendable {
    var room: String
    var seq: Int64
    /// Server time in ms since the epoch when the event was appended.
    var ts: Int64
    /// The push's JSON text (op, room, seq and the op's fields), as sent.
    var push: [UInt8]
    /// Where a recording frame's `t` goes in `push` (`EncodedPush.timeAt`);
    /// nil for rows written before roomd kept it (schema 0).
    var timeAt: Int?
    /// What replay must apply beyond the push (scene tree changes), if anything.
    var mutation: JSON?
    /// `to` of an addressed magix event.
    var recipients: [String]?
}

/// A resumable session as stored.
struct StoredSession: Sendable {
    var id: String
    var room: String
    var userId: String
    var memberId: Int64
    var role: TokenRole
    var wantsWritable: Bool
    var tokenExpiresAt: Int64
    /// When its connection was lost (ms); nil while attached.
    var detachedAt: Int64?
    /// Whether the member is currently in the room (seen by the others).
    var visible: Bool
    /// The kick code that ended it (a later resume is refused with it).
    var endedCode: Int?
}

/// A room as loaded at start: its row, latest snapshot and later events.
struct StoredRoom: Sendable {
    var room: String
    var created: Int64
    var seq: Int64
    var snapshot: (seq: Int64, ts: Int64, body: JSON)?
    var eventsAfterSnapshot: [StoredEvent]
}

/// Durable storage of rooms, events, snapshots and sessions in one SQLite
/// database in WAL mode.
///
/// Group commit (RoomStore+Batch.swift): the first write of a loop turn opens
/// one transaction, every later write of the turn joins it, and roomd commits
/// it at the end of the turn (`commit()`) before it sends anything that turn
/// produced, so an event is still durable before any member is told about it.
///
/// `synchronous`: `NORMAL` (default) survives a process crash (`kill -9`)
/// without losing a committed transaction; `FULL` also survives power loss,
/// at the cost of an fsync per commit. Checkpoints run on a thread of their
/// own (`WALCheckpointer`). See docs/PROTOCOL.md, "Durability".
///
/// Loop thread only.
final class RoomStore {
    enum Synchronous: String, Sendable {
        case normal = "NORMAL"
        case full = "FULL"
    }

    let db: SQLiteDatabase
    let directory: String

    private let checkpointer: WALCheckpointer

    /// Whether the turn's transaction is open (a write happened since the
    /// last `commit()`/`rollback()`). See RoomStore+Batch.swift.
    var inTransaction = false
    /// When the open transaction began (`monotonicNanoseconds`).
    var openedAt: UInt64 = 0
    /// The statements every login runs, prepared once and kept here rather
    /// than looked up by their text (a hash of the SQL) each time: the event
    /// insert, a new room's and a session's save.
    private var insertStatement: SQLiteStatement?
    private var createRoomStatement: SQLiteStatement?
    private var saveSessionStatement: SQLiteStatement?
    /// Writes so far (each `atomically` body, session save or delete): the
    /// server compares it around a request to know whether the request wrote.
    var writes = 0
    /// Test seam: when set, the next `commit()` fails with it (and rolls
    /// back) instead of committing, as a full disk or an I/O error would.
    var failNextCommit: StorageError?

    /// Checkpoint failures so far (each is retried).
    var checkpointFailures: Int { checkpointer.failures }

    init(directory: String, synchronous: Synchronous = .normal,
         checkpointInterval: Duration = .milliseconds(100)) throws(StorageError) {
        self.directory = directory
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        } catch {
            throw StorageError(code: -1, path: directory, context: "create", message: "\(error.localizedDescription)")
        }
        db = try SQLiteDatabase(path: (directory as NSString).appendingPathComponent("rooms.sqlite"))
        let mode = try db.scalarText("PRAGMA journal_mode=WAL")
        guard mode?.lowercased() == "wal" else {
            throw StorageError(code: -1, path: db.path, context: "PRAGMA journal_mode=WAL", message: "database refused WAL (got \(mode ?? "nil"))")
        }
        try db.execute("PRAGMA synchronous=\(synchronous.rawValue)")
        // Checkpoints run on their own thread (WALCheckpointer), never inside
        // a commit on the loop; the WAL file is cut back to 64 MiB after each
        // reset so a burst does not leave a huge file behind.
        try db.execute("PRAGMA wal_autocheckpoint=0")
        try db.execute("PRAGMA journal_size_limit=\(64 << 20)")
        // A turn's transaction (group commit) may touch thousands of pages;
        // with SQLite's default 2 MiB cache it would spill dirty pages into
        // the WAL mid-transaction and write them again at commit.
        try db.execute("PRAGMA cache_size=-65536")
        try Self.migrate(db)
        checkpointer = try WALCheckpointer(path: db.path, interval: checkpointInterval, threadName: "roomd-checkpoint")
        checkpointer.start()
    }

    deinit {
        close()
    }

    /// Stops the checkpoint thread, then closes the database (SQLite
    /// checkpoints what is left as the last connection closes). Idempotent.
    func close() {
        if inTransaction { try? commit() }
        checkpointer.stop()
        (insertStatement, createRoomStatement, saveSessionStatement) = (nil, nil, nil)  // finalised by db.close()
        db.close()
    }

    // MARK: Rooms and events

    /// Stores a new room, with a seq-0 snapshot when `snapshotBody` is given.
    /// roomd passes none: a room without snapshots starts from an empty
    /// `RoomModel` at restore and in recordings, which is what a new room is
    /// (one insert and one serialisation less per first login).
    func createRoom(_ room: String, created: Int64, snapshotBody: JSON?) throws(StorageError) {
        let insertRoom = try kept(&createRoomStatement, "INSERT INTO rooms(room, created, seq) VALUES(?, ?, 0)")
        guard let snapshotBody else {
            // One statement, atomic by itself: no savepoint (two statements
            // more per first login).
            try beginIfNeeded()
            writes += 1
            try insertRoom.bind(1, room).bind(2, created).run()
            return
        }
        try atomically { () throws(StorageError) in
            try insertRoom.bind(1, room).bind(2, created).run()
            try db.statement("INSERT INTO snapshots(room, seq, ts, body) VALUES(?, 0, ?, ?)")
                .bind(1, room).bind(2, created).bind(3, bytes: snapshotBody.serialized()).run()
        }
    }

    /// The statement in `slot`, prepared on first use.
    private func kept(_ slot: inout SQLiteStatement?, _ sql: String) throws(StorageError) -> SQLiteStatement {
        if let statement = slot { return statement }
        let statement = try db.statement(sql)
        slot = statement
        return statement
    }

    /// Appends one event (and optionally a snapshot taken after it) atomically.
    /// The event alone is one statement, atomic by itself (SQLite takes back
    /// a failed statement and keeps the transaction): no savepoint for it.
    func append(_ event: StoredEvent, snapshotAfter: JSON? = nil) throws(StorageError) {
        if let snapshotAfter {
            try atomically { () throws(StorageError) in
                try insert(event)
                try db.statement("INSERT OR REPLACE INTO snapshots(room, seq, ts, body) VALUES(?, ?, ?, ?)")
                    .bind(1, event.room).bind(2, event.seq).bind(3, event.ts)
                    .bind(4, bytes: snapshotAfter.serialized()).run()
            }
        } else {
            try beginIfNeeded()
            writes += 1
            try insert(event)
        }
    }

    private func insert(_ event: StoredEvent) throws(StorageError) {
        try kept(&insertStatement, "INSERT INTO events(room, seq, ts, push, t_at, mutation, recipients) VALUES(?, ?, ?, ?, ?, ?, ?)")
            .bind(1, event.room).bind(2, event.seq).bind(3, event.ts)
            .bind(4, bytes: event.push)
            .bind(5, event.timeAt.map(Int64.init))
            .bind(6, bytes: event.mutation?.serialized())
            .bind(7, bytes: event.recipients.map { JSON.array($0.map(JSON.string)).serialized() })
            .run()
    }

    func loadRooms() throws(StorageError) -> [StoredRoom] {
        var rooms: [StoredRoom] = []
        // A room's seq is its newest event's (`rooms.seq`, kept up to date
        // at each commit before schema 1, is not read).
        let list = try db.statement(
            "SELECT room, created, (SELECT MAX(seq) FROM events WHERE events.room = rooms.room) FROM rooms")
        while try list.step() {
            rooms.append(StoredRoom(room: list.text(0) ?? "", created: list.int64(1), seq: list.int64(2),
                                    snapshot: nil, eventsAfterSnapshot: []))
        }
        list.reset()
        for index in rooms.indices {
            let room = rooms[index].room
            rooms[index].snapshot = try snapshot(room: room, atOrBeforeSeq: Int64.max)
            let from = rooms[index].snapshot?.seq ?? 0
            rooms[index].eventsAfterSnapshot = try events(room: room, afterSeq: from, throughSeq: Int64.max)
        }
        return rooms
    }

    /// The read queries (EventReads.swift) on the store's own connection.
    var reads: EventReads { EventReads(db: db) }

    /// The newest snapshot whose seq is at most `seq`.
    func snapshot(room: String, atOrBeforeSeq seq: Int64) throws(StorageError) -> (seq: Int64, ts: Int64, body: JSON)? {
        try reads.snapshot(room: room, atOrBeforeSeq: seq)
    }

    /// The newest snapshot taken strictly before time `ts` (EventReads).
    func snapshot(room: String, beforeTime ts: Int64) throws(StorageError) -> (seq: Int64, ts: Int64, body: JSON)? {
        try reads.snapshot(room: room, beforeTime: ts)
    }

    /// Events with `afterSeq < seq <= throughSeq`, in order.
    func events(room: String, afterSeq: Int64, throughSeq: Int64, limit: Int64 = Int64.max) throws(StorageError) -> [StoredEvent] {
        try reads.events(room: room, afterSeq: afterSeq, throughSeq: throughSeq, limit: limit)
    }

    /// How many events have `fromTime <= ts <= throughTime`.
    func countEvents(room: String, fromTime: Int64, throughTime: Int64) throws(StorageError) -> Int64 {
        try reads.countEvents(room: room, fromTime: fromTime, throughTime: throughTime)
    }

    /// Seq, time, recipients and push size of the room's last `count`
    /// events, oldest first, without reading the pushes (a restart's
    /// recovery refill, RoomServer+Recovery.swift).
    func lastEventHeads(room: String, count: Int64) throws(StorageError) -> [(seq: Int64, ts: Int64, recipients: [String]?, size: Int)] {
        let statement = try db.statement(
            "SELECT seq, ts, length(push), recipients FROM events WHERE room = ? ORDER BY seq DESC LIMIT ?")
            .bind(1, room).bind(2, count)
        defer { statement.reset() }
        var result: [(seq: Int64, ts: Int64, recipients: [String]?, size: Int)] = []
        while try statement.step() {
            var recipients: [String]?
            if let bytes = statement.bytes(3) {
                do {
                    recipients = try JSON.parse(bytes).arrayValue?.compactMap(\.stringValue)
                } catch {
                    throw StorageError(code: -1, path: db.path, context: "event \(room)#\(statement.int64(0))", message: "\(error)")
                }
            }
            result.append((statement.int64(0), statement.int64(1), recipients, Int(statement.int64(2))))
        }
        return result.reversed()
    }

    // MARK: Sessions

    func save(_ session: StoredSession) throws(StorageError) {
        try beginIfNeeded()
        writes += 1
        // An upsert, not INSERT OR REPLACE: a stored session's row is updated
        // where it is (REPLACE deletes it and inserts it again under a new
        // rowid, touching the table twice and its key index twice; a
        // restarted roomd saves every session it resumes, a million of them).
        try kept(&saveSessionStatement, """
            INSERT INTO sessions(session, room, user, member, role, wants_writable,
                token_exp, detached_at, visible, ended_code) VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            ON CONFLICT(session) DO UPDATE SET room = excluded.room, user = excluded.user, member = excluded.member,
                role = excluded.role, wants_writable = excluded.wants_writable, token_exp = excluded.token_exp,
                detached_at = excluded.detached_at, visible = excluded.visible, ended_code = excluded.ended_code
            """)
            .bind(1, session.id).bind(2, session.room).bind(3, session.userId).bind(4, session.memberId)
            .bind(5, session.role.rawValue).bind(6, session.wantsWritable ? 1 : 0)
            .bind(7, session.tokenExpiresAt).bind(8, session.detachedAt)
            .bind(9, session.visible ? 1 : 0).bind(10, session.endedCode.map(Int64.init))
            .run()
    }

    func deleteSession(_ id: String) throws(StorageError) {
        try beginIfNeeded()
        writes += 1
        try db.statement("DELETE FROM sessions WHERE session = ?").bind(1, id).run()
    }

    func loadSessions() throws(StorageError) -> [StoredSession] {
        let statement = try db.statement("""
            SELECT session, room, user, member, role, wants_writable, token_exp, detached_at, visible, ended_code
            FROM sessions
            """)
        defer { statement.reset() }
        var result: [StoredSession] = []
        while try statement.step() {
            result.append(StoredSession(
                id: statement.text(0) ?? "", room: statement.text(1) ?? "", userId: statement.text(2) ?? "",
                memberId: statement.int64(3), role: TokenRole(rawValue: statement.text(4) ?? "") ?? .reader,
                wantsWritable: statement.int64(5) != 0, tokenExpiresAt: statement.int64(6),
                detachedAt: statement.isNull(7) ? nil : statement.int64(7),
                visible: statement.int64(8) != 0,
                endedCode: statement.isNull(9) ? nil : Int(statement.int64(9))))
        }
        return result
    }

    // MARK: Fences (PROTOCOL.md §6, docs/FLEET.md)
    /// The highest fence stored for `user` in `room`, if any.
    func fence(room: String, user: String) throws(StorageError) -> Int64? {
        let statement = try db.statement("SELECT fence FROM fences WHERE room = ? AND user = ?")
            .bind(1, room).bind(2, user)
        defer { statement.reset() }
        return try statement.step() ? statement.int64(0) : nil
    }

    /// Raises the stored fence to `fence` (never lowers it), committed before
    /// it returns.
    func raiseFence(room: String, user: String, to fence: Int64) throws(StorageError) {
        try db.statement("""
            INSERT INTO fences(room, user, fence) VALUES(?, ?, ?)
            ON CONFLICT(room, user) DO UPDATE SET fence = MAX(fence, excluded.fence)
            """)
            .bind(1, room).bind(2, user).bind(3, fence).run()
    }

    /// SQLite's own consistency check ("ok" when healthy).
    func integrityCheck() throws(StorageError) -> String {
        try db.scalarText("PRAGMA integrity_check") ?? "no answer"
    }
}
