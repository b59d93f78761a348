import RoomKitLoop
import RoomKitProtocol

/// Where a room session stands, as a `SessionStore` keeps it: enough to resume
/// the session after the process restarts (PROTOCOL.md §6) and to show the
/// room's state before the missed events arrive.
public struct SessionCursor: Sendable, Hashable {
    /// The room ID.
    public var room: String
    /// The server's session ID (`s-…`), sent as `resume.session`.
    public var session: String
    /// The session's member ID in the room.
    public var memberId: Int64
    /// The newest room seq this host applied: sent as `resume.seq`; every
    /// event up to it has been raised and must never be raised again.
    public var seq: Int64
    /// The user the session belongs to.
    public var user: LoginUser
    /// Whether the session was writable.
    public var writable: Bool
    /// The room as the host held it at `seq` (state, members, streams,
    /// extra info). A recovered resume sends only the missed events, so a
    /// restarted host starts from this.
    public var snapshot: RoomSnapshot

    /// Creates a cursor.
    public init(room: String, session: String, memberId: Int64, seq: Int64, user: LoginUser, writable: Bool,
                snapshot: RoomSnapshot) {
        self.room = room
        self.session = session
        self.memberId = memberId
        self.seq = seq
        self.user = user
        self.writable = writable
        self.snapshot = snapshot
    }
}

/// The cursors that changed in one loop turn.
public struct SessionStoreChanges: Sendable, Hashable {
    /// Sessions whose cursor moved (new session, applied events, writable…).
    public var updated: [SessionCursor] = []
    /// Rooms whose session ended (logout, kick, failure): forget their cursor.
    public var removed: [String] = []

    /// Creates a change set.
    public init(updated: [SessionCursor] = [], removed: [String] = []) {
        self.updated = updated
        self.removed = removed
    }

    /// Whether nothing changed.
    public var isEmpty: Bool { updated.isEmpty && removed.isEmpty }
}

/// Keeps session cursors across restarts of the host (the seam a bot host
/// fills with a durable store; `RoomHostConfiguration.sessionStore`).
///
/// Both methods are called on the host's loop thread. `save` is called at
/// most once per loop turn, carrying every cursor that changed in it, so a
/// durable store costs one write per turn, never one per event. Everything
/// the host raised before a `save` returned is covered by that save's seqs.
/// Cursors are keyed by room ID: give each `RoomHost` a store of its own.
public protocol SessionStore: AnyObject, Sendable {
    /// The stored cursor of `room`, if any. `loginRoom` asks before it logs
    /// in; a cursor for the same user is resumed instead of a fresh login.
    func cursor(room: String) -> SessionCursor?
    /// Records one loop turn's changes.
    func save(_ changes: SessionStoreChanges)
}

/// A `SessionStore` in memory: for embedders that restart a `RoomHost`
/// inside one process (and for tests). Safe from any thread.
public final class InMemorySessionStore: SessionStore {
    private let state = LockedValue<(cursors: [String: SessionCursor], saves: Int)>(([:], 0))

    /// Creates an empty store.
    public init() {}

    public func cursor(room: String) -> SessionCursor? {
        state.withLock { $0.cursors[room] }
    }

    public func save(_ changes: SessionStoreChanges) {
        state.withLock { state in
            state.saves += 1
            for cursor in changes.updated { state.cursors[cursor.room] = cursor }
            for room in changes.removed { state.cursors.removeValue(forKey: room) }
        }
    }

    /// Every stored cursor, by room.
    public var cursors: [String: SessionCursor] { state.withLock { $0.cursors } }

    /// How many times `save` was called (one per loop turn with changes).
    public var saveCount: Int { state.withLock { $0.saves } }
}
