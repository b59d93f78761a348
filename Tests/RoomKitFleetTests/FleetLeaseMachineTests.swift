import RoomKitFleet
import XCTest

/// `FleetLeaseMachine` input by input, without Redis: renew, claim, lease
/// check, rebalance, drain, a new Redis process.
final class FleetLeaseMachineTests: XCTestCase {
    private let settings = FleetLeaseMachine.Settings(shards: 8, ttl: 1000, claimInterval: 100, releaseBatch: 2, loadThreshold: 0.75)

    /// A room of `shard`.
    private func room(in shard: Int) -> String {
        (0..<10_000).lazy.map { "room-\($0)" }.first { fleetShard(of: $0, shards: 8) == shard }!
    }

    /// Connected to a first Redis, one renew answered at 0, one claim round
    /// (sent at `claimAt`) that took `shards`, each with one room.
    private func holding(_ shards: [Int], claimAt: UInt64 = 100, target: Int = 8) -> FleetLeaseMachine {
        var machine = FleetLeaseMachine(settings: settings)
        XCTAssertEqual(machine.redisConnected(), .renewAndAskRunID)
        XCTAssertEqual(machine.runIDObserved("run-a", now: 0), .newRedis(holdClaimsUntil: nil))
        XCTAssertEqual(machine.renewDue(now: 0, redisUp: true, roomdHealthy: true), .send(shards: [:], reportDraining: false, lapsing: 0))
        _ = machine.renewAnswered(FleetRenewReply(redisTime: 5, lost: [], reasserted: []), now: 0)
        XCTAssertEqual(machine.claimDue(now: claimAt, redisUp: true, roomdHealthy: true, load: 0), .send(holding: 0, mayTake: true))
        var claimed: [Int: Int64] = [:]
        for shard in shards { claimed[shard] = Int64(10 + shard) }
        let reply = FleetClaimReply(target: target, liveHosts: 1, servingHosts: 1, claimed: claimed, rooms: shards.map(room(in:)))
        guard case .answered(let count, let rooms, _) = machine.claimAnswered(reply, roomdHealthy: true) else {
            XCTFail("claim not answered")
            return machine
        }
        XCTAssertEqual(count, shards.count)
        XCTAssertEqual(rooms, shards.map(room(in:)).sorted())
        return machine
    }

    func testClaimDue_beforeTheFirstRenew_skips() {
        var machine = FleetLeaseMachine(settings: settings)
        _ = machine.redisConnected()
        _ = machine.runIDObserved("run-a", now: 0)
        XCTAssertEqual(machine.claimDue(now: 500, redisUp: true, roomdHealthy: true, load: 0), .skip)
    }

    func testClaimDue_waitsOneClaimIntervalAfterTheFirstRenew() {
        var machine = FleetLeaseMachine(settings: settings)
        _ = machine.redisConnected()
        _ = machine.runIDObserved("run-a", now: 0)
        _ = machine.renewDue(now: 0, redisUp: true, roomdHealthy: true)
        _ = machine.renewAnswered(FleetRenewReply(redisTime: 1, lost: [], reasserted: []), now: 10)
        XCTAssertEqual(machine.claimDue(now: 50, redisUp: true, roomdHealthy: true, load: 0), .send(holding: 0, mayTake: false))
        _ = machine.claimAnswered(nil, roomdHealthy: true)
        XCTAssertEqual(machine.claimDue(now: 110, redisUp: true, roomdHealthy: true, load: 0), .send(holding: 0, mayTake: true))
    }

    func testClaimDue_whileARoundRuns_skips() {
        var machine = holding([])
        XCTAssertEqual(machine.claimDue(now: 200, redisUp: true, roomdHealthy: true, load: 0), .send(holding: 0, mayTake: true))
        XCTAssertEqual(machine.claimDue(now: 300, redisUp: true, roomdHealthy: true, load: 0), .skip)
        XCTAssertEqual(machine.claimAnswered(nil, roomdHealthy: true), .failed)
        XCTAssertEqual(machine.claimAnswered(nil, roomdHealthy: true), .none, "no round runs any more")
    }

    func testClaimDue_loadedHostHoldingShards_takesNothing() {
        var machine = holding([1])
        XCTAssertEqual(machine.claimDue(now: 200, redisUp: true, roomdHealthy: true, load: 0.9), .send(holding: 1, mayTake: false))
    }

    func testRenewDue_carriesEveryHeldShardWithItsFence_andOneAtATime() {
        var machine = holding([1, 3])
        XCTAssertEqual(machine.renewDue(now: 200, redisUp: true, roomdHealthy: true), .send(shards: [1: 11, 3: 13], reportDraining: false, lapsing: 0))
        XCTAssertEqual(machine.renewDue(now: 300, redisUp: true, roomdHealthy: true), .skip, "one renew at a time")
    }

    func testRenewDue_roomdUnreachable_renewsNothingAndReportsDraining() {
        var machine = holding([1, 3])
        XCTAssertEqual(machine.renewDue(now: 200, redisUp: true, roomdHealthy: false), .send(shards: [:], reportDraining: true, lapsing: 2))
    }

    func testRenewDue_redisDown_skips() {
        var machine = holding([1])
        XCTAssertEqual(machine.renewDue(now: 200, redisUp: false, roomdHealthy: true), .skip)
    }

    func testRenewAnswered_extendsFromTheSendTime_andLosesWhatRedisTookAway() {
        var machine = holding([1, 3])
        _ = machine.renewDue(now: 400, redisUp: true, roomdHealthy: true)
        let result = machine.renewAnswered(FleetRenewReply(redisTime: 9, lost: [3], reasserted: [1]), now: 900)
        XCTAssertEqual(result, .renewed(lost: [FleetLostShard(shard: 3, rooms: [room(in: 3)], why: "lease taken or gone in Redis")],
                                        reasserted: 1, reassertedRooms: [room(in: 1)], redisTime: 9))
        XCTAssertEqual(machine.leases.held[1]?.validUntil, 1400, "sent at 400 plus the TTL, not answered at 900")
        XCTAssertNil(machine.leases.held[3])
    }

    func testRenewAnswered_failed_keepsTheLocalClock() {
        var machine = holding([1])
        _ = machine.renewDue(now: 400, redisUp: true, roomdHealthy: true)
        XCTAssertEqual(machine.renewAnswered(nil, now: 500), .failed)
        XCTAssertEqual(machine.leases.held[1]?.validUntil, 1100, "still the claim's send time plus the TTL")
        XCTAssertEqual(machine.renewAnswered(nil, now: 600), .none)
    }

    func testLeaseCheck_expiredOnTheLocalClock_losesTheShard() {
        var machine = holding([1, 3])
        XCTAssertEqual(machine.leaseCheck(now: 1099), [])
        let lost = machine.leaseCheck(now: 1100)
        XCTAssertEqual(lost.map(\.shard), [1, 3])
        XCTAssertEqual(lost.first?.rooms, [room(in: 1)])
        XCTAssertTrue(machine.leases.held.isEmpty)
    }

    func testLoginDecision_needsHalfATTLLeft() {
        let machine = holding([1])
        XCTAssertEqual(machine.loginDecision(room(in: 1), now: 600), .login(fence: 11))
        XCTAssertEqual(machine.loginDecision(room(in: 1), now: 601), .wait)
        XCTAssertEqual(machine.loginDecision(room(in: 2), now: 200), .notHeld)
    }

    func testClaimAnswered_aboveTargetPlusOne_releasesTheBatch_thenTheScriptRuns() {
        var machine = holding([1, 3, 5, 7])
        _ = machine.claimDue(now: 200, redisUp: true, roomdHealthy: true, load: 0)
        let reply = FleetClaimReply(target: 1, liveHosts: 4, servingHosts: 4, claimed: [:], rooms: [])
        guard case .answered(0, [], .release(let release)) = machine.claimAnswered(reply, roomdHealthy: true) else {
            return XCTFail("expected a release")
        }
        XCTAssertEqual(release.shards.count, 2, "releaseBatch")
        XCTAssertFalse(release.handOver)
        XCTAssertEqual(machine.leases.held.count, 2)
        XCTAssertEqual(machine.leases.releasing.count, 2)
        if case .send(let shards, _, _) = machine.renewDue(now: 250, redisUp: true, roomdHealthy: true) {
            XCTAssertEqual(shards.count, 4, "shards being handed back are still renewed")
        } else {
            XCTFail("expected a renew")
        }
        XCTAssertEqual(machine.releaseReady(), .runScript(release))
        XCTAssertTrue(machine.leases.releasing.isEmpty, "no renew may carry them once the script runs")
        XCTAssertEqual(machine.releaseAnswered(ok: true), .released)
        XCTAssertEqual(machine.releaseAnswered(ok: true), .none)
    }

    func testClaimAnswered_roomdUnreachable_keepsItsShards() {
        var machine = holding([1, 3, 5, 7])
        _ = machine.claimDue(now: 200, redisUp: true, roomdHealthy: false, load: 0)
        let reply = FleetClaimReply(target: 1, liveHosts: 4, servingHosts: 4, claimed: [:], rooms: [])
        XCTAssertEqual(machine.claimAnswered(reply, roomdHealthy: false), .answered(claimed: 0, rooms: [], rebalance: .keep))
    }

    func testDrain_handsEveryShardOver_neverTakes_andIsDoneWhenNothingIsLeft() {
        var machine = holding([1, 3])
        XCTAssertEqual(machine.drain(now: 300), .startDraining(held: 2))
        XCTAssertEqual(machine.drain(now: 301), .none)
        XCTAssertEqual(machine.renewDue(now: 300, redisUp: true, roomdHealthy: true), .send(shards: [1: 11, 3: 13], reportDraining: true, lapsing: 0))
        XCTAssertEqual(machine.claimDue(now: 300, redisUp: true, roomdHealthy: true, load: 0), .send(holding: 2, mayTake: false))
        let reply = FleetClaimReply(target: 1, liveHosts: 2, servingHosts: 1, claimed: [:], rooms: [])
        guard case .answered(_, _, .handOver(let release)) = machine.claimAnswered(reply, roomdHealthy: true) else {
            return XCTFail("expected a hand-over")
        }
        XCTAssertTrue(release.handOver)
        XCTAssertEqual(release.rooms, [room(in: 1), room(in: 3)].sorted())
        XCTAssertEqual(machine.drainProgress(handingOver: false), .pending)
        _ = machine.releaseReady()
        XCTAssertEqual(machine.drainProgress(handingOver: false), .pending, "the release script still runs")
        _ = machine.releaseAnswered(ok: true)
        XCTAssertEqual(machine.drainProgress(handingOver: true), .pending, "rooms still wait for their next owner")
        XCTAssertEqual(machine.drainProgress(handingOver: false), .done)
    }

    func testDrain_aClaimRoundSentBeforeTheDrain_doesNotSayWhetherAnyoneServes() {
        var machine = holding([1])
        XCTAssertEqual(machine.claimDue(now: 200, redisUp: true, roomdHealthy: true, load: 0), .send(holding: 1, mayTake: true))
        _ = machine.drain(now: 250)
        let stale = FleetClaimReply(target: 1, liveHosts: 1, servingHosts: 0, claimed: [:], rooms: [])
        _ = machine.claimAnswered(stale, roomdHealthy: true)
        XCTAssertEqual(machine.drainProgress(handingOver: false), .pending, "sent before the drain: not trusted")
        _ = machine.claimDue(now: 300, redisUp: true, roomdHealthy: true, load: 0)
        _ = machine.claimAnswered(stale, roomdHealthy: true)
        XCTAssertEqual(machine.drainProgress(handingOver: false), .alone)
    }

    func testNewRedisProcess_readdsTheRooms_andClaimsWaitOneRenewInterval() {
        var machine = holding([1])
        XCTAssertEqual(machine.claimDue(now: 200, redisUp: false, roomdHealthy: true, load: 0), .redisDown)
        XCTAssertEqual(machine.redisConnected(), .renewAndAskRunID)
        XCTAssertEqual(machine.claimDue(now: 300, redisUp: true, roomdHealthy: true, load: 0), .skip, "run ID not known yet")
        XCTAssertEqual(machine.runIDObserved("run-b", now: 300), .newRedis(holdClaimsUntil: 500))
        XCTAssertEqual(machine.claimDue(now: 400, redisUp: true, roomdHealthy: true, load: 0), .send(holding: 1, mayTake: false))
        _ = machine.claimAnswered(nil, roomdHealthy: true)
        XCTAssertEqual(machine.claimDue(now: 500, redisUp: true, roomdHealthy: true, load: 0), .send(holding: 1, mayTake: true))
    }

    func testReconnectToTheSameRedis_addsNothingBack() {
        var machine = holding([1])
        XCTAssertEqual(machine.redisLost(), .stopClaiming)
        XCTAssertEqual(machine.redisLost(), .none)
        _ = machine.redisConnected()
        XCTAssertEqual(machine.runIDObserved("run-a", now: 300), .sameRedis)
    }

    func testRoomChanges_applyOnlyToHeldShards() {
        var machine = holding([1])
        let extra = (0..<10_000).lazy.map { "x-\($0)" }.first { fleetShard(of: $0, shards: 8) == 1 }!
        XCTAssertEqual(machine.roomAdded(extra), .mine)
        XCTAssertTrue(machine.holds(extra))
        XCTAssertEqual(machine.roomRemoved(extra), .mine)
        XCTAssertFalse(machine.holds(extra))
        XCTAssertEqual(machine.roomAdded(room(in: 2)), .notMine)
    }

    func testRefenced_onlyWhileTheShardKeepsTheOldFence() {
        var machine = holding([1])
        XCTAssertEqual(machine.refenced(shard: 1, from: 11, to: 40), .refenced)
        XCTAssertEqual(machine.loginDecision(room(in: 1), now: 200), .login(fence: 40))
        XCTAssertEqual(machine.refenced(shard: 1, from: 11, to: 50), .stale)
        XCTAssertEqual(machine.cursorFence(room(in: 1)), 40)
    }
}
