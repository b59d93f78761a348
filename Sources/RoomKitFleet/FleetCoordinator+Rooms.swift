import Foundation
import RoomKit
import RoomKitLoop
import RoomKitProtocol
import RoomKitRedis

extension FleetCoordinator {
    // MARK: Logins and logouts (loop thread)

    /// Logs in to `room` with its shard's fence, if this host holds the shard
    /// and the local rule allows it (`FleetLeaseMachine.loginDecision`: at
    /// least TTL/2 of the lease left on our own clock). Otherwise the room
    /// waits for the next successful renew.
    func logIn(_ room: String) {
        guard state.value.active[room] == nil else { return }
        let fence: Int64
        switch state.value.machine.loginDecision(room, now: loop.nowMilliseconds) {
        case .notHeld:
            return
        case .wait:
            state.value.waiting.insert(room)
            return
        case .login(let granted):
            fence = granted
        }
        state.withValue { state in
            state.waiting.remove(room)
            state.active[room] = fence
        }
        let handedMember = store.handedOverMember(room: room)
        let (host, tokens, user) = (self.host, self.tokens, self.user)
        Task { [self] in
            let outcome: Result<Int64?, RoomError>
            do {
                let token = try await tokens.token(room: room, user: user.id)
                let handle = try await host.loginRoom(room, user: user, token: token, fence: fence)
                outcome = .success(handle.memberId)
            } catch let error as RoomError {
                outcome = error.code == .alreadyLoggedIn ? .success(nil) : .failure(error)
            } catch {
                outcome = .failure(RoomError(code: .internalError, message: "\(error)"))
            }
            _ = loop.execute { [self] in
                switch outcome {
                case .success(let memberId):
                    loggedIn(room, fence: fence, resumed: handedMember != nil && memberId == handedMember)
                case .failure(let error):
                    loginFailed(room, fence: fence, error)
                }
            }
        }
    }

    private func loggedIn(_ room: String, fence: Int64, resumed: Bool) {
        let active = state.value.active[room]
        if active == fence, state.value.machine.holds(room) {
            if resumed { metrics.handOverResumes.increment() }
            return
        }
        // The shard was lost or released (or the room removed) while the
        // login ran: leave at once, unless a newer login of the room runs.
        guard active == nil || active == fence else { return }
        state.value.active.removeValue(forKey: room)
        Task { [host] in try? await host.logoutRoom(room) }
    }

    private func loginFailed(_ room: String, fence: Int64, _ error: RoomError) {
        guard state.value.active[room] == fence else { return }
        state.value.active.removeValue(forKey: room)
        let shard = state.value.machine.shard(of: room)
        guard let lease = state.value.machine.leases.held[shard] else { return }
        if error.code == .staleFence {
            metrics.fenceRefusals.increment()
            let current = error.currentFence ?? 0
            logger.notice("fleet: roomd refused a stale fence; moving the counter past it",
                          metadata: ["room": "\(room)", "fence": .stringConvertible(fence), "current": .stringConvertible(current)])
            redis.evaluate(scripts.refence, keys: [keys.fence, keys.owner],
                           arguments: [String(current), hostID, String(shard), String(lease.fence)]) { [weak self] result in
                guard let self else { return }
                var newFence: Int64?
                if case .success(.integer(let value)) = result { newFence = value }
                switch state.value.machine.refenced(shard: shard, from: lease.fence, to: newFence) {
                case .refenced, .stale:
                    state.value.waiting.insert(room)
                    retryWaiting()
                }
            }
            return
        }
        logger.warning("fleet: login failed; retrying at the next renew",
                       metadata: ["room": "\(room)", "error": "\(error)"])
        state.value.waiting.insert(room)
    }

    /// Logs out of `room` now (lost shard, removed room).
    func logOut(_ room: String) {
        state.withValue { state in
            state.active.removeValue(forKey: room)
            state.waiting.remove(room)
        }
        Task { [host] in try? await host.logoutRoom(room) }
    }

    func retryWaiting() {
        for room in state.value.waiting.sorted() { logIn(room) }
    }

    /// Applies a change of the room set to this host's shards: logs in to an
    /// added room of a held shard, out of a removed one.
    func apply(_ op: String, room: String) {
        if op == "add", state.value.machine.roomAdded(room) == .mine {
            logIn(room)
        } else if op == "remove", state.value.machine.roomRemoved(room) == .mine,
                  state.value.active[room] != nil || state.value.waiting.contains(room) {
            logOut(room)
        }
    }

    // MARK: Room set

    /// Adds rooms to the fleet's room set (idempotent; real additions go to
    /// the changes stream). Loop thread only.
    func addToRoomSet(_ rooms: [String], then done: @escaping (Result<Int, RedisError>) -> Void) {
        changeRoomSet("add", rooms, then: done)
    }

    func changeRoomSet(_ op: String, _ rooms: [String], then done: @escaping (Result<Int, RedisError>) -> Void) {
        guard !rooms.isEmpty else { return done(.success(0)) }
        let batch = Array(rooms.prefix(1000))
        let rest = Array(rooms.dropFirst(1000))
        let shardKeys = batch.map { keys.rooms(fleetShard(of: $0, shards: config.shards)) }
        redis.evaluate(scripts.rooms, keys: [keys.changes] + shardKeys, arguments: [op] + batch) { [self] result in
            switch result {
            case .success(.integer(let changed)):
                if rest.isEmpty { return done(.success(Int(changed))) }
                changeRoomSet(op, rest) { more in done(more.map { $0 + Int(changed) }) }
            case .success(let other):
                done(.failure(RedisError(code: .server, message: "rooms script: \(other)")))
            case .failure(let error):
                done(.failure(error))
            }
        }
    }

    /// Reads the changes stream since the last entry seen and applies it to
    /// the shards held. Loop thread only.
    func readChanges() {
        let since = state.value.lastStreamID
        guard redis.isConnected, since != "0-0" else { return }
        redis.command(["XREAD", "COUNT", "1000", "STREAMS", keys.changes, since]) { [weak self] result in
            guard let self, case .success(.array(let streams)) = result else { return }
            for stream in streams {
                let entries = stream.array.count == 2 ? stream.array[1].array : []
                for entry in entries {
                    let parts = entry.array
                    guard parts.count == 2, let id = parts[0].string else { continue }
                    state.value.lastStreamID = id
                    var fields: [String: String] = [:]
                    var index = 0
                    let values = parts[1].array
                    while index + 1 < values.count {
                        if let key = values[index].string { fields[key] = values[index + 1].string }
                        index += 2
                    }
                    if let op = fields["op"], let room = fields["room"] { apply(op, room: room) }
                }
            }
        }
    }

    /// Starts reading the changes stream at Redis time `now` (ms).
    func startChanges(at now: Int64) {
        if state.value.lastStreamID == "0-0" { state.value.lastStreamID = "\(max(0, now - 1))-0" }
    }

    // MARK: Cursors

    /// Writes the cursors that changed since the last tick, in one script,
    /// fenced: only for shards this host still holds with that fence.
    func flushCursors(then done: (() -> Void)? = nil) {
        let dirty = store.takeDirty()
        guard !dirty.isEmpty else { done?(); return }
        var cursorKeys = [keys.owner]
        var arguments = [hostID]
        let machine = state.value.machine
        for (room, cursor) in dirty.sorted(by: { $0.key < $1.key }) {
            guard let fence = machine.cursorFence(room) else { continue }
            let shard = machine.shard(of: room)
            cursorKeys.append(keys.cursor(room))
            if let cursor {
                arguments += [String(shard), String(fence), "set"] + FleetSessionStore.fields(cursor)
            } else {
                arguments += [String(shard), String(fence), "del", "", "", "", "", "", ""]
            }
        }
        guard cursorKeys.count > 1 else { done?(); return }
        redis.evaluate(scripts.cursors, keys: cursorKeys, arguments: arguments) { [logger] result in
            if case .failure(let error) = result {
                logger.warning("fleet cursors not written", metadata: ["error": "\(error)"])
            }
            done?()
        }
    }
}

extension FleetSessionStore {
    /// The member ID of the handed-over cursor waiting for `room`, if any.
    func handedOverMember(room: String) -> Int64? {
        handedOver(room: room)?.memberId
    }
}
