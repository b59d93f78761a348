import RoomKitProtocol

extension RoomHost {
    /// Applies a room push to the cache, then raises its callbacks. A push
    /// whose seq is not newer than the last one seen is a duplicate and is
    /// dropped (exactly once across resumes). Own events (possible only in a
    /// resume replay) update the cache without callbacks.
    func apply(push: JSON, op: String, driver: SessionDriver) {
        guard let seq = push["seq"]?.int64Value else { return }
        guard seq > driver.lastSeq else { return }
        driver.lastSeq = seq
        cursorChanged(driver)
        let replayed = seq <= driver.replayUntil
        applyingReplay = replayed
        defer { applyingReplay = false }
        let room = driver.room
        let me = room.memberId
        room.update { $0.seq = seq }

        switch op {
        case "state":
            let from = push["from"]?.int64Value
            guard let patch = push["patch"]?.objectValue else { return }
            let own = from != nil && from == me
            var changed: [String] = []
            var failure: String?
            room.update { content in
                do {
                    let (next, keys) = try content.state.applying(patch: patch)
                    content.state = next
                    changed = keys
                } catch {
                    failure = "\(error)"
                }
            }
            if let failure {
                emit(.catchErrorWhenAppendFrame(room: room.id, memberId: from ?? 0, error: failure), room: room)
                return
            }
            if own { return }
            let state = room.state
            if patch["globalState"] != nil, let custom = globalStateType {
                do {
                    try custom.check(.object(state.globalState))
                } catch {
                    emit(.catchErrorWhenAppendFrame(room: room.id, memberId: from ?? 0,
                                                    error: "globalState does not decode as \(custom.name): \(error)"), room: room)
                }
            }
            var diff = RoomStateDiff()
            if changed.contains("globalState") { diff.globalState = state.globalState }
            if changed.contains("sceneState") { diff.sceneState = state.sceneState }
            if changed.contains("broadcastState") { diff.broadcastState = state.broadcastState }
            if !diff.isEmpty { emit(.roomStateModified(room: room.id, from: from, diff: diff), room: room) }

        case "memberState":
            guard let memberId = push["memberId"]?.int64Value, let state = push["memberState"]?.objectValue else { return }
            room.update { content in
                if let index = content.members.firstIndex(where: { $0.memberId == memberId }) {
                    content.members[index].memberState = state
                }
            }
            if memberId != me {
                var diff = RoomStateDiff()
                diff.roomMembers = room.roomMembers
                emit(.roomStateModified(room: room.id, from: memberId, diff: diff), room: room)
            }

        case "userUpdate":
            let users = (push["users"]?.arrayValue ?? []).compactMap { try? Member(json: $0) }
            let add = push["type"]?.stringValue == "add"
            room.update { content in
                let ids = Set(users.map(\.memberId))
                content.members.removeAll { ids.contains($0.memberId) }
                if add { content.members.append(contentsOf: users) }
            }
            let others = users.filter { $0.memberId != me }
            guard !others.isEmpty else { return }
            emit(.userUpdate(room: room.id, type: add ? .add : .delete, users: others), room: room)
            var diff = RoomStateDiff()
            diff.roomMembers = room.roomMembers
            emit(.roomStateModified(room: room.id, from: nil, diff: diff), room: room)

        case "streamUpdate":
            let streams = (push["streams"]?.arrayValue ?? []).compactMap { try? Stream(json: $0) }
            let add = push["type"]?.stringValue == "add"
            room.update { content in
                let ids = Set(streams.map(\.id))
                content.streams.removeAll { ids.contains($0.id) }
                if add { content.streams.append(contentsOf: streams) }
            }
            let others = streams.filter { $0.userId != driver.user.id }
            if !others.isEmpty {
                emit(.streamUpdate(room: room.id, type: add ? .add : .delete, streams: others), room: room)
            }

        case "extraInfo":
            guard let key = push["key"]?.stringValue, let value = push["value"]?.stringValue else { return }
            room.update { $0.extraInfo[key] = value }
            if push["from"]?.int64Value != me {
                emit(.extraInfoUpdate(room: room.id, key: key, value: value), room: room)
            }

        case "magix":
            guard let from = push["from"]?.int64Value, from != me, let event = push["event"]?.stringValue else { return }
            emit(.magix(MagixEvent(room: room.id, seq: seq, from: from, event: event, payload: push["payload"] ?? .null,
                                   replayed: replayed)),
                 room: room)

        default:
            break
        }
    }
}
