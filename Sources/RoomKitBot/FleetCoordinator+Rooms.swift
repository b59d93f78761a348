import Foundation
import RoomKit
import RoomKitLoop
import RoomKitProtocol
import RoomKitRedis

extension FleetCoordinator {
    // MARK: Logins and logouts (loop thread)

    /// Logs in to `room` with its shard's fence, if this host holds the shard
    /// and the local rule allows it: at least TTL/2 of the lease left on our
    /// own clock. Otherwise the room waits for the next successful renew.
    func logIn(_ room: String) {
        let shard = fleetShard(of: room, shards: config.shards)
        guard let entry = held[shard], entry.rooms.contains(room), active[room] == nil else { return }
        let now = loop.nowMilliseconds
        guard entry.validUntil > now, entry.validUntil - now >= ttlMs / 2 else {
            waiting.insert(room)
            return
        }
        waiting.remove(room)
        active[room] = entry.fence
        let fence = entry.fence
        let handedMember = store.handedOverMember(room: room)
        let (host, tokens, user) = (self.host, self.tokens, self.user)
        Task {
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
        let shard = fleetShard(of: room, shards: config.shards)
        if active[room] == fence, held[shard]?.rooms.contains(room) == true {
            if resumed { metrics.handOverResumes.increment() }
            return
        }
        // The shard was lost or released (or the room removed) while the
        // login ran: leave at once, unless a newer login of the room runs.
        guard active[room] == nil || active[room] == fence else { return }
        active.removeValue(forKey: room)
        Task { [host] in try? await host.logoutRoom(room) }
    }

    private func loginFailed(_ room: String, fence: Int64, _ error: RoomError) {
        guard active[room] == fence else { return }
        active.removeValue(forKey: room)
        let shard = fleetShard(of: room, shards: config.shards)
        guard let entry = held[shard] else { return }
        if error.code == .staleFence {
            metrics.fenceRefusals.increment()
            let current = error.currentFence ?? 0
            logger.notice("fleet: roomd refused a stale fence; moving the counter past it",
                          metadata: ["room": "\(room)", "fence": .stringConvertible(fence), "current": .stringConvertible(current)])
            redis.evaluate(scripts.refence, keys: [keys.fence, keys.owner],
                           arguments: [String(current), hostID, String(shard), String(entry.fence)]) { [self] result in
                if case .success(.integer(let newFence)) = result, newFence > 0, held[shard]?.fence == entry.fence {
                    held[shard]?.fence = newFence
                }
                waiting.insert(room)
                retryWaiting()
            }
            return
        }
        logger.warning("fleet: login failed; retrying at the next renew",
                       metadata: ["room": "\(room)", "error": "\(error)"])
        waiting.insert(room)
    }

    /// Logs out of `room` now (lost shard, removed room).
    func logOut(_ room: String) {
        active.removeValue(forKey: room)
        waiting.remove(room)
        Task { [host] in try? await host.logoutRoom(room) }
    }

    func retryWaiting() {
        for room in waiting.sorted() { logIn(room) }
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
        guard redis.isConnected, lastStreamID != "0-0" else { return }
        redis.command(["XREAD", "COUNT", "1000", "STREAMS", keys.changes, lastStreamID]) { [self] result in
            guard case .success(.array(let streams)) = result else { return }
            for stream in streams {
                let entries = stream.array.count == 2 ? stream.array[1].array : []
                for entry in entries {
                    let parts = entry.array
                    guard parts.count == 2, let id = parts[0].string else { continue }
                    lastStreamID = id
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
        if lastStreamID == "0-0" { lastStreamID = "\(max(0, now - 1))-0" }
    }

    private func apply(_ op: String, room: String) {
        let shard = fleetShard(of: room, shards: config.shards)
        guard held[shard] != nil else { return }
        if op == "add" {
            held[shard]?.rooms.insert(room)
            logIn(room)
        } else if op == "remove" {
            held[shard]?.rooms.remove(room)
            if active[room] != nil || waiting.contains(room) { logOut(room) }
        }
    }

    // MARK: Cursors

    /// Writes the cursors that changed since the last tick, in one script,
    /// fenced: only for shards this host still holds with that fence.
    func flushCursors(then done: (() -> Void)? = nil) {
        let dirty = store.takeDirty()
        guard !dirty.isEmpty else { done?(); return }
        var cursorKeys = [keys.owner]
        var arguments = [hostID]
        for (room, cursor) in dirty.sorted(by: { $0.key < $1.key }) {
            let shard = fleetShard(of: room, shards: config.shards)
            guard let fence = held[shard]?.fence ?? releasing[shard]?.fence else { continue }
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
