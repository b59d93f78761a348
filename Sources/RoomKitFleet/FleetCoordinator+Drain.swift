import RoomKitRedis

extension FleetCoordinator {
    /// One drain round's hand-over: the shards go back *without* logging out
    /// of their rooms. Their cursors are written first and kept in Redis, the
    /// shards are released (their leases expire at once), and the next owner
    /// resumes the sessions, so the other members see nothing. This host
    /// logs out of a room only once the next owner's cursor has replaced its
    /// own (roomd then answers 1002002: the session has moved). Rooms not
    /// taken over by the drain timeout are logged out when the bot stops.
    /// Loop thread only.
    func handOver(_ release: FleetRelease) {
        var rooms: [String: String] = [:]
        state.withValue { state in
            for (_, lease) in release.shards {
                for room in lease.rooms {
                    state.waiting.remove(room)
                    if state.active[room] != nil { rooms[room] = "\(hostID)|\(lease.fence)" }
                }
            }
        }
        metrics.shardsHeld.record(state.value.machine.leases.held.count)
        logger.info("fleet: draining shards", metadata: ["count": .stringConvertible(release.shards.count),
                                                         "rooms": .stringConvertible(rooms.count)])
        // Every cursor of these rooms is in Redis before anyone may claim them.
        flushCursors { [self] in
            state.withValue { state in
                for room in rooms.keys { state.active.removeValue(forKey: room) }
                state.handingOver.merge(rooms) { _, new in new }
            }
            releaseReady(keepLeases: true)
        }
    }

    /// Logs out of the handed-over rooms whose cursor now belongs to
    /// another owner (or is gone). Loop thread only.
    func checkHandOvers() {
        guard !state.value.handingOver.isEmpty else { return }
        let rooms = state.value.handingOver.keys.sorted().prefix(1000).map { $0 }
        redis.evaluate(scripts.owners, keys: rooms.map { keys.cursor($0) }, arguments: []) { [weak self] result in
            guard let self, case .success(.array(let owners)) = result, owners.count == rooms.count else { return }
            for (room, owner) in zip(rooms, owners) {
                guard let mine = state.value.handingOver[room], owner.string != mine else { continue }
                state.value.handingOver.removeValue(forKey: room)
                Task { [host] in try? await host.logoutRoom(room) }
            }
        }
    }
}
