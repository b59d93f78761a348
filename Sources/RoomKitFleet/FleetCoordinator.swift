import Foundation
import Logging
import RoomKit
import RoomKitLoop
import RoomKitProtocol
import RoomKitRedis

/// One fleet host's share of the room set (docs/FLEET.md): the thin Redis
/// driver of `FleetLeaseMachine`. It feeds the machine its inputs (renew,
/// claim and lease-check ticks, script answers, Redis up or lost, a drain)
/// and performs each result: one Lua script per tick, logins with each
/// shard's fence, logouts from the rooms of a lost shard. The decisions are
/// the machine's; the bookkeeping of logins lives here, in `LoopBound`.
///
/// Loop thread only (an off-loop access traps), except the `async` entry
/// points, which hop to the loop.
public final class FleetCoordinator: Sendable {
    /// What the driver keeps on the loop besides the machine: the logins.
    struct LoopState {
        /// The leases, claims and drain (pure).
        var machine: FleetLeaseMachine
        /// Rooms this host logged in to (or is logging in to), with the fence used.
        var active: [String: Int64] = [:]
        /// Rooms waiting for the local lease rule (or a retry).
        var waiting: Set<String> = []
        /// Rooms a draining host handed over without logging out: room → the
        /// "host|fence" of its cursor; logged out once the next owner's cursor
        /// replaces it (FleetCoordinator+Drain).
        var handingOver: [String: String] = [:]
        /// The rooms of `bot.json`, added back to a new Redis process.
        var configRooms: [String] = []
        /// The last entry of the changes stream applied.
        var lastStreamID = "0-0"
        /// Where the coordinator is in its life (its timers live in `.running`).
        var phase: Phase = .created
        /// The last CPU sample (ms, seconds of CPU) and the load it gave.
        var cpuSample: (wall: UInt64, cpu: Double)?
        var load = 0.0
        var random = SystemRandomNumberGenerator()
        /// roomd's health probe (FleetCoordinator+Health): when it last answered.
        var lastHealthy: UInt64?
        var probe: Probe = .idle
    }

    /// The coordinator's life.
    enum Phase {
        /// Not started.
        case created
        /// Started: the repeating timers and the pending claim timer.
        case running(timers: [LoopTimer])
        /// Closed: no timer, no Redis.
        case closed
    }

    /// roomd's `/healthz` probe.
    enum Probe {
        case idle
        case running
    }

    let config: FleetConfig
    /// This host's ID in the fleet: `hostname:pid:start-ms`.
    public let hostID: String
    let keys: FleetKeys
    let loop: EventLoop
    let host: RoomHost
    let user: LoginUser
    let tokens: any TokenProvider
    let store: FleetSessionStore
    let metrics: FleetMetrics
    let logger: Logger
    let redis: RedisClient
    let scripts = FleetScriptSet()
    let healthURL: HTTPURL?
    let state: LoopBound<LoopState>

    /// A fleet host for `host`'s rooms on roomd at `server` (its
    /// `/healthz` is probed), logging in as `user` with `tokens`; cursors go
    /// through `store` (the host's session store). Any thread.
    public init(config: FleetConfig, server: String, loop: EventLoop, host: RoomHost, user: LoginUser,
                tokens: any TokenProvider, store: FleetSessionStore, metrics: FleetMetrics, logger: Logger) {
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
        // Reconnects back off, but a restarted Redis is seen again within a
        // fraction of a lease: the holders' renews must re-assert their shards
        // before the leases run out on their own clocks (TTL/8: at the tests'
        // 2 s TTL the wait stays 250 ms, as without a backoff).
        redisConfiguration.reconnectDelayCap = min(.seconds(2), config.leaseTTL / 8)
        redis = RedisClient(loop: loop, endpoint: config.redis, configuration: redisConfiguration, logger: logger)
        let settings = FleetLeaseMachine.Settings(
            shards: config.shards, ttl: UInt64(config.leaseTTL.milliseconds),
            claimInterval: UInt64(config.claimInterval.milliseconds), releaseBatch: config.releaseBatch,
            loadThreshold: config.loadThreshold)
        state = LoopBound(LoopState(machine: FleetLeaseMachine(settings: settings)), loop: loop)
    }

    var ttlMs: UInt64 { UInt64(config.leaseTTL.milliseconds) }

    /// Connects to Redis, adds the configured rooms to the fleet's room set
    /// (on every new Redis process, so a restarted Redis gets them back) and
    /// starts the renew, claim and lease-check timers. Loop thread only.
    public func start(configRooms: [String]) throws {
        loop.preconditionInEventLoop()
        guard case .created = state.value.phase else { return }
        state.value.configRooms = configRooms
        logger.info("fleet host starting", metadata: ["host": "\(hostID)", "fleet": "\(config.name)",
                                                      "redis": "\(config.redis)", "shards": .stringConvertible(config.shards)])
        redis.onConnect = { [weak self] in self?.redisConnected() }
        redis.onDisconnect = { [weak self] _ in self?.redisLost() }
        try redis.start()
        let renewEvery = config.leaseTTL / 5
        // Local lease expiry is checked ten times per TTL.
        let checkEvery = max(.milliseconds(20), config.leaseTTL / 10)
        let timers = [
            try loop.scheduleTimer(after: renewEvery, repeating: renewEvery) { [weak self] _ in self?.renew() },
            try loop.scheduleTimer(after: checkEvery, repeating: checkEvery) { [weak self] _ in self?.checkLocalLeases() },
        ]
        state.value.phase = .running(timers: timers)
        scheduleClaim()
    }

    /// Stops the timers and the Redis connection. Loop thread only.
    public func close() {
        loop.assertInEventLoop()
        switch state.value.phase {
        case .created, .closed:
            break
        case .running(let timers):
            for timer in timers { timer.cancel() }
        }
        state.value.phase = .closed
        redis.close()
    }

    /// Input: Redis is (re)connected. Renew at once; ask its run ID: a new
    /// Redis process (its run_id changed) may have lost the room set, so the
    /// configured and the held rooms go back; a mere reconnect adds nothing.
    private func redisConnected() {
        switch state.value.machine.redisConnected() {
        case .renewAndAskRunID:
            renew()
            redis.command(["INFO", "server"]) { [weak self] result in self?.runIDAnswered(result) }
        }
    }

    /// Input: the Redis connection was lost. Claims stop until it is back
    /// and its run ID known; the leases run on the local clock meanwhile.
    private func redisLost() {
        switch state.value.machine.redisLost() {
        case .stopClaiming:
            metrics.redisUp.record(0)
        case .none:
            break
        }
    }

    private func runIDAnswered(_ result: Result<RedisValue, RedisError>) {
        let now = loop.nowMilliseconds
        guard let text = (try? result.get())?.string else {
            if case .assumeNewRedis(let until?) = state.value.machine.runIDFailed(now: now) {
                logger.info("fleet: Redis run ID unknown; claims take nothing until \(until - now) ms from now")
            }
            return
        }
        let runID = text.split(whereSeparator: \.isNewline).first { $0.hasPrefix("run_id:") }.map(String.init)
        switch state.value.machine.runIDObserved(runID, now: now) {
        case .sameRedis:
            break
        case .newRedis(let hold):
            if hold != nil {
                // The owners' renews re-assert their shards first (FleetClaimMachine).
                logger.info("fleet: new Redis process; claims take nothing for one renew interval",
                            metadata: ["runID": "\(runID ?? "unknown")"])
            }
            addToRoomSet(state.value.configRooms + state.value.active.keys.sorted(), then: { _ in })
        }
    }

    private func scheduleClaim() {
        guard case .running(var timers) = state.value.phase else { return }
        let base = Double(config.claimInterval.milliseconds)
        let jittered = base * Double.random(in: 0.75...1.25, using: &state.value.random)
        do {
            let timer = try loop.scheduleTimer(after: .milliseconds(Int64(jittered))) { [weak self] timer in
                guard let self else { return }
                if case .running(var timers) = state.value.phase {
                    timers.removeAll { $0 === timer }
                    state.value.phase = .running(timers: timers)
                }
                claim()
                readChanges()
                scheduleClaim()
            }
            timers.append(timer)
            state.value.phase = .running(timers: timers)
        } catch {
            logger.error("fleet claim timer not started", metadata: ["error": "\(error)"])
        }
    }

    // MARK: Renew

    /// Extends the leases of every shard held (and being released),
    /// publishes this host's load, flushes the cursors. Loop thread only.
    func renew() {
        probeRoomd()
        let now = loop.nowMilliseconds
        let decision = state.value.machine.renewDue(now: now, redisUp: redis.isConnected, roomdHealthy: roomdHealthy)
        guard case .send(let shards, let reportDraining, let lapsing) = decision else { return }
        if lapsing > 0 {
            logger.warning("fleet: roomd unreachable for a lease TTL; letting the shards lapse",
                           metadata: ["shards": .stringConvertible(lapsing)])
        }
        var arguments = [hostID, String(ttlMs), String(format: "%.3f", state.value.load), String(state.value.active.count),
                         reportDraining ? "1" : "0"]
        for (shard, fence) in shards.sorted(by: { $0.key < $1.key }) {
            arguments += [String(shard), String(fence)]
        }
        redis.evaluate(scripts.renew, keys: [keys.lease, keys.owner, keys.hosts, keys.host(hostID), keys.fence, keys.draining],
                       arguments: arguments) { [weak self] result in self?.renewAnswered(result) }
    }

    private func renewAnswered(_ result: Result<RedisValue, RedisError>) {
        var reply: FleetRenewReply?
        if case .success(.array(let values)) = result, values.count == 3 {
            reply = FleetRenewReply(redisTime: values[0].integer ?? 0,
                                    lost: Set(values[1].array.compactMap { $0.integer.map(Int.init) }),
                                    reasserted: values[2].array.compactMap { $0.integer.map(Int.init) })
        }
        switch state.value.machine.renewAnswered(reply, now: loop.nowMilliseconds) {
        case .none:
            break
        case .failed:
            logger.warning("fleet renew failed", metadata: ["error": "\(result)"])
        case .renewed(let lost, let reasserted, let rooms, let redisTime):
            for shard in lost { lose(shard) }
            if reasserted > 0 {
                logger.notice("fleet: Redis had no record of held shards; re-asserted them",
                              metadata: ["shards": .stringConvertible(reasserted)])
                addToRoomSet(rooms, then: { _ in })
            }
            startChanges(at: redisTime)
            flushCursors()
            retryWaiting()
        }
    }

    /// The local rule's other half: a lease whose TTL has run out on our own
    /// clock is lost, whatever Redis says; its rooms are logged out at once.
    func checkLocalLeases() {
        for shard in state.value.machine.leaseCheck(now: loop.nowMilliseconds) { lose(shard) }
    }

    /// Logs out of a lost shard's rooms now.
    func lose(_ shard: FleetLostShard) {
        metrics.losses.increment()
        metrics.shardsHeld.record(state.value.machine.leases.held.count)
        logger.warning("fleet: shard lost; logging out of its rooms",
                       metadata: ["shard": .stringConvertible(shard.shard), "rooms": .stringConvertible(shard.rooms.count),
                                  "why": "\(shard.why)"])
        store.forget(rooms: shard.rooms)
        for room in shard.rooms { logOut(room) }
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
