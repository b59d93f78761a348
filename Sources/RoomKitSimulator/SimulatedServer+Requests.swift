import Foundation
import RoomKit
import RoomKitProtocol
import RoomKitServerCore

extension SimulatedServer {
    /// One message from the bot: decoded as roomd decodes it (`ClientEnvelope.decode`).
    func handle(_ bytes: [UInt8], from connection: Connection) {
        guard let json = try? JSON.parse(bytes) else {
            return reply(connection, ServerMessage.error(.malformed("not JSON")))
        }
        let envelope: ClientEnvelope
        switch ClientEnvelope.decode(json) {
        case .success(let decoded): envelope = decoded
        case .failure(let failure):
            return reply(connection, failure.id.map { ServerMessage.replyError(id: $0, failure.error) } ?? ServerMessage.error(failure.error))
        }
        let id = envelope.id ?? 0
        do {
            reply(connection, try answer(envelope, id: id, from: connection))
        } catch {
            reply(connection, ServerMessage.replyError(id: id, error))
        }
        afterReply(envelope, connection: connection)
    }

    private func reply(_ connection: Connection, _ json: JSON) {
        deliveries.append(.message(connection, json))
    }

    private func session(for envelope: ClientEnvelope, on connection: Connection) throws(ProtocolError) -> (String, Session) {
        guard let room = envelope.room,
              let (id, session) = sessions.first(where: { $0.value.room == room && $0.value.connection === connection && $0.value.rules.endedCode == nil })
        else { throw ProtocolError(code: .roomNotLoggedIn, message: "not logged in to \(envelope.room ?? "?")") }
        return (id, session)
    }

    private func answer(_ envelope: ClientEnvelope, id: Int64, from connection: Connection) throws(ProtocolError) -> JSON {
        switch envelope.request {
        case .hello:
            connection.greeted = true
            return ServerMessage.reply(id: id, hello: HelloReply(
                connection: "c-sim-\(connection.id)", serverTime: wall(), heartbeatInterval: settings.heartbeatInterval,
                heartbeatTimeout: settings.heartbeatTimeout, sessionRetention: settings.sessionRetention))
        case .ping(let t):
            return ServerMessage.pong(t: t, serverTime: wall())
        case .login(let login):
            return try self.login(login, room: envelope.room ?? "", id: id, on: connection)
        case .logout:
            let (sessionID, _) = try session(for: envelope, on: connection)
            guard let result = sessions[sessionID]?.rules.logout(now: clock()) else { return ServerMessage.reply(id: id) }
            switch result {
            case .forget(let leave): if leave { pushLeave(of: sessionID) }
            }
            sessions.removeValue(forKey: sessionID)
            return ServerMessage.reply(id: id)
        case .magix(let event, let payload, let to):
            let (_, session) = try writableSession(envelope, on: connection)
            var fields: [String: JSON] = ["op": "magix", "room": .string(session.room), "event": .string(event), "payload": payload]
            if let to { fields["to"] = .array(to.map(JSON.string)) }
            note(fields)
            let seq = record(session.room, .magix(from: session.memberId, event: event, payload: payload), except: session.id, to: to)
            return ServerMessage.reply(id: id, seq: seq)
        case .setState(let patch):
            let (_, session) = try writableSession(envelope, on: connection)
            _ = try rooms[session.room]?.content.state.applying(patch: patch)
            note(["op": "setState", "room": .string(session.room), "patch": .object(patch)])
            let seq = record(session.room, .state(from: session.memberId, patch: patch), except: session.id)
            return ServerMessage.reply(id: id, ["seq": .int(seq), "patch": .object(patch)])
        case .setMemberState(let patch):
            let (_, session) = try session(for: envelope, on: connection)
            var merged = rooms[session.room]?.content.members.first { $0.memberId == session.memberId }?.memberState ?? [:]
            for (key, value) in patch { if value == .null { merged.removeValue(forKey: key) } else { merged[key] = value } }
            note(["op": "setMemberState", "room": .string(session.room), "memberState": .object(patch)])
            let seq = record(session.room, .memberState(memberId: session.memberId, memberState: merged), except: session.id)
            return ServerMessage.reply(id: id, seq: seq)
        case .setExtraInfo(let key, let value):
            let (_, session) = try session(for: envelope, on: connection)
            note(["op": "setExtraInfo", "room": .string(session.room), "key": .string(key), "value": .string(value)])
            let seq = record(session.room, .extraInfo(from: session.memberId, key: key, value: value), except: session.id)
            return ServerMessage.reply(id: id, seq: seq)
        case .publishStream(let streamID, let extraInfo):
            let (_, session) = try session(for: envelope, on: connection)
            note(["op": "publishStream", "room": .string(session.room), "stream": .string(streamID)])
            let stream = MediaStream(id: streamID, userId: session.user.id, extraInfo: extraInfo)
            let seq = record(session.room, .streamUpdate(.add, streams: [stream]), except: session.id)
            return ServerMessage.reply(id: id, seq: seq)
        case .unpublishStream(let streamID):
            let (_, session) = try session(for: envelope, on: connection)
            guard let stream = rooms[session.room]?.content.streams.first(where: { $0.id == streamID && $0.userId == session.user.id }) else {
                throw .invalidArgument("no stream \(streamID) of yours")
            }
            note(["op": "unpublishStream", "room": .string(session.room), "stream": .string(streamID)])
            let seq = record(session.room, .streamUpdate(.delete, streams: [stream]), except: session.id)
            return ServerMessage.reply(id: id, seq: seq)
        case .renewToken:
            let (sessionID, session) = try session(for: envelope, on: connection)
            // The simulator's tokens never expire unless a scenario says so.
            let warning = sessions[sessionID]?.rules.renewed(tokenExpiresAt: .max, now: clock(), clocks: settings.clocks)
            note(["op": "renewToken", "room": .string(session.room)])
            pendingWarning = warning.map { (sessionID, $0) }
            return ServerMessage.renewTokenReply(id: id, expiresAt: wall() + 3_600_000, writable: session.writable)
        case .setWritable(let writable):
            let (sessionID, _) = try session(for: envelope, on: connection)
            sessions[sessionID]?.writable = writable
            return ServerMessage.setWritableReply(id: id, writable: writable)
        case .insertImage(let image):
            let (_, session) = try writableSession(envelope, on: connection)
            var scenes = rooms[session.room]?.content.state.sceneState ?? RoomState.initial.sceneState
            guard scenes.scenes.indices.contains(scenes.index) else { throw .invalidArgument("no current scene") }
            scenes.scenes[scenes.index].images.append(image)
            let patch: [String: JSON] = ["sceneState": scenes.json]
            note(["op": "insertImage", "room": .string(session.room), "image": image.json])
            let seq = record(session.room, .state(from: session.memberId, patch: patch), except: session.id)
            return ServerMessage.reply(id: id, ["seq": .int(seq), "patch": .object(patch)])
        case .putScenes, .setScenePath, .removeScenes, .setViewMode:
            throw ProtocolError(code: .internalError, message: "\(envelope.op) is not simulated")
        }
    }

    private func writableSession(_ envelope: ClientEnvelope, on connection: Connection) throws(ProtocolError) -> (String, Session) {
        let found = try session(for: envelope, on: connection)
        guard found.1.writable else { throw ProtocolError(code: .notPermitted, message: "read-only session") }
        return found
    }

    private func note(_ fields: [String: JSON]) {
        actions.append(Action(at: clock(), fields: fields))
    }

    private func login(_ login: LoginRequest, room: String, id: Int64, on connection: Connection) throws(ProtocolError) -> JSON {
        guard !login.token.isEmpty, login.token != "invalid" else { throw ProtocolError(code: .tokenInvalid, message: "token invalid") }
        if rooms[room] == nil { rooms[room] = Room() }
        let held = sessions.values.contains { $0.room == room && $0.connection === connection && $0.rules.endedCode == nil }
        let decision = SessionRules.login(user: login.user.id, heldOnConnection: held, resuming: login.resume?.session,
                                          lookup: { sessions[$0].flatMap { $0.room == room ? $0.rules : nil } },
                                          sessions: sessions.values.lazy.filter { $0.room == room }.map(\.rules))
        switch decision {
        case .alreadyOnConnection:
            throw ProtocolError(code: .alreadyLoggedIn, message: "already logged in to \(room) on this connection")
        case .refuse(let code):
            throw ProtocolError(code: code, message: "the session was ended")
        case .resume(let sessionID):
            return try self.resume(sessionID, after: login.resume?.seq ?? 0, room: room, id: id, on: connection)
        case .fresh(let kick, _):
            // Newest wins: 1002050 to the user's other sessions in the room.
            for other in kick { end(other, kick: .kickedDuplicateLogin, reason: "logged in elsewhere") }
        }
        let sessionID = "s-sim-\(nextSession)"
        nextSession += 1
        let memberId = rooms[room]?.nextMemberId ?? 1
        rooms[room]?.nextMemberId += 1
        let session = Session(room: room, user: login.user, memberId: memberId, writable: login.writable, connection: connection,
                              rules: SessionRules(id: sessionID, userId: login.user.id, tokenExpiresAt: .max))
        sessions[sessionID] = session
        record(room, .userUpdate(.add, users: [member(of: session)]), except: sessionID)
        if let warning = sessions[sessionID]?.rules.loggedIn(now: clock(), clocks: settings.clocks) {
            pendingWarning = (sessionID, warning)
        }
        let current = rooms[room] ?? Room()
        return ServerMessage.reply(id: id, login: LoginReply(
            session: sessionID, memberId: memberId, seq: current.seq, recovered: false, writable: login.writable,
            expiresAt: wall() + 3_600_000, snapshot: current.content))
    }

    /// Resume (§6): the same session and member, the missed events replayed after the reply.
    private func resume(_ sessionID: String, after seq: Int64, room: String, id: Int64,
                        on connection: Connection) throws(ProtocolError) -> JSON {
        guard let result = sessions[sessionID]?.rules.resume(tokenExpiresAt: .max, now: clock(), clocks: settings.clocks),
              let session = sessions[sessionID] else { throw ProtocolError(code: .internalError, message: "no session \(sessionID)") }
        let rejoin: Bool
        switch result {
        case .refused(let code):
            throw ProtocolError(code: code, message: "the session was ended")
        case .resumed(let join, let warn):
            rejoin = join
            pendingWarning = warn.map { (sessionID, .warn(remaining: $0)) }
        }
        sessions[sessionID]?.connection = connection
        if rejoin { record(room, .userUpdate(.add, users: [member(of: session)]), except: sessionID) }
        let state = rooms[room] ?? Room()
        let recovered = state.log.first.map { $0.seq <= seq + 1 } ?? true
        let reply = LoginReply(session: sessionID, memberId: session.memberId, seq: state.seq, recovered: recovered,
                               writable: session.writable, expiresAt: wall() + 3_600_000,
                               snapshot: recovered ? nil : state.content)
        pendingReplay = recovered ? state.log.filter { $0.seq > seq }.map(\.push) : []
        return ServerMessage.reply(id: id, login: reply)
    }

    private func afterReply(_ envelope: ClientEnvelope, connection: Connection) {
        if case .login = envelope.request {
            for push in pendingReplay { deliveries.append(.message(connection, push)) }
        }
        pendingReplay = []
        if let (sessionID, warning) = pendingWarning { send(warning, to: sessionID) }
        pendingWarning = nil
    }

    private func member(of session: Session) -> Member {
        Member(memberId: session.memberId, userId: session.user.id, name: session.user.name, payload: session.user.payload, memberState: [:])
    }

    /// Applies `body` to `room` as its next event and pushes it to every
    /// attached session in the room but `except` (only to `to`'s users when given).
    @discardableResult
    func record(_ room: String, _ body: RoomEventBody, except: String?, to: [String]? = nil) -> Int64 {
        var state = rooms[room] ?? Room()
        state.seq += 1
        let seq = state.seq
        _ = try? state.content.apply(body)
        let push = Self.push(room: room, seq: seq, body)
        state.log.append((seq, push))
        rooms[room] = state
        for session in sessions.values.sorted(by: { $0.id < $1.id })
        where session.room == room && session.id != except && session.rules.endedCode == nil {
            if let to, !to.contains(session.user.id) { continue }
            if let connection = session.connection { deliveries.append(.message(connection, push)) }
        }
        return seq
    }

    static func push(room: String, seq: Int64, _ body: RoomEventBody) -> JSON {
        switch body {
        case .state(let from, let patch): return ServerMessage.state(room: room, seq: seq, from: from, patch: patch)
        case .memberState(let memberId, let state): return ServerMessage.memberState(room: room, seq: seq, memberId: memberId, memberState: state)
        case .userUpdate(let type, let users): return ServerMessage.userUpdate(room: room, seq: seq, type: type, users: users)
        case .streamUpdate(let type, let streams): return ServerMessage.streamUpdate(room: room, seq: seq, type: type, streams: streams)
        case .extraInfo(let from, let key, let value): return ServerMessage.extraInfo(room: room, seq: seq, from: from, key: key, value: value)
        case .magix(let from, let event, let payload): return ServerMessage.magix(room: room, seq: seq, from: from, event: event, payload: payload)
        }
    }

    /// Ends a session with a kick, as the session rules say: the push, the
    /// member gone, resumes refused.
    func end(_ id: String, kick code: ErrorCode, reason: String) {
        guard let result = sessions[id]?.rules.kick(code: code, now: clock()) else { return }
        switch result {
        case .none: return
        case .kicked(let notify, let leave): kicked(id, code: code, reason: reason, notify: notify, leave: leave)
        }
    }

    /// Carries out a kick the rules decided (`end`, or a token's expiry in `advance`).
    func kicked(_ id: String, code: ErrorCode, reason: String, notify: Bool, leave: Bool) {
        guard let session = sessions[id] else { return }
        if notify, let connection = session.connection {
            deliveries.append(.message(connection, ServerMessage.kicked(room: session.room, code: code, reason: reason)))
        }
        sessions[id]?.connection = nil
        if leave { pushLeave(of: id) }
    }

    /// Sends the token warning the rules asked for, if any.
    func send(_ token: SessionRules.TokenResult, to id: String) {
        switch token {
        case .none: return
        case .warn(let remaining): warn(id, remaining: remaining)
        }
    }

    func warn(_ id: String, remaining: Int64) {
        guard let session = sessions[id], let connection = session.connection else { return }
        deliveries.append(.message(connection, ServerMessage.tokenWillExpire(room: session.room, remaining: remaining)))
    }

    /// Pushes the member's leave to the others (the rules said `leave`).
    func pushLeave(of id: String) {
        guard let session = sessions[id],
              let member = rooms[session.room]?.content.members.first(where: { $0.memberId == session.memberId }) else { return }
        record(session.room, .userUpdate(.delete, users: [member]), except: id)
    }
}
