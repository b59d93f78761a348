import RoomKit
import RoomKitLoop
import RoomKitProtocol
import RoomKitRedis

/// The `SessionStore` of a fleet host: cursors come from Redis
/// (`cursor:<room>`, read when a shard is claimed) and go back to Redis in
/// one batch per renew tick (`FleetCoordinator.flushCursors`), never one
/// write per event.
///
/// Thread safety: the engine calls `cursor(room:)` and `save(_:)` on the
/// loop thread; the coordinator runs there too. The lock only makes the
/// type `Sendable` honestly.
public final class FleetSessionStore: SessionStore, @unchecked Sendable {
    // @unchecked Sendable: both dictionaries are only touched under `state`'s lock.
    /// An empty store.
    public init() {}

    private let state = LockedValue<(handed: [String: SessionCursor], dirty: [String: SessionCursor?])>(([:], [:]))

    /// The cursor a claimed shard's previous owner left for `room`, consumed
    /// by the login that resumes it.
    public func cursor(room: String) -> SessionCursor? {
        state.withLock { $0.handed.removeValue(forKey: room) }
    }

    /// Keeps the changes for the next renew tick's one write.
    public func save(_ changes: SessionStoreChanges) {
        state.withLock { state in
            for cursor in changes.updated { state.dirty[cursor.room] = .some(cursor) }
            for room in changes.removed { state.dirty[room] = .some(nil) }
        }
    }

    /// Offers the previous owner's cursor for the next login of its room.
    func handOver(_ cursor: SessionCursor) {
        state.withLock { $0.handed[cursor.room] = cursor }
    }

    /// The handed-over cursor still waiting for `room`'s login, if any.
    func handedOver(room: String) -> SessionCursor? {
        state.withLock { $0.handed[room] }
    }

    /// Drops handed-over cursors (the shard was lost before the login).
    func forget(rooms: some Sequence<String>) {
        state.withLock { state in for room in rooms { state.handed.removeValue(forKey: room) } }
    }

    /// The changes since the last call: room → cursor, or nil when the
    /// session ended.
    func takeDirty() -> [String: SessionCursor?] {
        state.withLock { state in
            defer { state.dirty = [:] }
            return state.dirty
        }
    }

    /// The Redis fields of a cursor (all text): session, memberId, seq, user,
    /// writable, snapshot.
    static func fields(_ cursor: SessionCursor) -> [String] {
        [cursor.session, String(cursor.memberId), String(cursor.seq), cursor.user.json.jsonString,
         cursor.writable ? "1" : "0", JSON.object(cursor.snapshot.replyFields).jsonString]
    }

    /// Parses an `HGETALL cursor:<room>` reply; nil when empty or unreadable.
    static func cursor(room: String, hash: [RedisValue]) -> SessionCursor? {
        var fields: [String: String] = [:]
        var index = 0
        while index + 1 < hash.count {
            if let key = hash[index].string, let value = hash[index + 1].string { fields[key] = value }
            index += 2
        }
        guard let session = fields["session"], let memberId = fields["memberId"].flatMap({ Int64($0) }),
              let seq = fields["seq"].flatMap({ Int64($0) }),
              let user = fields["user"].flatMap({ try? JSON.parse(Array($0.utf8)) }), let id = user["id"]?.stringValue,
              let object = fields["snapshot"].flatMap({ try? JSON.parse(Array($0.utf8)).objectValue }),
              let snapshot = try? RoomSnapshot(replyFields: object) else { return nil }
        return SessionCursor(room: room, session: session, memberId: memberId, seq: seq,
                             user: LoginUser(id: id, name: user["name"]?.stringValue, payload: user["payload"]),
                             writable: fields["writable"] == "1", snapshot: snapshot)
    }
}
