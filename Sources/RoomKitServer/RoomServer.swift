import Foundation
import Logging
import RoomKitLoop
import RoomKitProtocol

/// Counters behind `/metrics`. Loop thread only.
struct ServerMetrics {
    var eventsTotal = 0
    var bytesOut = 0
    var kicks = 0
    var authFailures = 0
    /// Messages without `id` that arrived over the rate limit.
    var unsolicitedOverLimit = 0
    /// Requests refused 1009004.
    var requestsOverLimit = 0
    /// Group commits (one per loop turn that wrote), and those that failed.
    var commits = 0
    var commitFailures = 0
    var eventsPerSecond = 0.0
    var lastRateSample: (at: Int64, events: Int) = (0, 0)
    /// WebSocket messages and their bytes received from clients.
    var messagesIn = 0
    var bytesIn = 0
    /// Error replies and error messages sent, by protocol error code.
    var errors: [Int: Int] = [:]
    /// Closed client connections, by close code (1006: none).
    var disconnects: [UInt16: Int] = [:]
    /// Logins that asked to resume a session, by outcome
    /// (`recovered`, `resumed`, `expired`; see RoomServer+Metrics).
    var recoveries: [String: Int] = [:]

    /// Counts one error sent to a client.
    mutating func sent(_ error: ProtocolError) { errors[error.code.rawValue, default: 0] += 1 }
}

/// The reference room server (`roomd`): PROTOCOL.md over one WebSocket/HTTP
/// listener, with rooms, sessions and the event log in SQLite.
///
/// Create and use it on the loop thread. `stop()` closes every connection
/// with 1001 (members stay: to clients a restart is a blip), then stops
/// listening and closes storage.
public final class RoomServer: WebServerDelegate, @unchecked Sendable {
    // @unchecked Sendable: loop thread only (asserted at entry points).

    public let configuration: ServerConfiguration
    let loop: EventLoop
    let logger: Logger
    let store: RoomStore
    let signer: TokenSigner
    var rooms: [String: ServerRoom] = [:]
    var links: [ObjectIdentifier: ClientLink] = [:]
    var metrics = ServerMetrics()
    /// Rate limit of the "token rejected" lines (RoomServer+AuthLog.swift).
    var tokenRejectionLog = LogBudget(limit: RoomServer.tokenRejectionLogLimit, interval: RoomServer.tokenRejectionLogInterval)
    /// Recording downloads in flight (RoomServer+Recording.swift).
    var recordings = RecordingDownloads()
    /// Bytes of pushes held by every room's recovery buffer (RoomServer+Recovery.swift).
    var recoveryBytes = 0
    /// `/metrics` (RoomServer+Metrics.swift): histograms, process metrics, the registry.
    let exporter: ServerMetricsExporter
    /// The admin/metrics listener (RoomServer+Admin.swift), when configured.
    var adminWeb: WebServer?
    private var sweeper: LoopTimer?
    /// Commits the turn's transaction at the end of every loop turn.
    var turnHook: LoopTurnHook?
    /// What this turn sent while its transaction was open, in order: held
    /// until it commits (RoomServer+Commit.swift). Loop thread only.
    var held: [HeldSend] = []
    /// The server's lifecycle (Hummingbird's `Server` shape): each state
    /// carries what only it needs. Loop thread only.
    private var state = State.stopped
    let startedAt: Int64

    private enum State {
        /// Accepting connections.
        case running(WebServer)
        /// `stop()` closed every connection with 1001 and waits for their
        /// close frames (or its grace timer) before closing storage.
        case stopping(WebServer, graceTimer: LoopTimer?, completions: [() -> Void])
        /// Not listening; storage closed.
        case stopped
    }

    /// The listener, until the server has stopped.
    var web: WebServer? {
        switch state {
        case .running(let web), .stopping(let web, _, _): return web
        case .stopped: return nil
        }
    }

    /// Whether `stop()` (or the loop's shutdown) has begun.
    var stopping: Bool {
        switch state {
        case .running: return false
        case .stopping, .stopped: return true
        }
    }

    /// The port actually bound.
    public var port: Int { web?.port ?? 0 }

    /// Opens storage (restoring rooms and sessions), binds the listener and
    /// starts the timers. Loop thread only.
    public init(loop: EventLoop, configuration: ServerConfiguration, logger: Logger) throws {
        loop.preconditionInEventLoop()
        self.loop = loop
        self.configuration = configuration
        self.logger = logger
        signer = TokenSigner(secret: configuration.secret)
        exporter = ServerMetricsExporter(version: configuration.buildVersion, revision: configuration.buildRevision)
        startedAt = wallMilliseconds()
        store = try RoomStore(directory: configuration.dataDirectory,
                              synchronous: configuration.synchronousFull ? .full : .normal)
        try restore(now: startedAt)
        var web = WebServerConfiguration()
        web.host = configuration.host
        web.port = configuration.port
        web.tlsCertificateFile = configuration.tlsCertificateFile
        web.tlsKeyFile = configuration.tlsKeyFile
        web.webSocketPath = "/v1/rooms"
        web.subprotocol = "room.v1"
        web.maxMessageBytes = configuration.maxMessageBytes
        web.maxConnections = configuration.maxConnections
        web.maxConnectionsPerAddress = configuration.maxConnectionsPerAddress
        state = .running(try WebServer(loop: loop, configuration: web, delegate: self, logger: logger))
        try startAdminListener()
        let tick = Duration.milliseconds(max(20, min(1000, min(configuration.heartbeatTimeout.milliseconds,
                                                                configuration.tokenExpiryNotice.milliseconds) / 10)))
        sweeper = try loop.scheduleTimer(after: tick, repeating: tick) { [weak self] timer in
            // A server dropped without stop() stops its own timer here.
            guard let self else { return timer.cancel() }
            sweep()
        }
        turnHook = try LoopTurnHook(loop: loop) { [weak self] in self?.commitPending() }
        loop.addShutdownHook { [weak self] in
            // The loop is going away: no time left for close handshakes.
            self?.beginStop()
            self?.finishStop()
        }
    }

    /// Closes every connection with 1001; once their close frames are out
    /// (or after `gracePeriod`), stops listening, closes storage and calls
    /// `completion`. Idempotent: a later call only adds its completion. The
    /// loop's shutdown finishes a pending stop at once. Loop thread only.
    public func stop(gracePeriod: Duration = .seconds(1), completion: (() -> Void)? = nil) {
        loop.preconditionInEventLoop()
        switch state {
        case .stopped:
            completion?()
        case .stopping(let web, let timer, var completions):
            if let completion { completions.append(completion) }
            state = .stopping(web, graceTimer: timer, completions: completions)
        case .running:
            beginStop()
            guard case .stopping(let web, _, var completions) = state else { return }
            if let completion { completions.append(completion) }
            if links.isEmpty {
                state = .stopping(web, graceTimer: nil, completions: completions)
                return finishStop()
            }
            let timer = try? loop.scheduleTimer(after: gracePeriod) { [weak self] _ in self?.finishStop() }
            state = .stopping(web, graceTimer: timer, completions: completions)
            if timer == nil { finishStop() }
        }
    }

    /// Stops the timers, detaches every session durably and starts closing
    /// every connection with 1001. Idempotent.
    private func beginStop() {
        guard case .running(let web) = state else { return }
        state = .stopping(web, graceTimer: nil, completions: [])
        sweeper?.cancel()
        sweeper = nil
        // Sessions stay retained: detach them durably so a restart resumes them.
        let now = wallMilliseconds()
        for room in rooms.values {
            for session in room.sessions.values where session.link != nil {
                session.link = nil
                session.detachedAt = now
                try? store.save(session.stored)
            }
        }
        commitPending()
        for link in links.values {
            link.connection.close(code: 1001, reason: "server shutting down")
        }
    }

    /// Stops listening, closes storage and runs the stop completions. Idempotent.
    private func finishStop() {
        let web: WebServer, completions: [() -> Void]
        switch state {
        case .stopped:
            return
        case .running(let running):
            (web, completions) = (running, [])
        case .stopping(let stopping, let timer, let pending):
            timer?.cancel()
            (web, completions) = (stopping, pending)
        }
        state = .stopped
        commitPending()
        endRecordings()
        turnHook?.cancel()
        turnHook = nil
        web.stop()
        adminWeb?.stop()
        adminWeb = nil
        store.close()
        for completion in completions { completion() }
    }

    // MARK: Restore after restart

    /// Loads rooms and sessions from storage into `rooms` (at start, and
    /// again after a failed group commit). Sessions come back detached at
    /// `now` unless storage says earlier.
    func restore(now: Int64) throws {
        recoveryBytes = 0
        for stored in try store.loadRooms() {
            var model = RoomModel()
            if let snapshot = stored.snapshot {
                model = try RoomModel(json: snapshot.body)
            }
            var seq = stored.snapshot?.seq ?? 0
            for event in stored.eventsAfterSnapshot {
                try model.apply(push: JSON.parse(event.push), mutation: event.mutation)
                seq = event.seq
            }
            let room = ServerRoom(id: stored.room, created: stored.created, seq: max(seq, stored.seq), model: model)
            try refillRecovery(room, now: now)
            rooms[stored.room] = room
        }
        for stored in try store.loadSessions() {
            guard let room = rooms[stored.room] else { continue }
            let session = ServerSession(id: stored.id, room: room, userId: stored.userId, memberId: stored.memberId,
                                        role: stored.role, wantsWritable: stored.wantsWritable,
                                        tokenExpiresAt: stored.tokenExpiresAt, now: now, visible: stored.visible)
            // Each retained session counts its heartbeat timeout from our start.
            session.detachedAt = stored.detachedAt ?? now
            session.lastSeen = now
            session.endedCode = stored.endedCode.map(ErrorCode.init(rawValue:))
            room.sessions[session.id] = session
        }
        logger.info("restored", metadata: ["rooms": .stringConvertible(rooms.count),
                                           "sessions": .stringConvertible(rooms.values.reduce(0) { $0 + $1.sessions.count })])
    }

    // MARK: Connections

    public func webServer(_ server: WebServer, didAccept connection: WebSocketConnection) {
        if server === adminWeb {
            return connection.close(code: 1008, reason: "no WebSocket endpoint on the admin listener")
        }
        if stopping {
            return connection.close(code: 1001, reason: "server shutting down")
        }
        let link = ClientLink(connection: connection, server: self, now: wallMilliseconds())
        connection.delegate = link
        links[ObjectIdentifier(link)] = link
        logger.debug("connection", metadata: ["connection": "\(link.id)", "peer": "\(connection.remoteAddress)"])
    }

    func closed(_ link: ClientLink, _ event: WebSocketCloseEvent) {
        links.removeValue(forKey: ObjectIdentifier(link))
        metrics.disconnects[event.code, default: 0] += 1
        detachSessions(of: link, now: wallMilliseconds())
        logger.debug("connection closed", metadata: ["connection": "\(link.id)", "code": .stringConvertible(Int(event.code)),
                                                     "how": .string(event.kind)])
        if stopping && links.isEmpty {
            finishStop()
        }
    }

    /// Detaches every session attached through `link`: each keeps its
    /// membership until `heartbeatTimeout` after the link's last message
    /// (PROTOCOL.md §4), then `sweep` removes it.
    private func detachSessions(of link: ClientLink, now: Int64) {
        for session in link.sessions.values where session.link === link {
            session.link = nil
            session.detachedAt = now
            session.lastSeen = link.lastMessageAt
            persist(session)
        }
        link.sessions.removeAll()
    }

    func received(_ message: WebSocketMessage, on link: ClientLink) {
        // A link given up for silence (`sweep`) no longer speaks for its sessions,
        // whatever arrives before its close handshake ends.
        guard !link.timedOut else { return }
        // Nothing of a room or session is held here: a safe point to commit.
        commitIfDue()
        metrics.messagesIn += 1
        metrics.bytesIn += message.bytes.count
        let now = wallMilliseconds()
        // An attached session's sign of life is its link's lastMessageAt; it is
        // copied to the session's lastSeen when the link closes (`closed`), so
        // no per-message walk over the link's sessions (O(sessions) per message).
        link.lastMessageAt = now
        if message.isBinary {
            // §1: one message = one text frame. A binary frame is not read.
            guard link.greeted else { return link.connection.close(code: 1002, reason: "hello first") }
            guard admitUnsolicited(link, now: now) else { return }
            metrics.sent(ProtocolError(code: .malformed, message: ""))
            return link.send(ServerMessage.error(ProtocolError(code: .malformed,
                                                               message: "binary frames are not accepted; send text")))
        }
        // The hot path: a magix request read straight from its bytes
        // (RoomServer+Append.swift); anything else, or anything unusual, below.
        if link.greeted, let magix = ClientEnvelope.scanMagix(message.bytes) {
            guard admitRequest(link, id: magix.id, now: now) else { return }
            let started = monotonicNanoseconds()
            tracked(id: magix.id, link: link) { handleMagix(magix, link: link, now: now) }
            exporter.requestTimer(.magix).recordSince(started)
            return
        }
        let json: JSON
        do {
            json = try JSON.parse(message.bytes)
        } catch {
            guard link.greeted else { return link.connection.close(code: 1002, reason: "hello first") }
            guard admitUnsolicited(link, now: now) else { return }
            metrics.sent(ProtocolError(code: .malformed, message: ""))
            return link.send(ServerMessage.error(ProtocolError(code: .malformed, message: "not JSON: \(error)")))
        }
        let envelope: ClientEnvelope
        switch ClientEnvelope.decode(json) {
        case .success(let decoded):
            envelope = decoded
        case .failure(let failure):
            guard link.greeted else { return link.connection.close(code: 1002, reason: "hello first") }
            if let id = failure.id {
                guard admitRequest(link, id: id, now: now) else { return }
            } else {
                guard admitUnsolicited(link, now: now) else { return }
            }
            return link.send(failure.response)
        }
        guard link.greeted || envelope.request.op == .hello else {
            return link.connection.close(code: 1002, reason: "hello first")
        }
        if let id = envelope.id {
            guard admitRequest(link, id: id, now: now) else { return }
            let started = monotonicNanoseconds()
            tracked(id: id, link: link) { handle(envelope.request, id: id, room: envelope.room, link: link, now: now) }
            exporter.requestTimer(envelope.request.op).recordSince(started)
        } else if admitUnsolicited(link, now: now), case .ping(let t) = envelope.request {
            link.send(ServerMessage.pong(t: t, serverTime: now))
        }
    }

    /// Token bucket: false when request `id` must not run, after replying
    /// 1009004, or closing 1008 once the connection has been over its limit
    /// continuously for the grace period (see `RateBucket`).
    private func admitRequest(_ link: ClientLink, id: Int64, now: Int64) -> Bool {
        switch link.requests.take(now: now) {
        case .admitted:
            return true
        case .refused:
            metrics.requestsOverLimit += 1
            metrics.sent(ProtocolError(code: .rateLimited, message: ""))
            link.send(ServerMessage.replyError(id: id, ProtocolError(code: .rateLimited, message: "rate limited")))
        case .overTooLong:
            link.connection.close(code: 1008, reason: "rate limit exceeded", discardQueued: true)
        }
        return false
    }

    /// The same limit for messages that are not requests (pings, malformed
    /// text, binary frames). Each is still answered as §2 says (they have no
    /// `id` to refuse), but a connection continuously over the limit for the
    /// grace period is closed 1008, so a flood that never asks for a reply
    /// cannot keep the server answering. False after closing.
    private func admitUnsolicited(_ link: ClientLink, now: Int64) -> Bool {
        switch link.unsolicited.take(now: now) {
        case .admitted:
            return true
        case .refused:
            metrics.unsolicitedOverLimit += 1
            return true
        case .overTooLong:
            link.connection.close(code: 1008, reason: "message rate exceeded", discardQueued: true)
            return false
        }
    }

    /// A refusal this long (ms) after the previous one starts a new over-limit episode.
    static let refusalEpisodeGap: Int64 = 1000

    /// The per-connection limits of PROTOCOL.md §1, for both of a link's buckets.
    var rateLimits: RateBucket.Limits {
        RateBucket.Limits(burst: configuration.rateLimitBurst, perSecond: configuration.rateLimitPerSecond,
                          grace: configuration.rateLimitGrace.milliseconds, episodeGap: Self.refusalEpisodeGap)
    }

    // MARK: Events

    /// Appends an event to `room`: durable first, then applied, remembered for
    /// resume, and fanned out (encoded once) to every attached session except
    /// `origin`, and only to `recipients` (user IDs) when given
    /// (`appendEncoded`, RoomServer+Append.swift).
    @discardableResult
    func append(to room: ServerRoom, origin: ServerSession?, mutation: JSON? = nil, recipients: [String]? = nil,
                now: Int64, _ build: (Int64) -> JSON) throws(ProtocolError) -> Int64 {
        let seq = room.seq + 1
        let push = build(seq)
        var next = room.model
        try next.apply(push: push, mutation: mutation)
        return try appendEncoded(EncodedPush(push), seq: seq, changed: next, to: room, origin: origin,
                                 mutation: mutation, recipients: recipients, now: now)
    }

    func persist(_ session: ServerSession) {
        do {
            try store.save(session.stored)
        } catch {
            logger.error("session not stored", metadata: ["session": "\(session.id)", "error": "\(error)"])
        }
    }

    /// Takes a member out of the room (others get `userUpdate` delete), and
    /// its user's streams when it was that user's last visible session.
    func removeMember(_ session: ServerSession, now: Int64) {
        guard session.visible else { return }
        let room = session.room
        session.visible = false
        guard let member = room.model.snapshot.members.first(where: { $0.memberId == session.memberId }) else { return }
        _ = try? append(to: room, origin: session, now: now) { seq in
            ServerMessage.userUpdate(room: room.id, seq: seq, type: .delete, users: [member])
        }
        let stillThere = room.sessions.values.contains { $0 !== session && $0.userId == session.userId && $0.visible }
        let streams = room.model.snapshot.streams.filter { $0.userId == session.userId }
        if !stillThere && !streams.isEmpty {
            _ = try? append(to: room, origin: session, now: now) { seq in
                ServerMessage.streamUpdate(room: room.id, seq: seq, type: .delete, streams: streams)
            }
        }
        persist(session)
    }

    /// Ends a session with a kick code: the attached client gets `kicked`,
    /// the member leaves, and a later resume is refused with `code`.
    func end(_ session: ServerSession, code: ErrorCode, reason: String, now: Int64) {
        guard session.endedCode == nil else { return }
        session.endedCode = code
        metrics.kicks += 1
        if let link = session.link {
            link.send(ServerMessage.kicked(room: session.room.id, code: code, reason: reason))
            link.sessions.removeValue(forKey: session.room.id)
            session.link = nil
            session.detachedAt = now
        }
        removeMember(session, now: now)
        persist(session)
        logger.info("kicked", metadata: ["room": "\(session.room.id)", "user": "\(session.userId)", "code": .stringConvertible(code.rawValue)])
    }

    // MARK: Timers

    /// Liveness, membership, retention and token expiry, checked periodically.
    func sweep() {
        let now = wallMilliseconds()
        let heartbeat = configuration.heartbeatTimeout.milliseconds
        for link in links.values where !link.timedOut && now - link.lastMessageAt >= heartbeat {
            // §4 counts the timeout from the last message, whatever the socket
            // does: detach now, so the members below are removed in this sweep,
            // not when the close handshake with a silent peer times out (~5 s).
            link.timedOut = true
            detachSessions(of: link, now: now)
            link.connection.close(code: 1001, reason: "heartbeat timeout", discardQueued: true)
        }
        let retention = configuration.sessionRetention.milliseconds
        let notice = configuration.tokenExpiryNotice.milliseconds
        // Only the sessions that need something are copied out (acting on
        // one may change its room's table): a copy of every room's table,
        // every second, was a quarter of roomd's CPU with 300,000 rooms
        // logging in (issue #26).
        var due: [ServerSession] = []
        for room in rooms.values {
            for session in room.sessions.values where Self.needsSweep(session, now: now, heartbeat: heartbeat,
                                                                        retention: retention, notice: notice) {
                due.append(session)
            }
        }
        for session in due {
            if let detachedAt = session.detachedAt {
                if session.visible && now - session.lastSeen >= heartbeat {
                    removeMember(session, now: now)
                }
                if now - detachedAt >= retention {
                    session.room.sessions.removeValue(forKey: session.id)
                    try? store.deleteSession(session.id)
                }
            } else if session.link != nil {
                if !session.warnedOfExpiry && session.tokenExpiresAt - now <= notice {
                    warnOfExpiry(session, now: now)
                }
                if now >= session.tokenExpiresAt {
                    end(session, code: .kickedTokenExpired, reason: "token expired", now: now)
                }
            }
        }
        if now - metrics.lastRateSample.at >= 1000 {
            let elapsed = Double(now - metrics.lastRateSample.at) / 1000
            metrics.eventsPerSecond = Double(metrics.eventsTotal - metrics.lastRateSample.events) / max(elapsed, 0.001)
            metrics.lastRateSample = (now, metrics.eventsTotal)
        }
    }

    /// Whether `sweep` has something to do for `session`: a detached one
    /// still visible past the heartbeat timeout, or past its retention; an
    /// attached one near or past its token's expiry.
    private static func needsSweep(_ session: ServerSession, now: Int64, heartbeat: Int64, retention: Int64,
                                   notice: Int64) -> Bool {
        if let detachedAt = session.detachedAt {
            return (session.visible && now - session.lastSeen >= heartbeat) || now - detachedAt >= retention
        }
        guard session.link != nil else { return false }
        return (!session.warnedOfExpiry && session.tokenExpiresAt - now <= notice) || now >= session.tokenExpiresAt
    }

    func warnOfExpiry(_ session: ServerSession, now: Int64) {
        session.warnedForExpiry = session.tokenExpiresAt
        let remaining = max(0, (session.tokenExpiresAt - now) / 1000)
        session.link?.send(ServerMessage.tokenWillExpire(room: session.room.id, remaining: remaining))
    }
}
