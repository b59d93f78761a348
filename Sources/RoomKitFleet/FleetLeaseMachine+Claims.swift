extension FleetLeaseMachine {
    // MARK: Claim

    /// What a claim tick does.
    public enum ClaimDueResult: Sendable, Hashable {
        /// Run the claim script; `holding`: shards held or being handed
        /// back; `mayTake`: whether it may take shards.
        case send(holding: Int, mayTake: Bool)
        /// Redis is down: claims stop until the next connect and run ID.
        case redisDown
        /// No claim round now (one runs, no renew succeeded yet, or the run
        /// ID is not known yet).
        case skip
    }

    /// Input: a claim round is due at `now`. `load`: the process's CPU share
    /// since the last round.
    public mutating func claimDue(now: UInt64, redisUp: Bool, roomdHealthy: Bool, load: Double) -> ClaimDueResult {
        guard redisUp else {
            _ = gate.lostRedis()
            return .redisDown
        }
        let leases = self.leases
        switch leases.claim {
        case .awaiting:
            return .skip
        case .idle:
            break
        }
        guard let firstClaimAt = leases.firstClaimAt else { return .skip }
        let wouldTake = !isDraining && roomdHealthy && now >= firstClaimAt
            && (leases.held.isEmpty || load < settings.loadThreshold)
        switch gate.claimDue(now: now, wouldTake: wouldTake) {
        case .skip:
            return .skip
        case .claim(let mayTake):
            withLeases { $0.claim = .awaiting(sentAt: now) }
            return .send(holding: leases.held.count + leases.releasing.count, mayTake: mayTake)
        }
    }

    /// What a claim answer does.
    public enum ClaimAnsweredResult: Sendable, Hashable {
        /// The round answered: log in to `rooms` (of the `claimed` shards
        /// just taken), then do `rebalance`.
        case answered(claimed: Int, rooms: [String], rebalance: RebalanceResult)
        /// The round failed (log it).
        case failed
        /// No round was running.
        case none
    }

    /// What to hand back after a claim round.
    public enum RebalanceResult: Sendable, Hashable {
        /// Nothing: at or under target + 1 (or roomd unreachable, or a release runs).
        case keep
        /// Above target + 1: log out of these shards' rooms, then `releaseReady()`.
        case release(FleetRelease)
        /// Draining: write these shards' cursors, then `releaseReady()`; the
        /// rooms stay until their next owner resumes them.
        case handOver(FleetRelease)
        /// Draining, nothing to hand back now (check the hand-overs).
        case handOverPending
    }

    /// Input: the claim script answered (nil: it failed). The shards it
    /// took are held from the round's send time, for one TTL.
    public mutating func claimAnswered(_ reply: FleetClaimReply?, roomdHealthy: Bool) -> ClaimAnsweredResult {
        let ttl = settings.ttl
        var sentAt: UInt64 = 0
        switch leases.claim {
        case .idle:
            return .none
        case .awaiting(let sent):
            sentAt = sent
            withLeases { $0.claim = .idle }
        }
        guard let reply else { return .failed }
        switch state {
        case .serving:
            break
        case .draining(let leases, let since, _):
            // Only a round sent after the drain began can say whether anyone else serves.
            if sentAt >= since { state = .draining(leases, since: since, servingHosts: reply.servingHosts) }
        }
        var byShard: [Int: Set<String>] = [:]
        for room in reply.rooms { byShard[shard(of: room), default: []].insert(room) }
        let rooms: [String] = withLeases { leases in
            leases.target = reply.target
            leases.liveHosts = reply.liveHosts
            var rooms: [String] = []
            for (shard, fence) in reply.claimed.sorted(by: { $0.key < $1.key }) {
                let shardRooms = byShard[shard] ?? []
                leases.held[shard] = FleetLease(fence: fence, validUntil: sentAt + ttl, rooms: shardRooms)
                rooms += shardRooms
            }
            return rooms.sorted()
        }
        return .answered(claimed: reply.claimed.count, rooms: rooms, rebalance: rebalance(roomdHealthy: roomdHealthy))
    }

    /// Chooses the shards to hand back: above target + 1 when serving, every
    /// shard when draining; `releaseBatch` per round, the shards with the
    /// fewest rooms first (the cheapest hand-over).
    mutating func rebalance(roomdHealthy: Bool) -> RebalanceResult {
        let batch = settings.releaseBatch
        let draining = isDraining
        return withLeases { leases in
            switch leases.release {
            case .handingBack, .awaitingRedis:
                return draining ? .handOverPending : .keep
            case .idle:
                break
            }
            let count: Int
            if draining {
                guard !leases.held.isEmpty else { return .handOverPending }
                count = min(leases.held.count, batch)
            } else {
                guard leases.held.count > leases.target + 1, roomdHealthy else { return .keep }
                count = min(leases.held.count - leases.target, batch)
            }
            let chosen = leases.held.sorted { ($0.value.rooms.count, $0.key) < ($1.value.rooms.count, $1.key) }.prefix(count)
            var release = FleetRelease(shards: [:], handOver: draining)
            for (shard, lease) in chosen {
                leases.held.removeValue(forKey: shard)
                leases.releasing[shard] = lease
                release.shards[shard] = lease
            }
            leases.release = .handingBack(release)
            return draining ? .handOver(release) : .release(release)
        }
    }

    /// What to do once a release's rooms are logged out (or their cursors written).
    public enum ReleaseReadyResult: Sendable, Hashable {
        /// Run the release script for these (no renew carries them any more:
        /// a renew after the release would see no owner and re-assert them).
        case runScript(FleetRelease)
        /// No release was waiting.
        case none
    }

    /// Input: the driver finished the rooms of the release in progress.
    public mutating func releaseReady() -> ReleaseReadyResult {
        withLeases { leases in
            switch leases.release {
            case .idle, .awaitingRedis:
                return .none
            case .handingBack(let release):
                for shard in release.shards.keys { leases.releasing.removeValue(forKey: shard) }
                leases.release = .awaitingRedis
                return .runScript(release)
            }
        }
    }

    /// What a release answer does.
    public enum ReleaseAnsweredResult: Sendable, Hashable {
        /// Released; the next one may start.
        case released
        /// The script failed (log it: the leases will expire); the next may start.
        case failed
        /// No release script was running.
        case none
    }

    /// Input: the release script answered (`ok`: it succeeded).
    public mutating func releaseAnswered(ok: Bool) -> ReleaseAnsweredResult {
        withLeases { leases in
            switch leases.release {
            case .idle, .handingBack:
                return .none
            case .awaitingRedis:
                leases.release = .idle
                return ok ? .released : .failed
            }
        }
    }
}
