import Foundation
import Logging
import RoomKit
import RoomKitFleet
import RoomKitLoop
import RoomKitProtocol
import RoomKitRedis

/// One fleet host's share of the room set (docs/FLEET.md): it renews its
/// shard leases every TTL/5, claims expired shards about once a second,
/// releases shards above its target, logs in to the rooms of the shards it
/// holds with each shard's fence, and logs out at once from the rooms of a
/// shard it lost. Every Redis operation is one script per tick.
///
/// Loop thread only, except the `async` entry points, which hop to the loop.
final class FleetCoordinator: @unchecked Sendable {
    // @unchecked Sendable: every mutable field is touched on the loop thread
    // only; the async entry points reach them through `loop.execute`.

    /// A shard this host holds.
    struct Held {
        var fence: Int64
        /// Monotonic ms until which the lease is surely ours: when the last
        /// successful renew (or the claim) was *sent*, plus the TTL.
        var validUntil: UInt64
        var rooms: Set<String>
    }

    let config: FleetConfig
    let hostID: String
    let keys: FleetKeys
    let loop: EventLoop
    let host: RoomHost
    let user: LoginUser
    let tokens: BotTokenProvider
    let store: FleetSessionStore
    let metrics: FleetMetrics
    let logger: Logger
    let redis: RedisClient
    let scripts = FleetScriptSet()

    // Loop thread only:
    var held: [Int: Held] = [:]
    /// Shards being handed back: still renewed until the release script ran.
    var releasing: [Int: Held] = [:]
    /// Rooms this host logged in to (or is logging in to), with the fence used.
    var active: [String: Int64] = [:]
    /// Rooms waiting for the local lease rule (or a retry).
    var waiting: Set<String> = []
    var configRooms: [String] = []
    var draining = false
    var target = 0
    var liveHosts = 0
    /// Live hosts that are not draining, as of the last claim round (nil:
    /// none answered yet). 0 while this host drains: nobody can take its rooms.
    var servingHosts: Int?
    var lastStreamID = "0-0"
    var renewInFlight = false
    var claimInFlight = false
    var releaseInFlight = false
    /// Rooms a draining host handed over without logging out: room → the
    /// "host|fence" of its cursor; logged out once the next owner's cursor
    /// replaces it (FleetCoordinator+Drain).
    var handingOver: [String: String] = [:]
    /// The `run_id` of the Redis process last connected to.
    var redisRunID: String?
    /// When claims may take shards (RoomKitFleet): after a new Redis
    /// process, not before every owner had one renew interval to re-assert.
    var claims = FleetClaimMachine(renewInterval: 0)
    /// The first claim waits one claim interval after the first renew, so
    /// hosts started together see each other before they take shards.
    var firstClaimAt: UInt64?
    var timers: [LoopTimer] = []
    var cpuSample: (wall: UInt64, cpu: Double)?
    var load = 0.0
    var random = SystemRandomNumberGenerator()
    /// roomd's health probe (FleetCoordinator+Health): when it last answered.
    var lastHealthy: UInt64?
    var probeInFlight = false
    let healthURL: HTTPURL?

    init(config: FleetConfig, server: String, loop: EventLoop, host: RoomHost, user: LoginUser,
         tokens: BotTokenProvider, store: FleetSessionStore, metrics: FleetMetrics, logger: Logger) {
        self.config = config
        healthURL = Self.healthURL(server: server)
        self.loop = loop
        self.host = host
        self.user = user
        self.tokens = tokens
        self.store = store
        self.metrics = metrics
        self.logger = logger
        var name = [CChar](repeating: 0, count: 256)
        gethostname(&name, name.count)
        let hostname = String(decoding: name.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        hostID = "\(hostname):\(getpid()):\(Int64(Date().timeIntervalSince1970 * 1000))"
        keys = FleetKeys(fleet: config.name)
        var redisConfiguration = RedisClient.Configuration()
        // A command must fail well inside a lease so the local rule decides, not a hung socket.
        redisConfiguration.commandTimeout = min(.seconds(2), config.leaseTTL / 4)
        redisConfiguration.connectTimeout = min(.seconds(2), config.leaseTTL / 4)
        redis = RedisClient(loop: loop, endpoint: config.redis, configuration: redisConfiguration, logger: logger)
    }

    var ttlMs: UInt64 { UInt64(config.leaseTTL.milliseconds) }

    /// Connects to Redis, adds the configured rooms to the fleet's room set
    /// (on every connect, so a restarted Redis gets them back) and starts
    /// the renew, claim and lease-check timers. Loop thread only.
    func start(configRooms: [String]) throws {
        loop.preconditionInEventLoop()
        self.configRooms = configRooms
        logger.info("fleet host starting", metadata: ["host": "\(hostID)", "fleet": "\(config.name)",
                                                      "redis": "\(config.redis)", "shards": .stringConvertible(config.shards)])
        claims = FleetClaimMachine(renewInterval: ttlMs / 5)
        redis.onConnect = { [unowned self] in
            renew()
            let asked = claims.connected()
            // A new Redis process (its run_id changed) may have lost the room
            // set: add the configured and the held rooms back. A mere
            // reconnect to the same process adds nothing.
            redis.command(["INFO", "server"]) { [self] result in
                let text = (try? result.get())?.string
                let runID = text?.split(whereSeparator: \.isNewline).first { $0.hasPrefix("run_id:") }.map(String.init)
                if asked == .askRunID, case .newRedis(let until) = claims.runIDObserved(runID, now: loop.nowMilliseconds),
                   until > loop.nowMilliseconds {
                    // The owners' renews re-assert their shards first (FleetClaimMachine).
                    logger.info("fleet: new Redis process; claims take nothing for one renew interval",
                                metadata: ["runID": "\(runID ?? "unknown")"])
                }
                guard text != nil else { return }
                guard runID == nil || runID != redisRunID else { return }
                redisRunID = runID
                addToRoomSet(self.configRooms + active.keys.sorted(), then: { _ in })
            }
        }
        try redis.start()
        let renewEvery = config.leaseTTL / 5
        timers.append(try loop.scheduleTimer(after: renewEvery, repeating: renewEvery) { [unowned self] _ in
            renew()
        })
        // Local lease expiry is checked ten times per TTL.
        let checkEvery = max(.milliseconds(20), config.leaseTTL / 10)
        timers.append(try loop.scheduleTimer(after: checkEvery, repeating: checkEvery) { [unowned self] _ in
            checkLocalLeases()
        })
        scheduleClaim()
    }

    /// Stops the timers and the Redis connection. Loop thread only.
    func close() {
        loop.assertInEventLoop()
        for timer in timers { timer.cancel() }
        timers = []
        redis.close()
    }

    private func scheduleClaim() {
        let base = Double(config.claimInterval.milliseconds)
        let jittered = base * Double.random(in: 0.75...1.25, using: &random)
        do {
            let timer = try loop.scheduleTimer(after: .milliseconds(Int64(jittered))) { [unowned self] timer in
                timers.removeAll { $0 === timer }
                claim()
                readChanges()
                scheduleClaim()
            }
            timers.append(timer)
        } catch {
            logger.error("fleet claim timer not started", metadata: ["error": "\(error)"])
        }
    }

    // MARK: Renew

    /// Extends the leases of every shard held (and being released),
    /// publishes this host's load, flushes the cursors. Loop thread only.
    func renew() {
        probeRoomd()
        guard !renewInFlight, redis.isConnected else { return }
        renewInFlight = true
        let sentAt = loop.nowMilliseconds
        // Unhealthy (roomd unreachable): renew nothing, so the leases lapse.
        let healthy = roomdHealthy
        if !healthy, !held.isEmpty {
            logger.warning("fleet: roomd unreachable for a lease TTL; letting the shards lapse",
                           metadata: ["shards": .stringConvertible(held.count)])
        }
        let sent = healthy ? held.merging(releasing) { current, _ in current } : [:]
        var arguments = [hostID, String(ttlMs), String(format: "%.3f", load), String(active.count),
                         draining || !healthy ? "1" : "0"]
        for (shard, entry) in sent.sorted(by: { $0.key < $1.key }) {
            arguments += [String(shard), String(entry.fence)]
        }
        redis.evaluate(scripts.renew, keys: [keys.lease, keys.owner, keys.hosts, keys.host(hostID), keys.fence, keys.draining],
                       arguments: arguments) { [self] result in
            renewInFlight = false
            guard case .success(.array(let reply)) = result, reply.count == 3 else {
                logger.warning("fleet renew failed", metadata: ["error": "\(result)"])
                return
            }
            let lost = Set(reply[1].array.compactMap { $0.integer.map(Int.init) })
            let reasserted = reply[2].array.compactMap { $0.integer.map(Int.init) }
            for (shard, entry) in sent where !lost.contains(shard) {
                if held[shard]?.fence == entry.fence { held[shard]?.validUntil = sentAt + ttlMs }
                if releasing[shard]?.fence == entry.fence { releasing[shard]?.validUntil = sentAt + ttlMs }
            }
            for shard in lost.sorted() { lose(shard, why: "lease taken or gone in Redis") }
            if !reasserted.isEmpty {
                logger.notice("fleet: Redis had no record of held shards; re-asserted them",
                              metadata: ["shards": .stringConvertible(reasserted.count)])
                let rooms = reasserted.flatMap { held[$0]?.rooms ?? [] }
                addToRoomSet(rooms, then: { _ in })
            }
            startChanges(at: reply[0].integer ?? 0)
            if firstClaimAt == nil { firstClaimAt = loop.nowMilliseconds + UInt64(config.claimInterval.milliseconds) }
            flushCursors()
            retryWaiting()
        }
    }

    /// The local rule's other half: a lease whose TTL has run out on our own
    /// clock (since the last successful renew was sent) is lost, whatever
    /// Redis says; its rooms are logged out at once.
    func checkLocalLeases() {
        let now = loop.nowMilliseconds
        for (shard, entry) in held where entry.validUntil <= now {
            lose(shard, why: "lease expired on the local clock")
        }
        for (shard, entry) in releasing where entry.validUntil <= now {
            releasing.removeValue(forKey: shard)
        }
    }

    /// Forgets `shard` and logs out of its rooms now.
    func lose(_ shard: Int, why: String) {
        guard let entry = held.removeValue(forKey: shard) else {
            releasing.removeValue(forKey: shard)
            return
        }
        metrics.losses.increment()
        metrics.shardsHeld.record(held.count)
        logger.warning("fleet: shard lost; logging out of its rooms",
                       metadata: ["shard": .stringConvertible(shard), "rooms": .stringConvertible(entry.rooms.count), "why": "\(why)"])
        store.forget(rooms: entry.rooms)
        for room in entry.rooms {
            waiting.remove(room)
            logOut(room)
        }
    }

    // MARK: Claim, rebalance, drain

    /// One claim round: take expired shards up to the target (unless
    /// draining or loaded), then release shards above target + 1 (all of
    /// them, at a bounded rate, when draining). Loop thread only.
    func claim() {
        sampleLoad()
        metrics.redisUp.record(redis.isConnected ? 1 : 0)
        guard redis.isConnected else {
            _ = claims.lostRedis()
            return
        }
        guard !claimInFlight, let firstClaimAt else { return }
        let now = loop.nowMilliseconds
        let wouldTake = !draining && roomdHealthy && now >= firstClaimAt && (held.isEmpty || load < config.loadThreshold)
        guard case .claim(let mayClaim) = claims.claimDue(now: now, wouldTake: wouldTake) else { return }
        claimInFlight = true
        let arguments = [hostID, String(ttlMs), String(config.shards), String(held.count + releasing.count),
                         String(config.shards), mayClaim ? "1" : "0"]
        redis.evaluate(scripts.claim, keys: [keys.lease, keys.owner, keys.hosts, keys.fence, keys.draining],
                       arguments: arguments) { [self] result in
            claimInFlight = false
            guard case .success(.array(let reply)) = result, reply.count == 7 else {
                logger.warning("fleet claim failed", metadata: ["error": "\(result)"])
                return
            }
            target = Int(reply[1].integer ?? 0)
            liveHosts = Int(reply[2].integer ?? 0)
            servingHosts = reply[5].integer.map(Int.init)
            metrics.liveHosts.record(liveHosts)
            metrics.unhomedRooms.record(Int(reply[6].integer ?? 0))
            claimed(reply[3].array, rooms: reply[4].array, sentAt: now)
            rebalance()
        }
    }

    private func claimed(_ pairs: [RedisValue], rooms: [RedisValue], sentAt: UInt64) {
        guard !pairs.isEmpty else { return }
        var byShard: [Int: Set<String>] = [:]
        var index = 0
        while index + 1 < rooms.count {
            if let room = rooms[index].string {
                byShard[fleetShard(of: room, shards: config.shards), default: []].insert(room)
                if let cursor = FleetSessionStore.cursor(room: room, hash: rooms[index + 1].array),
                   cursor.user.id == user.id {
                    store.handOver(cursor)
                }
            }
            index += 2
        }
        index = 0
        var newRooms: [String] = []
        while index + 1 < pairs.count {
            if let shard = pairs[index].integer.map(Int.init), let fence = pairs[index + 1].integer {
                metrics.claims.increment()
                let rooms = byShard[shard] ?? []
                held[shard] = Held(fence: fence, validUntil: sentAt + ttlMs, rooms: rooms)
                newRooms += rooms
            }
            index += 2
        }
        metrics.shardsHeld.record(held.count)
        logger.info("fleet: claimed shards", metadata: ["count": .stringConvertible(pairs.count / 2), "rooms": .stringConvertible(newRooms.count),
                                                        "held": .stringConvertible(held.count), "target": .stringConvertible(target)])
        for room in newRooms.sorted() { logIn(room) }
    }

    /// Releases shards above target + 1 (or, when draining, every shard) at
    /// `releaseBatch` per round: log out of their rooms, then release.
    private func rebalance() {
        if draining { return handOverBatch() }
        guard !releaseInFlight else { return }
        let excess = draining ? held.count : held.count - (target + 1)
        guard excess > 0, roomdHealthy else { return }
        let count = min(draining ? excess : held.count - target, config.releaseBatch)
        // Give back the shards with the fewest rooms first: the cheapest hand-over.
        let chosen = held.sorted { ($0.value.rooms.count, $0.key) < ($1.value.rooms.count, $1.key) }.prefix(count)
        releaseInFlight = true
        var released: [String] = []
        for (shard, entry) in chosen {
            held.removeValue(forKey: shard)
            releasing[shard] = entry
            released += entry.rooms
            for room in entry.rooms { waiting.remove(room) }
        }
        let rooms = released
        metrics.shardsHeld.record(held.count)
        logger.info(draining ? "fleet: draining shards" : "fleet: rebalancing shards",
                    metadata: ["count": .stringConvertible(chosen.count), "rooms": .stringConvertible(rooms.count), "target": .stringConvertible(target)])
        let shards = chosen.map { ($0.key, $0.value.fence) }
        let host = self.host
        Task {
            await withTaskGroup(of: Void.self) { group in
                for room in rooms { group.addTask { try? await host.logoutRoom(room) } }
            }
            _ = loop.execute { [self] in
                for room in rooms { active.removeValue(forKey: room) }
                // From now on no renew may carry these shards: a renew after
                // the release would see no owner and re-assert them.
                for (shard, _) in shards { releasing.removeValue(forKey: shard) }
                var arguments = [hostID, "0"]
                for (shard, fence) in shards { arguments += [String(shard), String(fence)] }
                redis.evaluate(scripts.release, keys: [keys.lease, keys.owner], arguments: arguments) { [self] result in
                    releaseInFlight = false
                    if case .failure(let error) = result {
                        logger.warning("fleet release failed (the leases will expire)", metadata: ["error": "\(error)"])
                    }
                }
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
        if let previous = cpuSample, wall > previous.wall {
            load = max(0, cpu - previous.cpu) / (Double(wall - previous.wall) / 1000)
        }
        cpuSample = (wall, cpu)
    }
}

/// Each coordinator's own script objects (their cached SHA is loop-thread state).
struct FleetScriptSet: @unchecked Sendable {
    // @unchecked Sendable: the scripts are only used on the owning coordinator's loop.
    let renew = FleetScripts.renew.script
    let claim = FleetScripts.claim.script
    let release = FleetScripts.release.script
    let cursors = FleetScripts.cursors.script
    let rooms = FleetScripts.rooms.script
    let status = FleetScripts.status.script
    let refence = FleetScripts.refence.script
    let owners = FleetScripts.owners.script
}

