import Foundation
import RoomKitRedis

extension FleetCoordinator {
    // MARK: Claim, rebalance, drain

    /// One claim round: take expired shards up to the target (unless
    /// draining or loaded), then release shards above target + 1 (all of
    /// them, at a bounded rate, when draining). Loop thread only.
    func claim() {
        sampleLoad()
        let up = redis.isConnected
        metrics.redisUp.record(up ? 1 : 0)
        let now = loop.nowMilliseconds
        let decision = state.value.machine.claimDue(now: now, redisUp: up, roomdHealthy: roomdHealthy, load: state.value.load)
        guard case .send(let holding, let mayTake) = decision else { return }
        let arguments = [hostID, String(ttlMs), String(config.shards), String(holding),
                         String(config.shards), mayTake ? "1" : "0"]
        redis.evaluate(scripts.claim, keys: [keys.lease, keys.owner, keys.hosts, keys.fence, keys.draining],
                       arguments: arguments) { [weak self] result in self?.claimAnswered(result) }
    }

    private func claimAnswered(_ result: Result<RedisValue, RedisError>) {
        var reply: FleetClaimReply?
        var cursors: [(room: String, hash: [RedisValue])] = []
        if case .success(.array(let values)) = result, values.count == 7 {
            var claimed: [Int: Int64] = [:]
            let pairs = values[3].array
            var index = 0
            while index + 1 < pairs.count {
                if let shard = pairs[index].integer.map(Int.init), let fence = pairs[index + 1].integer { claimed[shard] = fence }
                index += 2
            }
            let roomValues = values[4].array
            index = 0
            while index + 1 < roomValues.count {
                if let room = roomValues[index].string { cursors.append((room, roomValues[index + 1].array)) }
                index += 2
            }
            reply = FleetClaimReply(target: Int(values[1].integer ?? 0), liveHosts: Int(values[2].integer ?? 0),
                                    servingHosts: values[5].integer.map(Int.init), claimed: claimed, rooms: cursors.map(\.room))
            metrics.liveHosts.record(reply?.liveHosts ?? 0)
            metrics.unhomedRooms.record(Int(values[6].integer ?? 0))
        }
        switch state.value.machine.claimAnswered(reply, roomdHealthy: roomdHealthy) {
        case .none:
            break
        case .failed:
            logger.warning("fleet claim failed", metadata: ["error": "\(result)"])
        case .answered(let claimed, let rooms, let rebalance):
            if claimed > 0 {
                // The previous owners' cursors: the logins below resume their sessions.
                for (room, hash) in cursors {
                    if let cursor = FleetSessionStore.cursor(room: room, hash: hash), cursor.user.id == user.id {
                        store.handOver(cursor)
                    }
                }
                metrics.claims.increment(by: Int64(claimed))
                let held = state.value.machine.leases.held.count
                metrics.shardsHeld.record(held)
                logger.info("fleet: claimed shards", metadata: ["count": .stringConvertible(claimed), "rooms": .stringConvertible(rooms.count),
                                                                "held": .stringConvertible(held),
                                                                "target": .stringConvertible(state.value.machine.leases.target)])
                for room in rooms { logIn(room) }
            }
            perform(rebalance)
        }
    }

    private func perform(_ rebalance: FleetLeaseMachine.RebalanceResult) {
        switch rebalance {
        case .keep:
            break
        case .handOverPending:
            checkHandOvers()
        case .handOver(let release):
            checkHandOvers()
            handOver(release)
        case .release(let release):
            giveBack(release)
        }
    }

    /// Rebalance: log out of the released shards' rooms, then release them.
    private func giveBack(_ release: FleetRelease) {
        let rooms = release.rooms
        for room in rooms { state.value.waiting.remove(room) }
        metrics.shardsHeld.record(state.value.machine.leases.held.count)
        logger.info("fleet: rebalancing shards",
                    metadata: ["count": .stringConvertible(release.shards.count), "rooms": .stringConvertible(rooms.count),
                               "target": .stringConvertible(state.value.machine.leases.target)])
        let host = self.host
        Task { [self] in
            await withTaskGroup(of: Void.self) { group in
                for room in rooms { group.addTask { try? await host.logoutRoom(room) } }
            }
            _ = loop.execute { [self] in
                for room in rooms { state.value.active.removeValue(forKey: room) }
                releaseReady(keepLeases: false)
            }
        }
    }

    /// The release's rooms are done: run the release script.
    func releaseReady(keepLeases: Bool) {
        guard case .runScript(let release) = state.value.machine.releaseReady() else { return }
        var arguments = [hostID, keepLeases ? "1" : "0"]
        for (shard, fence) in release.pairs { arguments += [String(shard), String(fence)] }
        redis.evaluate(scripts.release, keys: [keys.lease, keys.owner], arguments: arguments) { [weak self] result in
            guard let self else { return }
            switch state.value.machine.releaseAnswered(ok: (try? result.get()) != nil) {
            case .released, .none:
                break
            case .failed:
                logger.warning("fleet release failed (the leases will expire)", metadata: ["error": "\(result)"])
            }
        }
    }

    /// Process CPU time over wall time since the last sample (one core = 1).
    private func sampleLoad() {
        var usage = rusage()
        #if os(Linux)
        getrusage(RUSAGE_SELF.rawValue, &usage)
        #else
        getrusage(RUSAGE_SELF, &usage)
        #endif
        let cpu = Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec)
            + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1_000_000
        let wall = loop.nowMilliseconds
        state.withValue { state in
            if let previous = state.cpuSample, wall > previous.wall {
                state.load = max(0, cpu - previous.cpu) / (Double(wall - previous.wall) / 1000)
            }
            state.cpuSample = (wall, cpu)
        }
    }
}
