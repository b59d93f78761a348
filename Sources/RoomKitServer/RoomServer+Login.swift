import Logging
import RoomKitLoop
import RoomKitProtocol
import RoomKitServerCore

extension RoomServer {
    /// `login` (PROTOCOL.md §3, §6): the shared session rules decide
    /// between a resume, a refusal (the room is already held on this
    /// connection, or the session was kicked) and a fresh
    /// session that kicks the user's others (newest wins); this carries it
    /// out: the join push, the reply, a resume's replay, a token warning.
    func login(_ login: LoginRequest, id: Int64, roomID: String, link: ClientLink, now: Int64) throws(ProtocolError) {
        let claims = try verify(login.token, room: roomID, user: login.user.id, now: now, connection: link.id)
        let room = try openRoom(roomID, now: now)
        let decision = SessionRules.login(user: login.user.id, heldOnConnection: link.sessions[roomID] != nil,
                                          resuming: login.resume?.session,
                                          lookup: { room.sessions[$0]?.rules },
                                          sessions: room.sessions.values.lazy.map(\.rules))
        /// Whether the login's fence (if any) admits it; admitted only once
        /// the login is not refused as a second one on this connection.
        func fenceAdmits() -> Bool {
            guard let fence = login.fence else { return true }
            return admitFence(fence, room: roomID, user: login.user.id, id: id, link: link)
        }
        switch decision {
        case .alreadyOnConnection:
            // Before the fence: a refused login must not raise it.
            throw ProtocolError(code: .alreadyLoggedIn, message: "already logged in to \(roomID) on this connection")
        case .refuse(let code):
            guard fenceAdmits() else { return }
            throw ProtocolError(code: code, message: "the session was ended (kicked)")
        case .resume(let sessionID):
            guard fenceAdmits() else { return }
            guard let session = room.sessions[sessionID], let resume = login.resume else {
                throw ProtocolError(code: .internalError, message: "resumed session \(sessionID) is gone")
            }
            try self.resume(session, resume, login: login, claims: claims, id: id, link: link, now: now)
        case .fresh(let kick, let resumeExpired):
            guard fenceAdmits() else { return }
            // A resume of a session no longer retained becomes a fresh login.
            if resumeExpired { metrics.recoveries["expired", default: 0] += 1 }
            for other in kick.compactMap({ room.sessions[$0] }) {
                end(other, code: .kickedDuplicateLogin, reason: "logged in elsewhere", now: now)
            }
            try fresh(login, claims: claims, room: room, id: id, link: link, now: now)
        }
    }

    /// Resume of a session we still retain for this room and user.
    private func resume(_ session: ServerSession, _ resume: ResumePoint, login: LoginRequest, claims: TokenClaims,
                        id: Int64, link: ClientLink, now: Int64) throws(ProtocolError) {
        let room = session.room
        let rejoin: Bool, warning: Int64?
        switch session.rules.resume(tokenExpiresAt: claims.expiresAtMilliseconds, now: now, clocks: sessionClocks) {
        case .refused(let code):
            throw ProtocolError(code: code, message: "the session was ended (kicked)")
        case .resumed(let join, let warn):
            (rejoin, warning) = (join, warn)
        }
        if let other = session.link, other !== link {
            other.sessions.removeValue(forKey: room.id)
        }
        session.link = link
        session.role = claims.role
        session.wantsWritable = login.writable
        link.sessions[room.id] = session
        if rejoin {
            let member = Member(memberId: session.memberId, userId: session.userId, name: login.user.name,
                                payload: login.user.payload, memberState: [:])
            try appendUserUpdate(to: room, origin: session, type: .add, users: [member], now: now)
        }
        persist(session)
        // Recoverable events are replayed from memory, or from the store
        // once the byte bounds evicted them (RoomServer+Recovery.swift).
        let frames = resume.seq >= room.recoverableAfter && resume.seq <= room.seq
            ? replay(room, after: resume.seq, for: session.userId) : nil
        let recovered = frames != nil
        metrics.recoveries[recovered ? "recovered" : "resumed", default: 0] += 1
        let reply = LoginReply(session: session.id, memberId: session.memberId, seq: room.seq, recovered: recovered,
                               writable: session.writable, expiresAt: session.tokenExpiresAt,
                               snapshot: recovered ? nil : room.model.snapshot)
        link.send(WebSocketFrame(bytes: reply.replyJSON(id: id)))
        for frame in frames ?? [] { link.send(frame) }
        if let warning { send(.warn(remaining: warning), to: session) }
    }

    /// A fresh session: a new member joins.
    private func fresh(_ login: LoginRequest, claims: TokenClaims, room: ServerRoom, id: Int64, link: ClientLink,
                       now: Int64) throws(ProtocolError) {
        let memberId = room.model.nextMemberId
        let sessionID = sessionIdentifier(now: now, random: randomPool.next())
        let session = ServerSession(id: sessionID, room: room, userId: login.user.id, memberId: memberId,
                                    role: claims.role, wantsWritable: login.writable,
                                    rules: SessionRules(id: sessionID, userId: login.user.id,
                                                        tokenExpiresAt: claims.expiresAtMilliseconds))
        let member = Member(memberId: memberId, userId: login.user.id, name: login.user.name,
                            payload: login.user.payload, memberState: [:])
        room.sessions[session.id] = session
        do {
            try appendUserUpdate(to: room, origin: session, type: .add, users: [member], now: now)
        } catch {
            room.sessions.removeValue(forKey: session.id)
            throw error
        }
        session.link = link
        link.sessions[room.id] = session
        persist(session)
        let reply = LoginReply(session: session.id, memberId: memberId, seq: room.seq, recovered: false,
                               writable: session.writable, expiresAt: session.tokenExpiresAt,
                               snapshot: room.model.snapshot)
        link.send(WebSocketFrame(bytes: reply.replyJSON(id: id)))
        send(session.rules.loggedIn(now: now, clocks: sessionClocks), to: session)
    }

    /// The room, created (durably) on first use.
    func openRoom(_ roomID: String, now: Int64) throws(ProtocolError) -> ServerRoom {
        if let room = rooms[roomID] { return room }
        let room = ServerRoom(id: roomID, created: now, seq: 0, model: RoomModel())
        do {
            try store.createRoom(roomID, created: now, snapshotBody: nil)
        } catch {
            logger.error("room not created", metadata: ["room": "\(roomID)", "error": "\(error)"])
            throw ProtocolError(code: .internalError, message: "storage failed")
        }
        rooms[roomID] = room
        return room
    }
}
