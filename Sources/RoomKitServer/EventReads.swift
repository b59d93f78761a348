import RoomKitProtocol
import RoomKitSQLite

/// The read queries on the event log and its snapshots, over one SQLite
/// connection: the store's own on the loop thread, or a recording
/// download's connection on its reader thread (`RecordingDownload`). One
/// copy of the SQL and of the row decoding for both.
///
/// Used by one thread at a time: whoever owns `db`.
struct EventReads {
    let db: SQLiteDatabase

    /// The newest snapshot taken strictly before time `ts`: it holds only
    /// events older than `ts` (a snapshot is stamped with its last event's time,
    /// so one stamped `ts` would hide an event a recording from `ts` must show).
    func snapshot(room: String, beforeTime ts: Int64) throws(StorageError) -> (seq: Int64, ts: Int64, body: JSON)? {
        let statement = try db.statement(
            "SELECT seq, ts, body FROM snapshots WHERE room = ? AND ts < ? ORDER BY seq DESC LIMIT 1")
            .bind(1, room).bind(2, ts)
        defer { statement.reset() }
        guard try statement.step() else { return nil }
        return try decodeSnapshot(statement)
    }

    /// The newest snapshot whose seq is at most `seq`.
    func snapshot(room: String, atOrBeforeSeq seq: Int64) throws(StorageError) -> (seq: Int64, ts: Int64, body: JSON)? {
        let statement = try db.statement(
            "SELECT seq, ts, body FROM snapshots WHERE room = ? AND seq <= ? ORDER BY seq DESC LIMIT 1")
            .bind(1, room).bind(2, seq)
        defer { statement.reset() }
        guard try statement.step() else { return nil }
        return try decodeSnapshot(statement)
    }

    func decodeSnapshot(_ statement: SQLiteStatement) throws(StorageError) -> (seq: Int64, ts: Int64, body: JSON) {
        let body: JSON
        do {
            body = try JSON.parse(statement.bytes(2) ?? [])
        } catch {
            throw StorageError(code: -1, path: db.path, context: "snapshot body", message: "\(error)")
        }
        return (statement.int64(0), statement.int64(1), body)
    }

    /// Events with `afterSeq < seq <= throughSeq`, in order: at most `limit`
    /// of them, and no more once their pushes reach `maxBytes` (at least
    /// one), so a batch of large events stays small in memory.
    func events(room: String, afterSeq: Int64, throughSeq: Int64, limit: Int64 = Int64.max,
                maxBytes: Int = .max) throws(StorageError) -> [StoredEvent] {
        let statement = try db.statement(
            "SELECT seq, ts, push, mutation, recipients, t_at FROM events WHERE room = ? AND seq > ? AND seq <= ? ORDER BY seq LIMIT ?")
            .bind(1, room).bind(2, afterSeq).bind(3, throughSeq).bind(4, limit)
        defer { statement.reset() }
        var result: [StoredEvent] = []
        var bytes = 0
        while bytes < maxBytes, try statement.step() {
            let event = try decodeEvent(room: room, statement)
            bytes += event.push.count
            result.append(event)
        }
        return result
    }

    /// How many events have `fromTime <= ts <= throughTime` (a recording
    /// slice's `framesCount`). A room's times never decrease with its seq
    /// (roomd stamps an event no earlier than the one before it), so this is
    /// the distance between two binary searches over seq on the primary key:
    /// no time index, which cost every append a second B-tree insert.
    func countEvents(room: String, fromTime: Int64, throughTime: Int64) throws(StorageError) -> Int64 {
        guard fromTime <= throughTime else { return 0 }
        let first = try firstSeq(room: room, atOrAfterTime: fromTime)
        let after = throughTime == .max ? Int64.max : try firstSeq(room: room, atOrAfterTime: throughTime + 1)
        guard first != .max else { return 0 }
        if after == .max {
            return try lastSeq(room: room) - first + 1
        }
        return after - first
    }

    /// The first seq whose event has `ts >= time` (`Int64.max`: none): a
    /// binary search for the least `x` whose next stored event (at or after
    /// `x`; seqs have no gaps, but one would not matter) is that late.
    private func firstSeq(room: String, atOrAfterTime time: Int64) throws(StorageError) -> Int64 {
        let last = try lastSeq(room: room)
        guard last > 0, let newest = try event(room: room, atOrAfter: last), newest.ts >= time else { return .max }
        var low: Int64 = 0
        var high = last
        while low < high {
            let mid = low + (high - low) / 2
            if let found = try event(room: room, atOrAfter: mid), found.ts >= time {
                high = mid
            } else {
                low = mid + 1
            }
        }
        return try event(room: room, atOrAfter: low)?.seq ?? .max
    }

    private func lastSeq(room: String) throws(StorageError) -> Int64 {
        let statement = try db.statement("SELECT MAX(seq) FROM events WHERE room = ?").bind(1, room)
        defer { statement.reset() }
        guard try statement.step(), !statement.isNull(0) else { return 0 }
        return statement.int64(0)
    }

    private func event(room: String, atOrAfter seq: Int64) throws(StorageError) -> (seq: Int64, ts: Int64)? {
        let statement = try db.statement("SELECT seq, ts FROM events WHERE room = ? AND seq >= ? ORDER BY seq LIMIT 1")
            .bind(1, room).bind(2, seq)
        defer { statement.reset() }
        guard try statement.step() else { return nil }
        return (statement.int64(0), statement.int64(1))
    }

    func decodeEvent(room: String, _ statement: SQLiteStatement) throws(StorageError) -> StoredEvent {
        var mutation: JSON?
        var recipients: [String]?
        do {
            if let bytes = statement.bytes(3) { mutation = try JSON.parse(bytes) }
            if let bytes = statement.bytes(4) {
                recipients = try JSON.parse(bytes).arrayValue?.compactMap(\.stringValue)
            }
        } catch {
            throw StorageError(code: -1, path: db.path, context: "event \(room)#\(statement.int64(0))", message: "\(error)")
        }
        return StoredEvent(room: room, seq: statement.int64(0), ts: statement.int64(1),
                           push: statement.bytes(2) ?? [], timeAt: statement.isNull(5) ? nil : Int(statement.int64(5)),
                           mutation: mutation, recipients: recipients)
    }
}
