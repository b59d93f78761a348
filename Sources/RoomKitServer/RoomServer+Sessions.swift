import Logging
import RoomKitLoop
import RoomKitProtocol
import RoomKitServerCore

/// What roomd does with the answers of the shared session rules
/// (`SessionRules`, RoomKitServerCore): the pushes to the members, the
/// kicks and warnings to a session's connection, storage. The decisions
/// are the rules'; this file only carries them out.
extension RoomServer {
    /// Takes a member out of the room (others get `userUpdate` delete), and
    /// its user's streams when it was that user's last visible session.
    /// Called when the rules said `leave` (they already made it invisible).
    func pushLeave(_ session: ServerSession, now: Int64) {
        let room = session.room
        guard let member = room.model.snapshot.members.first(where: { $0.memberId == session.memberId }) else { return }
        try? appendUserUpdate(to: room, origin: session, type: .delete, users: [member], now: now)
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
        switch session.rules.kick(code: code, now: now) {
        case .none:
            return
        case .kicked(let notify, let leave):
            kicked(session, code: code, reason: reason, notify: notify, leave: leave, now: now)
        }
    }

    /// Carries out a kick the rules decided (`end`, or a token's expiry in `sweep`).
    private func kicked(_ session: ServerSession, code: ErrorCode, reason: String, notify: Bool, leave: Bool, now: Int64) {
        metrics.kicks += 1
        if notify, let link = session.link {
            link.send(ServerMessage.kicked(room: session.room.id, code: code, reason: reason))
            link.sessions.removeValue(forKey: session.room.id)
        }
        session.link = nil
        if leave { pushLeave(session, now: now) }
        persist(session)
        logger.info("kicked", metadata: ["room": "\(session.room.id)", "user": "\(session.userId)", "code": .stringConvertible(code.rawValue)])
    }

    /// The sweep's period (ms): a tenth of the shorter of the heartbeat
    /// timeout and the token notice, between 20 ms and 1 s.
    static func sweepPeriod(_ configuration: ServerConfiguration) -> Int64 {
        max(20, min(1000, min(configuration.heartbeatTimeout.milliseconds, configuration.tokenExpiryNotice.milliseconds) / 10))
    }

    /// Puts `session` in the sweep's schedule at the first time its rules
    /// may act (`SessionSchedule`); called after every change of its rules.
    func schedule(_ session: ServerSession) {
        sessionSchedule.schedule(session, due: session.rules.nextTick(clocks: sessionClocks))
    }

    /// Sends the token warning the rules asked for, if any.
    func send(_ token: SessionRules.TokenResult, to session: ServerSession) {
        switch token {
        case .none: return
        case .warn(let remaining): warn(session, remaining: remaining)
        }
    }

    private func warn(_ session: ServerSession, remaining: Int64) {
        session.link?.send(ServerMessage.tokenWillExpire(room: session.room.id, remaining: remaining))
    }

    // MARK: Timers

    /// Liveness, membership, retention and token expiry, checked periodically.
    func sweep() {
        let now = wallMilliseconds()
        for link in links.values where !link.timedOut && sessionClocks.isSilent(lastMessageAt: link.lastMessageAt, now: now) {
            // §4 counts the timeout from the last message, whatever the socket
            // does: detach now, so the members below are removed in this sweep,
            // not when the close handshake with a silent peer times out (~5 s).
            link.timedOut = true
            detachSessions(of: link, now: now)
            link.connection.close(code: 1001, reason: "heartbeat timeout", discardQueued: true)
        }
        // Only the sessions whose rules may act by now are ticked
        // (`SessionSchedule`): a walk of every room's sessions each second
        // was most of roomd's core with 1,000,000 sessions (issue #26).
        // Acting on one may change its room's table, so they are all ticked first.
        var due: [(ServerSession, SessionRules.TickResult)] = []
        for session in sessionSchedule.takeDue(now: now) {
            // A session forgotten without leaving the schedule is dropped here.
            guard session.room.sessions[session.id] === session else { continue }
            due.append((session, session.rules.tick(now: now, clocks: sessionClocks)))
        }
        for (session, result) in due {
            switch result {
            case .none:
                break
            case .warn(let remaining):
                warn(session, remaining: remaining)
            case .kick(let code, let warnFirst):
                if let warnFirst { warn(session, remaining: warnFirst) }
                kicked(session, code: code, reason: "token expired", notify: true, leave: true, now: now)
            case .leave:
                pushLeave(session, now: now)
            case .forget(let leave):
                if leave { pushLeave(session, now: now) }
                session.room.sessions.removeValue(forKey: session.id)
                sessionSchedule.remove(session)
                try? store.deleteSession(session.id)
                continue
            }
            schedule(session)
        }
        if now - metrics.lastRateSample.at >= 1000 {
            let elapsed = Double(now - metrics.lastRateSample.at) / 1000
            metrics.eventsPerSecond = Double(metrics.eventsTotal - metrics.lastRateSample.events) / max(elapsed, 0.001)
            metrics.lastRateSample = (now, metrics.eventsTotal)
        }
    }
}
