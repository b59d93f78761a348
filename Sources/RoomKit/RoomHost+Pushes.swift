import RoomKitLoop
import RoomKitProtocol

extension RoomContent: RoomContentModel {}

extension RoomHost {
    /// Applies a room push to the cache (through the one shared
    /// `RoomContentModel.apply`), then raises its callbacks. A push whose seq
    /// is not newer than the last one seen is a duplicate and is dropped
    /// (exactly once across resumes). Own events (possible only in a resume
    /// replay) update the cache without callbacks.
    func apply(_ push: RoomPush, record: SessionRecord) {
        if case .magix(let from, let event, let payload) = push.body {
            return applyMagix(seq: push.seq, from: from, event: event, payload: .value(payload), record: record)
        }
        guard push.seq > record.lastSeq else { return }
        record.lastSeq = push.seq
        cursorChanged(record)
        let replayed = push.seq <= record.replayUntil
        applyingReplay = replayed
        defer { applyingReplay = false }
        let room = record.room
        let me = room.memberId
        var outcome: Result<RoomChange, ProtocolError> = .success(RoomChange())
        room.update { content in
            content.seq = push.seq
            do throws(ProtocolError) {
                outcome = .success(try content.apply(push.body))
            } catch {
                outcome = .failure(error)
            }
        }
        let change: RoomChange
        switch outcome {
        case .success(let value):
            change = value
        case .failure(let error):
            // Only a state patch of the wrong shape fails; the cache is unchanged.
            emit(.catchErrorWhenAppendFrame(room: room.id, memberId: push.body.from ?? 0, error: "\(error)"), room: room)
            return
        }

        switch push.body {
        case .state(let from, let patch):
            if from == me { return }
            let state = room.state
            if patch["globalState"] != nil { checkGlobalState(state.globalState, from: from, record: record) }
            var diff = RoomStateDiff()
            if change.stateKeys.contains("globalState") { diff.globalState = state.globalState }
            if change.stateKeys.contains("sceneState") { diff.sceneState = state.sceneState }
            if change.stateKeys.contains("broadcastState") { diff.broadcastState = state.broadcastState }
            if !diff.isEmpty { emit(.roomStateModified(room: room.id, from: from, diff: diff), room: room) }

        case .memberState(let memberId, _):
            if memberId != me {
                var diff = RoomStateDiff()
                diff.roomMembers = room.roomMembers
                emit(.roomStateModified(room: room.id, from: memberId, diff: diff), room: room)
            }

        case .userUpdate(let type, let users):
            let others = users.filter { $0.memberId != me }
            guard !others.isEmpty else { return }
            emit(.userUpdate(room: room.id, type: type, users: others), room: room)
            var diff = RoomStateDiff()
            diff.roomMembers = room.roomMembers
            emit(.roomStateModified(room: room.id, from: nil, diff: diff), room: room)

        case .streamUpdate(let type, let streams):
            let others = streams.filter { $0.userId != record.user.id }
            if !others.isEmpty {
                emit(.streamUpdate(room: room.id, type: type, streams: others), room: room)
            }

        case .extraInfo(let from, let key, let value):
            if from != me {
                emit(.extraInfoUpdate(room: room.id, key: key, value: value), room: room)
            }

        case .magix:
            break  // applyMagix
        }
    }

    /// The seed's `setCustomGlobalStateClass` contract: whenever the room's
    /// `globalState` does not decode as the registered type (a push from
    /// member `from`, or a login or resume snapshot, `from` 0), the app
    /// hears `catchErrorWhenAppendFrame`; the session goes on.
    func checkGlobalState(_ globalState: [String: JSON], from: Int64, record: SessionRecord) {
        guard let custom = globalStateType else { return }
        do {
            try custom.check(.object(globalState))
        } catch {
            emit(.catchErrorWhenAppendFrame(room: record.room.id, memberId: from,
                                            error: "globalState does not decode as \(custom.name): \(error)"), room: record.room)
        }
    }

    /// `apply` for a magix push (decoded, or read straight from its bytes
    /// with the payload as received): the same seq rule, cursor and replay
    /// flag; the cache only takes the seq (a magix event changes nothing
    /// else), and the member ID is read under that same lock.
    func applyMagix(seq: Int64, from: Int64, event: String, payload: JSONPayload, record: SessionRecord) {
        guard seq > record.lastSeq else { return }
        record.lastSeq = seq
        cursorChanged(record)
        let replayed = seq <= record.replayUntil
        applyingReplay = replayed
        defer { applyingReplay = false }
        let room = record.room
        let me = room.update { content -> Int64? in
            content.seq = seq
            return content.memberId
        }
        guard from != me else { return }
        emit(.magix(MagixEvent(room: room.id, seq: seq, from: from, event: event, payload: payload, replayed: replayed)),
             room: room)
    }
}

// Everything the server sends arrives here, decoded once (ServerPush).
extension RoomHost {

    func received(_ message: WebSocketMessage) {
        link.messageReceived(now: nowMonotonic)
        guard receivesBatches, let current = connection else { return received(message: message.bytes[...]) }
        // A batch (PROTOCOL.md "Batched messages"): each element in place, in
        // order, while the connection it came on is still the host's.
        MessageBatch.forEachMessage(in: message.bytes) { element in
            guard connection === current else { return }
            received(message: element)
        }
    }

    /// One server message (a whole WebSocket message, or one element of a batch).
    private func received(message bytes: ArraySlice<UInt8>) {
        // The hot path: a magix push read from its bytes, no JSON tree. Any
        // other message (and any the scanner declines) takes the full decode.
        if let magix = ServerPush.scanMagix(bytes) {
            guard let record = sessions[magix.room] else { return }
            applyMagix(seq: magix.seq, from: magix.from, event: magix.event, payload: magix.payload, record: record)
            return
        }
        // Logins: a million of them when a bot starts. A reply scanned for
        // a request that is not a login (it cannot have a login's fields,
        // but the server is not trusted) takes the full decode below.
        if let (id, reply) = LoginReply.scan(bytes, memo: &snapshotMemo), let login = pending[id]?.scannedLogin {
            pending.removeValue(forKey: id)
            login(reply)
            return
        }
        let push: ServerPush
        do {
            push = try ServerPush.decode(JSON.parse(bytes)).get()
        } catch {
            emit(.throwError(domain: "protocol", code: (error as? ProtocolError)?.code ?? .malformed,
                             message: "unreadable message from the server: \(error)"), room: nil)
            return
        }
        switch push {
        case .reply(let id, let result):
            guard let request = pending.removeValue(forKey: id) else { return }
            request.completion(result.mapError { failure in
                var error = RoomError(code: failure.code, message: failure.message)
                error.currentFence = failure.currentFence
                return error
            })
        case .pong:
            break
        case .error(let error, _):
            emit(.throwError(domain: "server", code: error.code, message: error.message), room: nil)
        case .kicked(let roomID, let code, let reason):
            guard let record = sessions[roomID] else { return }
            sessionKicked(record, code: code, message: reason)
        case .tokenWillExpire(let roomID, let remaining):
            guard let record = sessions[roomID] else { return }
            emit(.tokenWillExpire(room: roomID, remaining: remaining), room: record.room)
            renewAutomatically(record)
        case .room(let roomPush):
            guard let record = sessions[roomPush.room] else { return }
            apply(roomPush, record: record)
        }
    }
}
