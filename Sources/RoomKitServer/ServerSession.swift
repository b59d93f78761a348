import RoomKitLoop
import RoomKitProtocol
import RoomKitServerCore

/// One member's session in one room: survives its connection for
/// `sessionRetention`, and stays visible to the others until
/// `heartbeatTimeout` after its connection's last message. Its state
/// (attached, detached, ended; visible; token expiry) and every rule that
/// changes it are the shared `SessionRules` (RoomKitServerCore), which the
/// simulator's server uses too; this class adds what only roomd has (the
/// room, the role, the link). Loop thread only.
final class ServerSession {
    let id: String
    unowned let room: ServerRoom
    let userId: String
    let memberId: Int64
    var role: TokenRole
    /// What the client asked for (login `writable`, later `setWritable`).
    var wantsWritable: Bool
    /// The session rules: feed it every input, do what it answers.
    var rules: SessionRules
    /// The connection it is attached to; nil while detached.
    ///
    /// Not `weak`: a weak reference gives every `ClientLink` a side table,
    /// and then every retain and release of a link (several per delivery in
    /// the fan-out) takes the runtime's slow path (issue #26: ~53% of
    /// batched roomd's samples). Not counted either: the link's lifetime is
    /// guaranteed by its owner instead. A link lives in `RoomServer.links`
    /// until `closed`, and `closed` detaches every session attached through
    /// it (`detachSessions`, then `clearDangling` should any be left); each
    /// assignment keeps `ClientLink.attachedSessions` exact, so a link that
    /// is closed with a session still pointing at it is found and cleared,
    /// and one freed so would stop the process (`ClientLink.deinit`) rather
    /// than leave a dangling reference. Loop thread only.
    unowned(unsafe) var link: ClientLink? {
        didSet {
            oldValue?.attachedSessions -= 1
            link?.attachedSessions += 1
        }
    }

    init(id: String, room: ServerRoom, userId: String, memberId: Int64, role: TokenRole,
         wantsWritable: Bool, rules: SessionRules) {
        self.id = id
        self.room = room
        self.userId = userId
        self.memberId = memberId
        self.role = role
        self.wantsWritable = wantsWritable
        self.rules = rules
    }

    deinit {
        // A session dropped while attached (a room reloaded after a failed
        // commit, say) no longer points at its link.
        link?.attachedSessions -= 1
    }

    /// Token expiry, ms since the epoch.
    var tokenExpiresAt: Int64 { rules.tokenExpiresAt }
    /// Whether the others see it as a member.
    var visible: Bool { rules.visible }
    /// The kick code that ended it; a resume is then refused with this code.
    var endedCode: ErrorCode? { rules.endedCode }

    /// Whether the session may change the room (role and the client's wish).
    var writable: Bool { role.canWrite && wantsWritable }

    var stored: StoredSession {
        StoredSession(id: id, room: room.id, userId: userId, memberId: memberId, role: role,
                      wantsWritable: wantsWritable, tokenExpiresAt: rules.tokenExpiresAt,
                      detachedAt: rules.detachedAt, visible: rules.visible, endedCode: rules.endedCode?.rawValue)
    }
}

/// One client connection: greeting, liveness, rate limit, and its sessions
/// (at most one per room). Loop thread only.
final class ClientLink: WebSocketDelegate {
    let id: String
    let connection: WebSocketConnection
    /// Strong on purpose: while a connection lives, its server (and so its
    /// rooms and sessions) stays alive even if the owner dropped the
    /// RoomServer without stop(); the cycle ends when the connection closes.
    let server: RoomServer
    var greeted = false
    var lastMessageAt: Int64
    /// Set by `sweep` when the heartbeat timeout passed: the link's sessions
    /// are already detached and nothing it still delivers is read.
    var timedOut = false
    /// Room ID → session attached through this connection.
    var sessions: [String: ServerSession] = [:]
    /// Requests (messages with `id`), PROTOCOL.md §1.
    var requests: RateBucket
    /// Everything else the client sends (pings, malformed or id-less text,
    /// binary frames): the same numbers, so a flood that never asks for a
    /// reply is closed 1008 like a request flood (docs/PROTOCOL.md).
    var unsolicited: RateBucket
    /// Batched messages, when the hello asked for them (PushBatcher.swift).
    var batch = LinkBatch()
    /// How many sessions have this link as their `link` (kept by
    /// `ServerSession.link`'s observer): zero once `closed` has run.
    var attachedSessions = 0

    init(connection: WebSocketConnection, server: RoomServer, now: Int64) {
        id = randomIdentifier("c-")
        self.connection = connection
        self.server = server
        lastMessageAt = now
        requests = RateBucket(server.rateLimits, now: now)
        unsolicited = RateBucket(server.rateLimits, now: now)
    }

    deinit {
        // `ServerSession.link` is unowned(unsafe): a session still pointing
        // here would be a dangling reference. `RoomServer.closed` clears them
        // all before the server lets go of a link, so this never fires.
        precondition(attachedSessions == 0, "connection \(id) freed with \(attachedSessions) sessions attached")
    }

    func webSocket(_ connection: WebSocketConnection, didReceive message: WebSocketMessage) {
        server.received(message, on: self)
    }

    func webSocket(_ connection: WebSocketConnection, didCloseWith event: WebSocketCloseEvent) {
        server.closed(self, event)
    }

    /// Sends a JSON message (encoded for this connection only).
    func send(_ json: JSON) {
        send(WebSocketFrame(bytes: json.serialized()))
    }

    /// Sends a shared frame, or holds it until the turn's transaction has
    /// committed when one is open (group commit: nothing a turn produced
    /// leaves before the turn is durable; `RoomServer.commitPending`).
    /// `kind` says what to do with it if that commit fails.
    func send(_ frame: WebSocketFrame, kind: HeldSend.Kind = .plain) {
        if server.store.inTransaction {
            // A batching connection's messages wait in its batch, unreleased
            // until the commit (PushBatcher.swift); nothing it was sent
            // earlier is still in `held` (the hello reply that turned
            // batching on left `held` before anything else could follow it).
            if batch.isOn { return hold(frame, unreleased: kind) }
            server.held.append(HeldSend(link: self, frame: frame, kind: kind))
            return
        }
        deliver(frame)
    }

    /// Writes a frame now (or, on a batching connection, holds it for the
    /// turn's batch: PushBatcher.swift); enforces the outbound cap (close 1013).
    func deliver(_ frame: WebSocketFrame) {
        if batch.holds(frame) { return hold(frame) }
        guard connection.send(frame) else { return }
        server.metrics.bytesOut += frame.count
        if connection.bufferedAmount > server.configuration.maxOutboundBytes {
            server.logger.warning("closing slow connection", metadata: ["connection": "\(id)", "queued": "\(connection.bufferedAmount)"])
            connection.close(code: 1013, reason: "outbound queue over limit", discardQueued: true)
        }
    }
}

/// A room on the server: its model, sequence, sessions and recovery buffer.
/// Loop thread only.
final class ServerRoom {
    let id: String
    let created: Int64
    var seq: Int64
    var model: RoomModel
    /// Retained sessions by session ID (attached, detached or ended).
    var sessions: [String: ServerSession] = [:]
    /// Recent events for resume (RecoveryBuffer.swift).
    var recovery = RecoveryBuffer()
    var eventsSinceSnapshot = 0

    init(id: String, created: Int64, seq: Int64, model: RoomModel) {
        self.id = id
        self.created = created
        self.seq = seq
        self.model = model
    }

    /// Sessions currently attached to a connection.
    var attached: some Sequence<ServerSession> {
        sessions.values.lazy.filter { $0.link != nil }
    }

    var visibleCount: Int { model.snapshot.members.count }

    /// The oldest seq a resume can recover from (events after it are all recoverable).
    var recoverableAfter: Int64 { recovery.recoverableAfter(roomSeq: seq) }
}
