import RoomKitLoop
import RoomKitProtocol
import RoomKitServerCore

extension RoomServer {
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
        if link.attachedSessions != 0 { clearDangling(link) }
        logger.debug("connection closed", metadata: ["connection": "\(link.id)", "code": .stringConvertible(Int(event.code)),
                                                     "how": .string(event.kind)])
        if stopping && links.isEmpty {
            finishStop()
        }
    }

    /// Detaches every session attached through `link`: each keeps its
    /// membership until `heartbeatTimeout` after the link's last message
    /// (PROTOCOL.md §4), then `sweep` removes it.
    func detachSessions(of link: ClientLink, now: Int64) {
        for session in link.sessions.values where session.link === link {
            session.link = nil
            switch session.rules.detach(now: now, lastSeen: link.lastMessageAt) {
            case .none: break
            case .persist: persist(session)
            }
        }
        link.sessions.removeAll()
    }

    /// Detaches the sessions still attached through a closed `link` that
    /// its `sessions` did not list (a bug elsewhere: `session.link` and
    /// `link.sessions` are changed together): walks every room, so that no
    /// session keeps an unowned reference to a link about to be freed.
    private func clearDangling(_ link: ClientLink) {
        logger.error("closed connection still had sessions attached; detaching them",
                     metadata: ["connection": "\(link.id)", "sessions": "\(link.attachedSessions)"])
        let now = wallMilliseconds()
        for room in rooms.values {
            for session in room.sessions.values where session.link === link {
                session.link = nil
                switch session.rules.detach(now: now, lastSeen: link.lastMessageAt) {
                case .none: break
                case .persist: persist(session)
                }
            }
        }
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
        // Logins: a million when a bot joins, all again after a restart.
        if link.greeted, let login = ClientEnvelope.scanLogin(message.bytes), let id = login.id {
            guard admitRequest(link, id: id, now: now) else { return }
            let started = monotonicNanoseconds()
            tracked(id: id, link: link) { handle(login.request, id: id, room: login.room, link: link, now: now) }
            exporter.requestTimer(.login).recordSince(started)
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
}
