import Foundation
import Logging
import RoomKitLoop
import RoomKitProtocol
import RoomKitTokens
import RoomKitServerCore

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
    /// `signer`'s verdicts on login and renewal tokens, kept per token
    /// string (a bot signs all its logins with one token; issue #26).
    let verifiedTokens: VerifiedTokenCache
    var rooms: [String: ServerRoom] = [:]
    /// Random values for session IDs (`sessionIdentifier`), loop thread only.
    var randomPool = RandomPool()
    /// When the sweep must look at each retained session (RoomServer+Sessions.swift).
    var sessionSchedule: SessionSchedule
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
    /// Batching connections holding messages for the end of this turn
    /// (PushBatcher.swift). Loop thread only.
    var batchedLinks: [ClientLink] = []
    /// The server's lifecycle (Hummingbird's `Server` shape): each state
    /// carries what only it needs. Loop thread only.
    private var state = State.stopped
    let startedAt: Int64
    /// The heartbeat, retention and token-notice clocks the session rules apply.
    let sessionClocks: SessionClocks

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
        verifiedTokens = VerifiedTokenCache(signer: signer)
        exporter = ServerMetricsExporter(version: configuration.buildVersion, revision: configuration.buildRevision)
        startedAt = wallMilliseconds()
        sessionClocks = SessionClocks(heartbeatTimeout: configuration.heartbeatTimeout.milliseconds,
                                      sessionRetention: configuration.sessionRetention.milliseconds,
                                      tokenExpiryNotice: configuration.tokenExpiryNotice.milliseconds)
        sessionSchedule = SessionSchedule(slot: Self.sweepPeriod(configuration))
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
        let tick = Duration.milliseconds(Self.sweepPeriod(configuration))
        sweeper = try loop.scheduleTimer(after: tick, repeating: tick) { [weak self] timer in
            // A server dropped without stop() stops its own timer here.
            guard let self else { return timer.cancel() }
            sweep()
        }
        turnHook = try LoopTurnHook(loop: loop) { [weak self] in
            self?.commitPending()
            self?.flushBatches()
        }
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
            for session in room.sessions.values {
                guard let link = session.link else { continue }
                session.link = nil
                switch session.rules.detach(now: now, lastSeen: link.lastMessageAt) {
                case .none: break
                case .persist: try? store.save(session.stored)
                }
            }
        }
        commitPending()
        flushBatches()
        for link in links.values {
            link.connection.close(code: 1001, reason: "server shutting down")
        }
    }

    /// Stops listening, closes storage and runs the stop completions. Idempotent.
    func finishStop() {
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
        flushBatches()
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
        try store.reading { try restoreReading(now: now) }
    }

    private func restoreReading(now: Int64) throws {
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
        var schedule = SessionSchedule(slot: Self.sweepPeriod(configuration))
        for stored in try store.loadSessions() {
            guard let room = rooms[stored.room] else { continue }
            // Each retained session counts its heartbeat timeout from our start.
            let rules = SessionRules(restoring: stored.id, userId: stored.userId, tokenExpiresAt: stored.tokenExpiresAt,
                                     detachedAt: stored.detachedAt, visible: stored.visible,
                                     endedCode: stored.endedCode.map(ErrorCode.init(rawValue:)), now: now)
            let session = ServerSession(id: stored.id, room: room, userId: stored.userId, memberId: stored.memberId,
                                        role: stored.role, wantsWritable: stored.wantsWritable, rules: rules)
            room.sessions[session.id] = session
            // Each looked at by the first sweep: a reload after a failed
            // commit attaches some again (RoomServer+Commit.swift), whose
            // token clock may then come before this detached one.
            schedule.schedule(session, due: now)
        }
        // Only now: a restore that throws leaves the server as it was (RoomServer+Commit.swift).
        sessionSchedule = schedule
        logger.info("restored", metadata: ["rooms": .stringConvertible(rooms.count),
                                           "sessions": .stringConvertible(rooms.values.reduce(0) { $0 + $1.sessions.count })])
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

    /// `append` for members joining or leaving (every login and every
    /// leave): the body applied as it is and its push written from the
    /// members (`EncodedPush.userUpdate`), with no JSON tree built,
    /// serialised and decoded again (a sixth of roomd's loop per login).
    func appendUserUpdate(to room: ServerRoom, origin: ServerSession?, type: UpdateType, users: [Member],
                          now: Int64) throws(ProtocolError) {
        let seq = room.seq + 1
        var next = room.model
        try next.apply(.userUpdate(type, users: users))
        _ = try appendEncoded(EncodedPush.userUpdate(room: room.id, seq: seq, type: type, users: users), seq: seq,
                              changed: next, to: room, origin: origin, recipients: nil, now: now)
    }

    /// Stores `session` after a change of its rules, and schedules its next
    /// look by the sweep (`SessionSchedule`).
    func persist(_ session: ServerSession) {
        schedule(session)
        do {
            try store.save(session.stored)
        } catch {
            logger.error("session not stored", metadata: ["session": "\(session.id)", "error": "\(error)"])
        }
    }
}
