import RoomKitLoop
import RoomKitProtocol
import RoomKitServerCore

extension RoomServer {
    /// Runs one request and sends its one reply.
    func handle(_ request: ClientRequest, id: Int64, room roomID: String?, link: ClientLink, now: Int64) {
        do {
            if case .hello = request {
                guard !link.greeted else {
                    throw ProtocolError(code: .invalidArgument, message: "hello was already sent")
                }
                if case .hello(_, let token?, _) = request {
                    try admitService(token, link: link, now: now)
                }
                link.greeted = true
                let batch: Bool
                if case .hello(_, _, let asked) = request { batch = asked } else { batch = false }
                let hello = HelloReply(connection: link.id, serverTime: now,
                                       heartbeatInterval: configuration.heartbeatInterval.milliseconds,
                                       heartbeatTimeout: configuration.heartbeatTimeout.milliseconds,
                                       sessionRetention: configuration.sessionRetention.milliseconds,
                                       maxMessageBytes: Int64(configuration.maxMessageBytes),
                                       requestBurst: link.requests.limits.burst,
                                       requestsPerSecond: link.requests.limits.perSecond, batch: batch)
                let reply = WebSocketFrame(bytes: ServerMessage.reply(id: id, hello: hello).serialized())
                // Batching starts after the reply that confirms it (PushBatcher.swift).
                if batch { link.batch.mode = .afterHelloReply(reply) }
                return link.send(reply)
            }
            guard let roomID else { throw ProtocolError.malformed("room is required") }
            switch request {
            case .login(let login):
                try self.login(login, id: id, roomID: roomID, link: link, now: now)
                return
            case .logout:
                guard let session = link.sessions[roomID] else {
                    throw ProtocolError(code: .logoutNotLoggedIn, message: "not logged in to \(roomID)")
                }
                link.sessions.removeValue(forKey: roomID)
                session.link = nil
                switch session.rules.logout(now: now) {
                case .forget(let leave):
                    if leave { pushLeave(session, now: now) }
                }
                session.room.sessions.removeValue(forKey: session.id)
                sessionSchedule.remove(session)
                try? store.deleteSession(session.id)
                return link.send(ServerMessage.reply(id: id, ["seq": .int(session.room.seq)]))
            default:
                break
            }
            let session = try writableSession(roomID, link: link, op: request.op)
            if case .renewToken(let token) = request {
                let warning = try renew(token, session: session, now: now)
                link.send(ServerMessage.reply(id: id, ["expiresAt": .int(session.tokenExpiresAt),
                                                       "writable": .bool(session.writable)]))
                return send(warning, to: session)  // a short-lived new token is announced at once
            }
            let reply = try perform(request, session: session, now: now)
            link.send(ServerMessage.reply(id: id, reply))
        } catch let error as ProtocolError {
            metrics.sent(error)
            link.send(ServerMessage.replyError(id: id, error))
        } catch {
            metrics.sent(ProtocolError(code: .internalError, message: ""))
            link.send(ServerMessage.replyError(id: id, ProtocolError(code: .internalError, message: "\(error)")))
        }
    }

    /// The session of `link` in `roomID` for a request of `op`: 1009005
    /// when there is none, 1009003 when `op` writes and the session may not.
    func writableSession(_ roomID: String, link: ClientLink, op: ClientOp) throws(ProtocolError) -> ServerSession {
        guard let session = link.sessions[roomID] else {
            throw ProtocolError(code: .roomNotLoggedIn, message: "not logged in to \(roomID)")
        }
        if op.requiresWritable && !session.writable {
            throw ProtocolError(code: .notPermitted, message: "this session is read-only")
        }
        return session
    }

    /// Room requests of a logged-in session; returns the reply's fields.
    private func perform(_ request: ClientRequest, session: ServerSession, now: Int64) throws(ProtocolError) -> [String: JSON] {
        let room = session.room
        let me = session.memberId
        switch request {
        case .setState(let patch):
            _ = try room.model.snapshot.state.applying(patch: patch)
            let seq = try append(to: room, origin: session, now: now) { seq in
                ServerMessage.state(room: room.id, seq: seq, from: me, patch: patch)
            }
            return ["seq": .int(seq)]

        case .setMemberState(let patch):
            let old = room.model.snapshot.members.first { $0.memberId == me }?.memberState ?? [:]
            let merged = RoomState.mergeMemberState(old, patch)
            let seq = try append(to: room, origin: session, now: now) { seq in
                ServerMessage.memberState(room: room.id, seq: seq, memberId: me, memberState: merged)
            }
            return ["seq": .int(seq)]

        case .magix(let event, let payload, let to):
            let seq = try append(to: room, origin: session, recipients: to, now: now) { seq in
                var push = ServerMessage.magix(room: room.id, seq: seq, from: me, event: event, payload: payload)
                if let to, case .object(var fields) = push {
                    fields["to"] = .array(to.map(JSON.string))
                    push = .object(fields)
                }
                return push
            }
            return ["seq": .int(seq)]

        case .putScenes(let dir, let scenes, let index):
            var mutation: [String: JSON] = ["op": "putScenes", "dir": .string(dir), "scenes": .array(scenes.map(\.json))]
            if let index { mutation["index"] = .int(Int64(index)) }
            return try sceneChange(room, session, mutation: .object(mutation), now: now) { tree throws(ProtocolError) in
                try tree.putScenes(dir: dir, scenes: scenes, index: index)
            }
        case .setScenePath(let path):
            return try sceneChange(room, session, mutation: ["op": "setScenePath", "path": .string(path)], now: now) { tree throws(ProtocolError) in
                try tree.setScenePath(path)
            }
        case .removeScenes(let path):
            return try sceneChange(room, session, mutation: ["op": "removeScenes", "path": .string(path)], now: now) { tree throws(ProtocolError) in
                try tree.removeScenes(path: path)
            }
        case .insertImage(let image):
            return try sceneChange(room, session, mutation: ["op": "insertImage", "image": image.json], now: now) { tree throws(ProtocolError) in
                try tree.insertImage(image)
            }

        case .setViewMode(let mode):
            let current = room.model.snapshot.state.broadcastState
            var next = current
            switch mode {
            case .broadcaster:
                next = BroadcastState(mode: .broadcaster, broadcasterId: me)
            case .freedom, .follower:
                if current.broadcasterId == me {
                    next = BroadcastState(mode: .freedom, broadcasterId: nil)
                }
            }
            let patch: [String: JSON] = ["broadcastState": next.json]
            let seq = try append(to: room, origin: session, now: now) { seq in
                ServerMessage.state(room: room.id, seq: seq, from: me, patch: patch)
            }
            // The caller never receives its own push: the reply carries the result.
            return ["seq": .int(seq), "patch": .object(patch)]

        case .publishStream(let streamID, let extraInfo):
            if let existing = room.model.snapshot.streams.first(where: { $0.id == streamID }), existing.userId != session.userId {
                throw ProtocolError.invalidArgument("stream \(streamID) belongs to another user")
            }
            let stream = MediaStream(id: streamID, userId: session.userId, extraInfo: extraInfo)
            let seq = try append(to: room, origin: session, now: now) { seq in
                ServerMessage.streamUpdate(room: room.id, seq: seq, type: .add, streams: [stream])
            }
            return ["seq": .int(seq)]

        case .unpublishStream(let streamID):
            guard let stream = room.model.snapshot.streams.first(where: { $0.id == streamID }),
                  stream.userId == session.userId else {
                throw ProtocolError.invalidArgument("you do not publish stream \(streamID)")
            }
            let seq = try append(to: room, origin: session, now: now) { seq in
                ServerMessage.streamUpdate(room: room.id, seq: seq, type: .delete, streams: [stream])
            }
            return ["seq": .int(seq)]

        case .setExtraInfo(let key, let value):
            let seq = try append(to: room, origin: session, now: now) { seq in
                ServerMessage.extraInfo(room: room.id, seq: seq, from: me, key: key, value: value)
            }
            return ["seq": .int(seq)]

        case .setWritable(let writable):
            if writable && !session.role.canWrite {
                throw ProtocolError(code: .notPermitted, message: "a reader token cannot write")
            }
            session.wantsWritable = writable
            persist(session)
            return ["writable": .bool(session.writable)]

        case .hello, .ping, .login, .logout, .renewToken:
            throw ProtocolError.invalidArgument("unexpected \(request.op.rawValue)")
        }
    }

    /// A scene operation: validated on a copy of the tree, logged with its
    /// mutation, pushed as a `state` event carrying the new `sceneState`.
    private func sceneChange(_ room: ServerRoom, _ session: ServerSession, mutation: JSON, now: Int64,
                             _ change: (inout SceneTree) throws(ProtocolError) -> Void) throws(ProtocolError) -> [String: JSON] {
        var tree = room.model.scenes
        try change(&tree)
        let patch: [String: JSON] = ["sceneState": tree.sceneState.json]
        let me = session.memberId
        let seq = try append(to: room, origin: session, mutation: mutation, now: now) { seq in
            ServerMessage.state(room: room.id, seq: seq, from: me, patch: patch)
        }
        // The caller never receives its own push: the reply carries the result.
        return ["seq": .int(seq), "patch": .object(patch)]
    }

    /// `renewToken`: a new token for the session's room and user. Its
    /// expiry goes to the session rules, which say whether to warn of it
    /// (after the reply; the same expiry is not warned again).
    private func renew(_ token: String, session: ServerSession, now: Int64) throws(ProtocolError) -> SessionRules.TokenResult {
        let claims = try verify(token, room: session.room.id, user: session.userId, now: now, context: "renewToken")
        session.role = claims.role
        let warning = session.rules.renewed(tokenExpiresAt: claims.expiresAtMilliseconds, now: now, clocks: sessionClocks)
        persist(session)
        return warning
    }

    /// Verifies a token for `room` and `user`; 1002033 otherwise.
    /// `context` ("login", "renewToken") and `connection` only name the
    /// rejection in the log (RoomServer+AuthLog.swift).
    func verify(_ token: String, room: String, user: String, now: Int64, context: String = "login",
                connection: String? = nil) throws(ProtocolError) -> TokenClaims {
        let claims: TokenClaims
        do {
            claims = try verifiedTokens.verify(token, now: now / 1000)
        } catch {
            noteTokenRejected("\(error)", in: context, room: room, connection: connection, now: now)
            throw ProtocolError(code: .tokenInvalid, message: "token rejected: \(error.reason)")
        }
        guard claims.allows(room: room), claims.sub == user else {
            noteTokenRejected(claims.allows(room: room) ? "token is for user \(claims.sub), not \(user)" : "token is not for this room",
                              in: context, room: room, connection: connection, now: now)
            throw ProtocolError(code: .tokenInvalid, message: "token is not for this room and user")
        }
        return claims
    }
}
