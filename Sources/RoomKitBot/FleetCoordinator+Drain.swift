import RoomKitRedis

extension FleetCoordinator {
    /// One drain round: hand `releaseBatch` shards over *without* logging out
    /// of their rooms. Their cursors are written first and kept in Redis, the
    /// shards are released (their leases expire at once), and the next owner
    /// resumes the sessions, so the other members see nothing. This host
    /// logs out of a room only once the next owner's cursor has replaced its
    /// own (roomd then answers 1002002: the session has moved). Rooms not
    /// taken over by the drain timeout are logged out when the bot stops.
    /// Loop thread only.
    func handOverBatch() {
        checkHandOvers()
        guard !releaseInFlight, !held.isEmpty else { return }
        let chosen = held.sorted { ($0.value.rooms.count, $0.key) < ($1.value.rooms.count, $1.key) }
            .prefix(config.releaseBatch)
        releaseInFlight = true
        var rooms: [String: String] = [:]
        for (shard, entry) in chosen {
            held.removeValue(forKey: shard)
            releasing[shard] = entry
            for room in entry.rooms {
                waiting.remove(room)
                if active[room] != nil { rooms[room] = "\(hostID)|\(entry.fence)" }
            }
        }
        metrics.shardsHeld.record(held.count)
        logger.info("fleet: draining shards", metadata: ["count": .stringConvertible(chosen.count), "rooms": .stringConvertible(rooms.count)])
        let shards = chosen.map { ($0.key, $0.value.fence) }
        // Every cursor of these rooms is in Redis before anyone may claim them.
        flushCursors { [self] in
            for (shard, _) in shards { releasing.removeValue(forKey: shard) }
            for room in rooms.keys { active.removeValue(forKey: room) }
            handingOver.merge(rooms) { _, new in new }
            var arguments = [hostID, "1"]
            for (shard, fence) in shards { arguments += [String(shard), String(fence)] }
            redis.evaluate(scripts.release, keys: [keys.lease, keys.owner], arguments: arguments) { [self] result in
                releaseInFlight = false
                if case .failure(let error) = result {
                    logger.warning("fleet release failed (the leases will expire)", metadata: ["error": "\(error)"])
                }
            }
        }
    }

    /// Logs out of the handed-over rooms whose cursor now belongs to
    /// another owner (or is gone). Loop thread only.
    func checkHandOvers() {
        guard !handingOver.isEmpty else { return }
        let rooms = handingOver.keys.sorted().prefix(1000).map { $0 }
        redis.evaluate(scripts.owners, keys: rooms.map { keys.cursor($0) }, arguments: []) { [self] result in
            guard case .success(.array(let owners)) = result, owners.count == rooms.count else { return }
            for (room, owner) in zip(rooms, owners) {
                guard let mine = handingOver[room], owner.string != mine else { continue }
                handingOver.removeValue(forKey: room)
                Task { [host] in try? await host.logoutRoom(room) }
            }
        }
    }
}
