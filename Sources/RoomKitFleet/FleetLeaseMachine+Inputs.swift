/// The renew script's answer: Redis time, the shards it no longer gives
/// this host, and the shards it found without any record and re-asserted.
public struct FleetRenewReply: Sendable, Hashable {
    /// Redis `TIME` in ms (where the changes stream starts).
    public var redisTime: Int64
    /// Shards taken or gone.
    public var lost: Set<Int>
    /// Shards Redis had no record of, re-asserted for this host.
    public var reasserted: [Int]

    /// A parsed renew reply.
    public init(redisTime: Int64, lost: Set<Int>, reasserted: [Int]) {
        self.redisTime = redisTime
        self.lost = lost
        self.reasserted = reasserted
    }
}

/// The claim script's answer.
public struct FleetClaimReply: Sendable, Hashable {
    /// This host's share of the shards.
    public var target: Int
    /// Live hosts.
    public var liveHosts: Int
    /// Live hosts not draining (nil: not reported).
    public var servingHosts: Int?
    /// Shards taken by this round → their new fence.
    public var claimed: [Int: Int64]
    /// The rooms of the claimed shards.
    public var rooms: [String]

    /// A parsed claim reply.
    public init(target: Int, liveHosts: Int, servingHosts: Int?, claimed: [Int: Int64], rooms: [String]) {
        self.target = target
        self.liveHosts = liveHosts
        self.servingHosts = servingHosts
        self.claimed = claimed
        self.rooms = rooms
    }
}

extension FleetLeaseMachine {
    // MARK: Redis connection

    /// What to do once Redis is (re)connected.
    public enum ConnectedResult: Sendable, Hashable {
        /// Renew at once, and ask Redis for its run ID (`INFO server`).
        case renewAndAskRunID
    }

    /// Input: the connection to Redis is up.
    public mutating func redisConnected() -> ConnectedResult {
        switch gate.connected() {
        case .askRunID, .none:
            return .renewAndAskRunID
        }
    }

    /// What the run ID means.
    public enum RunIDResult: Sendable, Hashable {
        /// A new Redis process (or the first): add the configured and held
        /// rooms back to the room set. Claims take nothing before
        /// `holdClaimsUntil` (nil: no hold).
        case newRedis(holdClaimsUntil: UInt64?)
        /// The same process as before: nothing was lost.
        case sameRedis
    }

    /// Input: Redis answered `INFO server` at `now` with `runID` (nil: it reported none).
    public mutating func runIDObserved(_ runID: String?, now: UInt64) -> RunIDResult {
        var hold: UInt64?
        switch gate.runIDObserved(runID, now: now) {
        case .newRedis(let until):
            hold = until > now ? until : nil
        case .sameRedis, .none:
            break
        }
        if let runID, runID == redisRunID { return .sameRedis }
        redisRunID = runID
        return .newRedis(holdClaimsUntil: hold)
    }

    /// What an unanswered `INFO server` means.
    public enum RunIDFailedResult: Sendable, Hashable {
        /// Treated as a new process for claims (the safe side); claims take
        /// nothing before `holdClaimsUntil` (nil: no hold). The room set is
        /// not re-added (Redis did not answer).
        case assumeNewRedis(holdClaimsUntil: UInt64?)
    }

    /// Input: `INFO server` failed at `now`.
    public mutating func runIDFailed(now: UInt64) -> RunIDFailedResult {
        switch gate.runIDObserved(nil, now: now) {
        case .newRedis(let until):
            return .assumeNewRedis(holdClaimsUntil: until > now ? until : nil)
        case .sameRedis, .none:
            return .assumeNewRedis(holdClaimsUntil: nil)
        }
    }

    /// What a lost connection means.
    public enum LostResult: Sendable, Hashable {
        /// Claims stop until the next connect and run ID; the leases run on
        /// the local clock (`leaseCheck`).
        case stopClaiming
        /// Already known.
        case none
    }

    /// Input: the connection to Redis was lost.
    public mutating func redisLost() -> LostResult {
        switch gate.lostRedis() {
        case .stopClaiming: return .stopClaiming
        case .none: return .none
        }
    }

    // MARK: Renew

    /// What a renew tick does.
    public enum RenewDueResult: Sendable, Hashable {
        /// Run the renew script for `shards` (shard → fence; empty while
        /// roomd is unreachable, so the leases lapse); `reportDraining`: tell
        /// the fleet this host takes no shards. `lapsing`: shards left to lapse.
        case send(shards: [Int: Int64], reportDraining: Bool, lapsing: Int)
        /// No renew now (one runs, or Redis is down).
        case skip
    }

    /// Input: a renew is due at `now` (tick, connect or drain).
    public mutating func renewDue(now: UInt64, redisUp: Bool, roomdHealthy: Bool) -> RenewDueResult {
        let draining = isDraining
        return withLeases { leases in
            switch leases.renew {
            case .awaiting:
                return .skip
            case .idle:
                guard redisUp else { return .skip }
                var shards: [Int: Int64] = [:]
                if roomdHealthy {
                    for (shard, lease) in leases.releasing { shards[shard] = lease.fence }
                    for (shard, lease) in leases.held { shards[shard] = lease.fence }
                }
                leases.renew = .awaiting(sentAt: now, shards: shards)
                return .send(shards: shards, reportDraining: draining || !roomdHealthy,
                             lapsing: roomdHealthy ? 0 : leases.held.count)
            }
        }
    }

    /// What a renew answer does.
    public enum RenewAnsweredResult: Sendable, Hashable {
        /// Renewed: log out of the `lost` shards' rooms, add the rooms of
        /// the `reasserted` shards back to the room set, start the changes
        /// stream at `redisTime`, flush the cursors, retry waiting logins.
        case renewed(lost: [FleetLostShard], reasserted: Int, reassertedRooms: [String], redisTime: Int64)
        /// The renew failed (log it); the leases run on the local clock.
        case failed
        /// No renew was running.
        case none
    }

    /// Input: the renew script answered at `now` (nil: it failed).
    public mutating func renewAnswered(_ reply: FleetRenewReply?, now: UInt64) -> RenewAnsweredResult {
        let ttl = settings.ttl, claimInterval = settings.claimInterval
        let answered: (sentAt: UInt64, shards: [Int: Int64])? = withLeases { leases in
            switch leases.renew {
            case .idle:
                return nil
            case .awaiting(let sentAt, let shards):
                leases.renew = .idle
                return (sentAt, shards)
            }
        }
        guard let answered else { return .none }
        guard let reply else { return .failed }
        let lost: [FleetLostShard] = withLeases { leases in
            for (shard, fence) in answered.shards where !reply.lost.contains(shard) {
                if leases.held[shard]?.fence == fence { leases.held[shard]?.validUntil = answered.sentAt + ttl }
                if leases.releasing[shard]?.fence == fence { leases.releasing[shard]?.validUntil = answered.sentAt + ttl }
            }
            if leases.firstClaimAt == nil { leases.firstClaimAt = now + claimInterval }
            return reply.lost.sorted().compactMap { Self.lose($0, from: &leases, why: "lease taken or gone in Redis") }
        }
        let held = leases.held
        let rooms = reply.reasserted.flatMap { held[$0]?.rooms ?? [] }.sorted()
        return .renewed(lost: lost, reasserted: reply.reasserted.count, reassertedRooms: rooms, redisTime: reply.redisTime)
    }

    /// Input: the local lease check at `now`. A lease whose TTL ran out on
    /// our own clock (since the last successful renew was sent) is lost,
    /// whatever Redis says: the result lists the shards whose rooms to log
    /// out at once. Expired shards being handed back are just forgotten.
    public mutating func leaseCheck(now: UInt64) -> [FleetLostShard] {
        withLeases { leases in
            for (shard, lease) in leases.releasing where lease.validUntil <= now {
                leases.releasing.removeValue(forKey: shard)
            }
            let expired = leases.held.filter { $0.value.validUntil <= now }.keys.sorted()
            return expired.compactMap { Self.lose($0, from: &leases, why: "lease expired on the local clock") }
        }
    }

    /// Forgets `shard`; its rooms if it was held (not when being handed back).
    static func lose(_ shard: Int, from leases: inout Leases, why: String) -> FleetLostShard? {
        guard let lease = leases.held.removeValue(forKey: shard) else {
            leases.releasing.removeValue(forKey: shard)
            return nil
        }
        return FleetLostShard(shard: shard, rooms: lease.rooms, why: why)
    }
}
