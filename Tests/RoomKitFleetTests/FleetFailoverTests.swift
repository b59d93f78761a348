import Foundation
@testable import RoomKitBot
import RoomKit
import RoomKitLoop
import RoomKitProtocol
import RoomKitTokens
import RoomKitTestSupport
import XCTest

/// The fleet against real processes (docs/FLEET.md "Failure analysis"):
/// a redis-server, a roomd and five roombot hosts sharing 500 rooms with a
/// 2 s lease.
final class FleetFailoverTests: XCTestCase {
    private var fleet: FleetHarness!

    override func tearDown() {
        fleet?.close()
        fleet = nil
    }

    /// Cold start: every room homed exactly once; shards within ±20 % of the mean.
    private func coldStart(hosts: Int = 5, rooms: Int = 500, roomdArguments: [String] = [],
                           fenceCounter: Int? = nil, probe: Bool = false) throws {
        fleet = try FleetHarness(hosts: hosts, rooms: rooms, roomdArguments: roomdArguments, probe: probe)
        if let fenceCounter { fleet.redis.cli(["SET", "roomkit:{test}:fence", String(fenceCounter)]) }
        try fleet.startAll()
        let (seconds, picture) = fleet.waitExactlyOnce(timeout: 30)
        XCTAssertNotNil(seconds, "cold start: \(fleet.problems(picture))")
        try XCTSkipIf(seconds == nil, "the fleet did not start")
        print("FLEET cold start: \(rooms) rooms on \(hosts) hosts in \(String(format: "%.1f", seconds!)) s, "
              + "rooms per host \(fleet.roomsPerHost(picture).sorted { $0.key < $1.key }.map(\.value))")
    }

    func testColdStart_everyRoomHasOneBot_andHostsHoldEqualShares() throws {
        try coldStart()
        // Shards settle once every host has claimed and any early claimer has rebalanced.
        var shares: [Double] = []
        let deadline = Date().addingTimeInterval(10)
        repeat {
            shares = fleet.hosts.map { $0.metric("roombot_fleet_shards_held") }
            let mean = shares.reduce(0, +) / Double(shares.count)
            if shares.reduce(0, +) == 4096, shares.allSatisfy({ abs($0 - mean) <= 0.2 * mean }) { break }
            usleep(200_000)
        } while Date() < deadline
        let mean = shares.reduce(0, +) / Double(shares.count)
        XCTAssertEqual(shares.reduce(0, +), 4096, "every shard held once: \(shares)")
        for share in shares { XCTAssertLessThanOrEqual(abs(share - mean), 0.2 * mean, "shards per host \(shares)") }
        let (seconds, picture) = fleet.waitExactlyOnce(timeout: 10)
        XCTAssertNotNil(seconds, fleet.problems(picture))
        // Rooms follow the shards: with 500 rooms each host's share is within ±20 % too.
        let rooms = fleet.roomsPerHost(picture).values.map(Double.init)
        XCTAssertEqual(rooms.count, 5)
        for count in rooms { XCTAssertLessThanOrEqual(abs(count - 100), 20, "rooms per host \(rooms)") }
        let status = try XCTUnwrap(fleet.hosts[0].fleet())
        XCTAssertEqual(status["rooms"]?.int64Value, 500)
        XCTAssertEqual(status["unhomed"]?.int64Value, 0)
        XCTAssertEqual(status["hosts"]?.arrayValue?.count, 5)
        XCTAssertEqual(fleet.sum("roombot_fleet_fence_refusals_total"), 0)
    }

    func testKill9TwoHosts_theirRoomsMoveByResume_invisiblyAndWithoutLosingEvents() throws {
        try coldStart(probe: true)
        let observed = Array(fleet.rooms.prefix(20))
        let observer = try Observer(url: "ws://127.0.0.1:\(fleet.roomd.port)/v1/rooms", secret: FleetHarness.secret)
        defer { observer.close() }
        try observer.join(observed)
        // Let every owner write its cursors (one renew tick is TTL/5), then
        // keep events flowing through the kill.
        usleep(1_000_000)
        let victims = [fleet.hosts[1], fleet.hosts[3]]
        let before = fleet.holders()
        let moved = before.filter { victims.map(\.index).contains($0.value.first ?? -1) }.map(\.key)
        observer.startSending(observed)
        usleep(300_000)
        let killedAt = Date()
        for victim in victims { victim.kill9() }
        let (seconds, picture) = fleet.waitExactlyOnce(timeout: 30)
        let elapsed = Date().timeIntervalSince(killedAt)
        usleep(500_000)
        let sent = observer.stopSending()
        XCTAssertNotNil(seconds, "after kill -9: \(fleet.problems(picture))")
        // Bound: 2 × TTL, plus the claim interval (1 s ± 25 %), plus the
        // resumes at roombot's pacing (190 requests/s per host).
        let survivors = 3.0
        let bound = 2 * fleet.ttl + 1.25 + Double(moved.count) / (survivors * 190) + 1
        print("FLEET kill -9 of 2 hosts: \(moved.count) rooms re-homed in \(String(format: "%.2f", elapsed)) s (bound \(String(format: "%.2f", bound)) s)")
        XCTAssertLessThanOrEqual(elapsed, bound + 5, "re-home took \(elapsed) s")
        // The new owners resumed the dead hosts' sessions.
        XCTAssertEqual(fleet.sum("roombot_fleet_handover_resumes_total"), Double(moved.count),
                       "every moved room resumed its session")
        // The observer never saw the bot leave or join...
        XCTAssertEqual(observer.botUpdates(), 0, "userUpdate of the bot seen by the observer")
        // ...and every event reached a bot's plugins (their event log).
        let logged = Set((victims + fleet.hosts.filter(\.isRunning)).flatMap(\.eventLines).compactMap { line -> String? in
            guard line["event"]?.stringValue == "magix", let room = line["room"]?.stringValue,
                  let n = line["payload"]?["n"]?.int64Value else { return nil }
            return "\(room)#\(n)"
        })
        let missing = sent.filter { !logged.contains($0) }
        XCTAssertGreaterThan(sent.count, 0)
        XCTAssertEqual(missing.count, 0, "events no bot logged: \(missing.prefix(5)) of \(sent.count)")
        // ...and the plugins (the probe plugin, loaded by every host) heard them all.
        let heard = Set(ProbePlugin.lines(try XCTUnwrap(fleet.probeOutput)).filter { $0.kind == 8 }.compactMap { line -> String? in
            guard let json = try? JSON.parse(Array(line.payload.utf8)), let n = json["payload"]?["n"]?.int64Value else { return nil }
            return "\(line.room)#\(n)"
        })
        let unheard = sent.filter { !heard.contains($0) }
        XCTAssertEqual(unheard.count, 0, "events no plugin heard: \(unheard.prefix(5)) of \(sent.count)")
    }

    func testSigstopPastTheTTL_thenSigcont_stealsNoRoom() throws {
        // roomd drops the paused host's connection (3 s of silence) while it
        // sleeps, so on waking its engine tries to resume every session:
        // only the fence stops it from taking them back.
        try coldStart(roomdArguments: ["--heartbeat-interval", "1", "--heartbeat-timeout", "3"])
        usleep(600_000)  // one renew tick: every owner's cursors are in Redis
        let paused = fleet.hosts[2]
        paused.signal(SIGSTOP)
        usleep(UInt32((2 * fleet.ttl + 1) * 1_000_000))
        let (seconds, picture) = fleet.waitExactlyOnce(timeout: 20)
        XCTAssertNotNil(seconds, "while paused: \(fleet.problems(picture))")
        let successors = picture.mapValues { $0[0] }
        let wokeAt = Int64(Date().timeIntervalSince1970 * 1000)
        paused.signal(SIGCONT)
        usleep(UInt32(2 * fleet.ttl * 1_000_000))
        let (settled, after) = fleet.waitExactlyOnce(timeout: 30)
        XCTAssertNotNil(settled, "after SIGCONT: \(fleet.problems(after))")
        // A steal: the woken host (re)attached a room before that room's
        // successor let it go (a successor only lets go by its own logout,
        // when it rebalances shards back to the woken host).
        func lines(_ host: FleetHost) -> [JSON] {
            host.eventLines.filter { ($0["ts"]?.int64Value ?? 0) >= wokeAt && $0["event"]?.stringValue == "roomStateChanged" }
        }
        var letGo: [String: Int64] = [:]
        var kicked = 0
        for host in fleet.hosts where host !== paused {
            for line in lines(host) {
                guard let room = line["room"]?.stringValue, successors[room] == host.index else { continue }
                if line["reason"]?.stringValue == "LOGOUT", letGo[room] == nil { letGo[room] = line["ts"]?.int64Value }
                if line["reason"]?.stringValue == "KICK_OUT" { kicked += 1 }
            }
        }
        var stolen: [String] = []
        var refused = 0
        for line in lines(paused) {
            guard let room = line["room"]?.stringValue, let ts = line["ts"]?.int64Value else { continue }
            let reason = line["reason"]?.stringValue
            if line["errorCode"]?.int64Value == 1_009_008 { refused += 1 }
            if reason == "LOGINED" || reason == "RECONNECTED", ts < letGo[room] ?? .max { stolen.append(room) }
        }
        print("FLEET SIGSTOP: \(successors.count) rooms with successors; stale resumes refused by fence: \(refused); stolen: \(stolen.count)")
        XCTAssertEqual(stolen, [], "rooms the woken host took back from their successors")
        XCTAssertEqual(kicked, 0, "successors kicked out of rooms after the wake")
        XCTAssertGreaterThan(paused.metric("roombot_fleet_losses_total"), 0, "the paused host knew it lost its leases")

        // The backstop behind the local rule: a login with the fence before
        // the owner's is refused by roomd, names the owner's fence, kicks nobody.
        let room = fleet.rooms[0]
        let holder = try XCTUnwrap(after[room]?.first)
        let shard = fleetShard(of: room, shards: 4096)
        let owner = fleet.redis.cli(["HGET", "roomkit:{test}:owner", String(shard)])
        let fence = try XCTUnwrap(Int64(owner.split(separator: "|").last?.filter(\.isNumber) ?? ""))
        let stale = try Observer(url: "ws://127.0.0.1:\(fleet.roomd.port)/v1/rooms", secret: FleetHarness.secret)
        defer { stale.close() }
        let refusal = stale.login(room, as: "fleetbot", fence: fence - 1)
        XCTAssertEqual(refusal?.code, .staleFence)
        XCTAssertEqual(refusal?.currentFence, fence)
        usleep(300_000)
        XCTAssertEqual(fleet.holders()[room], [holder], "the owner kept the room")
    }

    func testRedisKill9AndRestart_stealsNoRoomAndLosesNoLease() throws {
        try coldStart()
        try redisKill9AndRestart()
    }

    /// The same while two busy loops take the CPUs from the hosts: the
    /// holders' re-assertion wins over claims by design (claims wait a renew
    /// interval after a host sees a new Redis run ID: FleetClaimMachine), not
    /// because the hosts happen to be quick.
    func testRedisKill9AndRestart_onALoadedMachine_stealsNoRoomAndLosesNoLease() throws {
        try coldStart()
        let burners = try (0..<2).map { _ in
            let burner = Process()
            burner.executableURL = URL(fileURLWithPath: "/bin/sh")
            burner.arguments = ["-c", "while :; do :; done"]
            try burner.run()
            return burner
        }
        defer { for burner in burners { burner.terminate(); burner.waitUntilExit() } }
        try redisKill9AndRestart()
    }

    private func redisKill9AndRestart() throws {
        let before = fleet.holders()
        fleet.redis.kill9()
        usleep(300_000)
        try fleet.redis.start()
        var doubled = 0
        let watchUntil = Date().addingTimeInterval(2 * fleet.ttl)
        while Date() < watchUntil {
            doubled = max(doubled, fleet.heldTwice().count)
            usleep(100_000)
        }
        XCTAssertEqual(doubled, 0, "rooms held by two hosts at once")
        let (seconds, after) = fleet.waitExactlyOnce(timeout: 20)
        XCTAssertNotNil(seconds, fleet.problems(after))
        XCTAssertEqual(fleet.sum("roombot_fleet_losses_total"), 0, "the holders re-asserted their shards")
        XCTAssertEqual(after, before, "no room changed hosts")
        let status = try XCTUnwrap(fleet.hosts[0].fleet())
        XCTAssertEqual(status["rooms"]?.int64Value, 500, "the room set is back in the restarted Redis")
    }

    func testRedisDownLongerThanTheTTL_everyHostLetsGo_thenClaimantsMoveTheFencePastRoomd() throws {
        // A fleet that has run for a while: its counter is far past 0.
        try coldStart(hosts: 3, rooms: 150, fenceCounter: 1_000_000)
        fleet.redis.kill9()
        // Every lease runs out on every host's own clock: all rooms are logged out.
        let emptied = Date().addingTimeInterval(10)
        while Date() < emptied, !fleet.holders().isEmpty { usleep(100_000) }
        XCTAssertEqual(fleet.holders().count, 0, "rooms still held with Redis gone for longer than the TTL")
        // The restarted Redis has no counter (no persistence): the first
        // claims' fences are below roomd's, roomd refuses them (1009008), and
        // the claimants move the counter past roomd's fence.
        try fleet.redis.start()
        let (seconds, picture) = fleet.waitExactlyOnce(timeout: 30)
        XCTAssertNotNil(seconds, "after the outage: \(fleet.problems(picture))")
        XCTAssertGreaterThan(fleet.sum("roombot_fleet_fence_refusals_total"), 0, "roomd refused the reset counter's fences")
        let counter = Int64(fleet.redis.cli(["GET", "roomkit:{test}:fence"]).filter(\.isNumber)) ?? 0
        XCTAssertGreaterThan(counter, 1_000_000, "the counter moved past the fences of the first run")
    }
}

/// A member watching rooms through the engine, straight to roomd: counts
/// the bot's userUpdates and sends numbered magix events.
final class Observer: @unchecked Sendable {
    // @unchecked Sendable: `sending`, `sent` and `updates` are guarded by their locks.
    let loop: EventLoop
    let host: RoomHost
    private let secret: String
    private let updates = LockedValue(0)
    private let sent = LockedValue<[String]>([])
    private let sending = LockedValue(false)
    private var task: Task<Void, Never>?

    init(url: String, secret: String) throws {
        loop = try EventLoop(name: "observer")
        host = try RoomHost(loop: loop, configuration: RoomHostConfiguration(serverURL: url))
        self.secret = secret
        let updates = self.updates
        host.addObserver { event in
            if case .userUpdate(_, _, let users) = event, users.contains(where: { $0.userId == "fleetbot" }) {
                updates.withLock { $0 += 1 }
            }
        }
    }

    func join(_ rooms: [String]) throws {
        let now = Int64(Date().timeIntervalSince1970)
        let token = TokenSigner(secret: secret).sign(TokenClaims(sub: "observer", room: "*", role: .writer,
                                                                 exp: now + 3600, iat: now))
        let done = DispatchSemaphore(value: 0)
        let failures = LockedValue(0)
        Task { [host] in
            for room in rooms {
                do { try await host.loginRoom(room, user: LoginUser(id: "observer"), token: token) } catch {
                    failures.withLock { $0 += 1 }
                }
            }
            done.signal()
        }
        XCTAssertEqual(done.wait(timeout: .now() + 20), .success)
        XCTAssertEqual(failures.withLock { $0 }, 0)
        usleep(200_000)
        updates.withLock { $0 = 0 }
    }

    func botUpdates() -> Int { updates.withLock { $0 } }

    /// Logs in to `room` as `user` with `fence`; returns the refusal, if any.
    func login(_ room: String, as user: String, fence: Int64) -> RoomError? {
        let now = Int64(Date().timeIntervalSince1970)
        let token = TokenSigner(secret: secret).sign(TokenClaims(sub: user, room: "*", role: .writer,
                                                                 exp: now + 3600, iat: now))
        let outcome = LockedValue<RoomError?>(nil)
        let done = DispatchSemaphore(value: 0)
        Task { [host] in
            do { try await host.loginRoom(room, user: LoginUser(id: user), token: token, fence: fence) } catch {
                outcome.withLock { $0 = error as? RoomError }
            }
            done.signal()
        }
        _ = done.wait(timeout: .now() + 10)
        return outcome.withLock { $0 }
    }

    /// Sends `{"n": k}` to each room in turn, every 20 ms, until stopped.
    func startSending(_ rooms: [String]) {
        sending.withLock { $0 = true }
        let (host, sending, sent) = (self.host, self.sending, self.sent)
        task = Task {
            var n: Int64 = 0
            while sending.withLock({ $0 }) {
                for room in rooms {
                    n += 1
                    if (try? await host.room(room)?.dispatchMagixEvent("tick", payload: ["n": .int(n)])) != nil {
                        sent.withLock { $0.append("\(room)#\(n)") }
                    }
                }
                try? await Task.sleep(for: .milliseconds(20))
            }
        }
    }

    func stopSending() -> [String] {
        sending.withLock { $0 = false }
        let done = DispatchSemaphore(value: 0)
        let task = self.task
        Task { await task?.value; done.signal() }
        _ = done.wait(timeout: .now() + 10)
        return sent.withLock { $0 }
    }

    func close() {
        let done = DispatchSemaphore(value: 0)
        Task { [host] in await host.shutdown(); done.signal() }
        _ = done.wait(timeout: .now() + 10)
        try? loop.shutdown()
    }
}
