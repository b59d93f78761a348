/// A shard this host holds (or is handing back).
public struct FleetLease: Sendable, Hashable {
    /// The fence the shard was claimed (or re-fenced) with.
    public var fence: Int64
    /// Monotonic ms until which the lease is surely ours: when the last
    /// successful renew (or the claim) was *sent*, plus the TTL.
    public var validUntil: UInt64
    /// The shard's rooms, as this host knows them.
    public var rooms: Set<String>

    /// A lease on `fence` valid until `validUntil`, for `rooms`.
    public init(fence: Int64, validUntil: UInt64, rooms: Set<String>) {
        self.fence = fence
        self.validUntil = validUntil
        self.rooms = rooms
    }
}

/// One fleet host's leases and claims (docs/FLEET.md) as a pure state
/// machine, in the shape of `RoomSessionMachine`: one method per input
/// (a renew tick, a renew answer, a claim tick, a claim answer, a lease
/// check, Redis up or lost and its run ID, a drain, a release done), each
/// returning what the driver (`FleetCoordinator`, which does the Redis I/O
/// and the logins) must do. No Redis, no loop, no clock: times are the
/// loop's milliseconds, passed in. Whether a claim may take shards after a
/// new Redis process is `FleetClaimMachine`'s decision, kept inside.
public struct FleetLeaseMachine: Sendable {
    /// The fixed numbers the machine decides with.
    public struct Settings: Sendable, Hashable {
        /// Number of shards of the fleet.
        public var shards: Int
        /// Lease time to live (ms).
        public var ttl: UInt64
        /// Mean time between claim rounds (ms): the first claim waits this long after the first renew.
        public var claimInterval: UInt64
        /// Shards released per round when rebalancing or draining.
        public var releaseBatch: Int
        /// A host at or above this load takes no more shards (unless it holds none).
        public var loadThreshold: Double

        /// The settings of a fleet (`FleetConfig`'s numbers, in ms).
        public init(shards: Int, ttl: UInt64, claimInterval: UInt64, releaseBatch: Int, loadThreshold: Double) {
            self.shards = shards
            self.ttl = ttl
            self.claimInterval = claimInterval
            self.releaseBatch = releaseBatch
            self.loadThreshold = loadThreshold
        }
    }

    /// The renew script's exchange.
    public enum RenewExchange: Sendable, Hashable {
        /// No renew is running.
        case idle
        /// A renew sent at `sentAt` carries `shards` (shard → fence).
        case awaiting(sentAt: UInt64, shards: [Int: Int64])
    }

    /// The claim script's exchange.
    public enum ClaimExchange: Sendable, Hashable {
        /// No claim round is running.
        case idle
        /// A claim round was sent at `sentAt`.
        case awaiting(sentAt: UInt64)
    }

    /// Shards on their way back to the fleet.
    public enum ReleaseExchange: Sendable, Hashable {
        /// Nothing is being released.
        case idle
        /// The driver logs out of (or flushes the cursors of) these shards'
        /// rooms; the shards are still renewed meanwhile.
        case handingBack(FleetRelease)
        /// The release script runs; no renew carries these shards any more.
        case awaitingRedis
    }

    /// Everything the host knows about its leases.
    public struct Leases: Sendable, Hashable {
        /// Shards held.
        public var held: [Int: FleetLease] = [:]
        /// Shards being handed back: still renewed until the release script runs.
        public var releasing: [Int: FleetLease] = [:]
        /// The renew script's exchange.
        public var renew: RenewExchange = .idle
        /// The claim script's exchange.
        public var claim: ClaimExchange = .idle
        /// The release in progress.
        public var release: ReleaseExchange = .idle
        /// This host's share of the shards, from the last claim round.
        public var target = 0
        /// Live hosts, from the last claim round.
        public var liveHosts = 0
        /// When the first claim may run: one claim interval after the first
        /// successful renew, so hosts started together see each other first.
        public var firstClaimAt: UInt64?
    }

    /// Where the host is.
    public enum State: Sendable, Hashable {
        /// Serving: renewing, claiming and rebalancing.
        case serving(Leases)
        /// Draining (SIGTERM) `since` then: handing every shard back, never
        /// taking one. `servingHosts`: live hosts not draining, as of a claim
        /// round sent after the drain began (nil: none answered yet).
        case draining(Leases, since: UInt64, servingHosts: Int?)
    }

    /// The current state.
    public internal(set) var state: State = .serving(Leases())
    /// When claims may take shards (after a new Redis process, not before
    /// every owner had one renew interval to re-assert its shards).
    public internal(set) var gate: FleetClaimMachine
    /// The fixed numbers.
    public let settings: Settings
    /// The `run_id` of the Redis process last seen (nil: none yet).
    public internal(set) var redisRunID: String?

    /// A serving host with no shards; claims wait one renew interval (TTL/5)
    /// after a new Redis process.
    public init(settings: Settings) {
        self.settings = settings
        gate = FleetClaimMachine(renewInterval: settings.ttl / 5)
    }

    /// The leases, whatever the state.
    public var leases: Leases {
        switch state {
        case .serving(let leases), .draining(let leases, _, _):
            return leases
        }
    }

    /// Whether the host drains.
    public var isDraining: Bool {
        switch state {
        case .serving: return false
        case .draining: return true
        }
    }

    /// The shard of `room` in this fleet.
    public func shard(of room: String) -> Int {
        fleetShard(of: room, shards: settings.shards)
    }

    mutating func withLeases<Result>(_ body: (inout Leases) -> Result) -> Result {
        switch state {
        case .serving(var leases):
            let result = body(&leases)
            state = .serving(leases)
            return result
        case .draining(var leases, let since, let serving):
            let result = body(&leases)
            state = .draining(leases, since: since, servingHosts: serving)
            return result
        }
    }
}

/// Shards chosen to go back to the fleet, with what their rooms need.
public struct FleetRelease: Sendable, Hashable {
    /// Shard → its lease as it was when chosen.
    public var shards: [Int: FleetLease]
    /// Whether the shards are handed over (a drain: the cursors stay in
    /// Redis and the rooms are not logged out) or given back (a rebalance:
    /// log out first).
    public var handOver: Bool

    /// The shards' rooms.
    public var rooms: [String] { shards.values.flatMap(\.rooms).sorted() }
    /// The release script's (shard, fence) pairs, in shard order.
    public var pairs: [(shard: Int, fence: Int64)] {
        shards.sorted { $0.key < $1.key }.map { ($0.key, $0.value.fence) }
    }
}

/// A shard taken from this host: log out of its rooms now.
public struct FleetLostShard: Sendable, Hashable {
    /// The shard.
    public var shard: Int
    /// Its rooms.
    public var rooms: Set<String>
    /// Why (for the log).
    public var why: String

    /// `shard` with `rooms`, lost because `why`.
    public init(shard: Int, rooms: Set<String>, why: String) {
        self.shard = shard
        self.rooms = rooms
        self.why = why
    }
}

/// The shard of a room: FNV-1a (32 bit) of its UTF-8 bytes, mod `shards`.
/// Stable across hosts, processes and releases (documented in FLEET.md).
public func fleetShard(of room: String, shards: Int) -> Int {
    var hash: UInt32 = 2_166_136_261
    for byte in room.utf8 {
        hash ^= UInt32(byte)
        hash = hash &* 16_777_619
    }
    return Int(hash % UInt32(shards))
}
