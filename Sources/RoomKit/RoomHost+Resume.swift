import RoomKitLoop
import RoomKitProtocol

/// Why a room's continuity broke.
public enum ResyncReason: String, Sendable, Hashable, CaseIterable {
    /// A resume kept the session but the server no longer held every missed
    /// event (`recovered: false`): its snapshot was adopted.
    case notRecovered
    /// The server no longer retained the session (past `sessionRetention`,
    /// e.g. after a long restart): a fresh login with a new session and
    /// memberId, and its snapshot was adopted.
    case sessionExpired
    /// The server refused to resume the stored session (kicked, token
    /// refused): the host logged in fresh and adopted the snapshot.
    case resumeRefused
    /// `RECONNECT_FAILED`: the session is over; nothing after
    /// `lastAppliedSeq` will be raised unless the room is logged in again.
    case reconnectFailed
}

/// A gap in a room's event stream (`RoomEvent.resync`): the events after
/// `lastAppliedSeq` up to `resumedAtSeq` were never raised and never will
/// be. An app or plugin that keeps state derived from the events rebuilds
/// it from the room's current state (already in the cache when this fires).
public struct ResyncEvent: Sendable, Hashable {
    /// The room ID.
    public let room: String
    public let reason: ResyncReason
    /// The newest seq this host had applied (and raised) before the gap.
    public let lastAppliedSeq: Int64
    /// The seq of the snapshot adopted, or nil when the session ended
    /// (`reconnectFailed`).
    public let resumedAtSeq: Int64?

    /// Creates a resync event.
    public init(room: String, reason: ResyncReason, lastAppliedSeq: Int64, resumedAtSeq: Int64?) {
        self.room = room
        self.reason = reason
        self.lastAppliedSeq = lastAppliedSeq
        self.resumedAtSeq = resumedAtSeq
    }
}

extension RoomHost {
    /// Before a login: takes the stored cursor of the room, if it belongs to
    /// `record.user`, so the login resumes it. The cache shows the stored
    /// room until the reply arrives. Loop thread only.
    func restoreCursor(_ record: SessionRecord) {
        guard let store = configuration.sessionStore, record.session == nil,
              let cursor = store.cursor(room: record.room.id) else { return }
        guard cursor.user.id == record.user.id else {
            logger.info("stored session belongs to another user; logging in fresh",
                        metadata: ["room": "\(record.room.id)", "stored": "\(cursor.user.id)"])
            store.save(SessionStoreChanges(removed: [record.room.id]))
            return
        }
        record.restored = cursor
        record.lastSeq = cursor.seq
        record.room.update { content in
            content.state = cursor.snapshot.state
            content.members = cursor.snapshot.members
            content.streams = cursor.snapshot.streams
            content.extraInfo = cursor.snapshot.extraInfo
            content.memberId = cursor.memberId
            content.seq = cursor.seq
            content.writable = cursor.writable
        }
        logger.debug("resuming a stored session", metadata: ["room": "\(record.room.id)", "seq": .stringConvertible(cursor.seq)])
    }

    /// A stored resume was refused: log in fresh, and report the gap when
    /// that login succeeds. Loop thread only.
    func abandonRestoredCursor(_ record: SessionRecord, _ error: RoomError) {
        guard let cursor = record.restored else { return }
        logger.info("stored session not resumable; logging in fresh",
                    metadata: ["room": "\(record.room.id)", "code": .stringConvertible(error.code.rawValue)])
        record.restored = nil
        record.pendingResync = (.resumeRefused, cursor.seq)
        transmitLogin(record, resume: false)
    }

    /// Records that `record`'s cursor changed; the store hears of it once,
    /// at the end of this loop turn. Loop thread only.
    func cursorChanged(_ record: SessionRecord) {
        guard !record.cursorDirty, configuration.sessionStore != nil else { return }
        if dirtyCursors.isEmpty {
            if !loop.execute({ [self] in flushCursors() }) { return }
        }
        record.cursorDirty = true
        dirtyCursors.append(record)
    }

    /// Hands every cursor changed so far to the `SessionStore` now, in one
    /// `save`, instead of at the end of this loop turn. For a store that
    /// records something that must agree with the cursors (roombot records
    /// the event log's length: every event in it must be covered). Loop
    /// thread only; nothing happens when no cursor changed.
    public func saveSessionCursorsNow() {
        loop.preconditionInEventLoop()
        flushCursors()
    }

    /// Hands the turn's changed cursors to the store in one `save`.
    func flushCursors() {
        guard let store = configuration.sessionStore, !dirtyCursors.isEmpty else { return }
        var changes = SessionStoreChanges()
        for record in dirtyCursors {
            record.cursorDirty = false
            let id = record.room.id
            guard let session = record.session, record.machine.isLoggedIn else {
                changes.removed.append(id)
                continue
            }
            let content = record.room.content
            guard let memberId = content.memberId else { continue }
            changes.updated.append(SessionCursor(
                room: id, session: session, memberId: memberId, seq: record.lastSeq, user: record.user,
                writable: content.writable,
                snapshot: RoomSnapshot(state: content.state, members: content.members, streams: content.streams,
                                       extraInfo: content.extraInfo)))
        }
        dirtyCursors.removeAll(keepingCapacity: true)
        store.save(changes)
    }

    /// Raises `resync` for `record`'s room.
    func emitResync(_ record: SessionRecord, _ reason: ResyncReason, lastApplied: Int64, resumedAt: Int64?) {
        logger.info("room continuity broke", metadata: [
            "room": "\(record.room.id)", "reason": "\(reason.rawValue)", "lastAppliedSeq": "\(lastApplied)",
            "resumedAtSeq": "\(resumedAt.map(String.init) ?? "-")",
        ])
        emit(.resync(ResyncEvent(room: record.room.id, reason: reason, lastAppliedSeq: lastApplied, resumedAtSeq: resumedAt)),
             room: record.room)
    }
}
