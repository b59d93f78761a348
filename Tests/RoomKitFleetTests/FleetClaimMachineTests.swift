import RoomKitFleet
import XCTest

/// `FleetClaimMachine` input by input, without Redis: after a new Redis
/// process, re-assertion wins against claims by design.
final class FleetClaimMachineTests: XCTestCase {
    private func connectedOnce(runID: String = "run-a", now: UInt64 = 0) -> FleetClaimMachine {
        var machine = FleetClaimMachine(renewInterval: 1000)
        XCTAssertEqual(machine.connected(), .askRunID)
        XCTAssertEqual(machine.runIDObserved(runID, now: now), .newRedis(until: now))
        return machine
    }

    func testClaimDue_beforeTheFirstConnect_skips() {
        var machine = FleetClaimMachine(renewInterval: 1000)
        XCTAssertEqual(machine.claimDue(now: 0, wouldTake: true), .skip)
    }

    func testClaimDue_whileTheRunIDIsUnknown_skips() {
        var machine = FleetClaimMachine(renewInterval: 1000)
        XCTAssertEqual(machine.connected(), .askRunID)
        XCTAssertEqual(machine.claimDue(now: 5, wouldTake: true), .skip)
    }

    func testFirstRedis_claimsAtOnce() {
        var machine = connectedOnce()
        XCTAssertEqual(machine.claimDue(now: 1, wouldTake: true), .claim(mayTake: true))
        XCTAssertEqual(machine.claimDue(now: 2, wouldTake: false), .claim(mayTake: false), "the host's own grounds still count")
    }

    func testReconnectToTheSameRedis_claimsAtOnce() {
        var machine = connectedOnce()
        XCTAssertEqual(machine.lostRedis(), .stopClaiming)
        XCTAssertEqual(machine.claimDue(now: 10, wouldTake: true), .skip)
        XCTAssertEqual(machine.connected(), .askRunID)
        XCTAssertEqual(machine.runIDObserved("run-a", now: 20), .sameRedis)
        XCTAssertEqual(machine.claimDue(now: 21, wouldTake: true), .claim(mayTake: true))
    }

    func testNewRedis_takesNothingForOneRenewInterval_thenClaims() {
        var machine = connectedOnce()
        XCTAssertEqual(machine.lostRedis(), .stopClaiming)
        XCTAssertEqual(machine.connected(), .askRunID)
        XCTAssertEqual(machine.runIDObserved("run-b", now: 5000), .newRedis(until: 6000))
        XCTAssertEqual(machine.state, .holding(runID: "run-b", until: 6000))
        XCTAssertEqual(machine.claimDue(now: 5000, wouldTake: true), .claim(mayTake: false))
        XCTAssertEqual(machine.claimDue(now: 5999, wouldTake: true), .claim(mayTake: false))
        XCTAssertEqual(machine.claimDue(now: 6000, wouldTake: true), .claim(mayTake: true))
        XCTAssertEqual(machine.state, .claiming(runID: "run-b"))
    }

    func testNewRedis_seenWithoutAReconnectBeingNoticed_stillHolds() {
        var machine = connectedOnce()
        XCTAssertEqual(machine.connected(), .askRunID, "a connect without a lost connection first")
        XCTAssertEqual(machine.runIDObserved("run-b", now: 100), .newRedis(until: 1100))
        XCTAssertEqual(machine.claimDue(now: 500, wouldTake: true), .claim(mayTake: false))
    }

    func testUnknownRunID_isTreatedAsANewRedis() {
        var machine = connectedOnce()
        XCTAssertEqual(machine.connected(), .askRunID)
        XCTAssertEqual(machine.runIDObserved(nil, now: 100), .newRedis(until: 1100))
        XCTAssertEqual(machine.claimDue(now: 200, wouldTake: true), .claim(mayTake: false))
    }

    func testRunIDObserved_whenNotAsked_doesNothing() {
        var machine = connectedOnce()
        XCTAssertEqual(machine.runIDObserved("run-z", now: 1), .none)
        XCTAssertEqual(machine.claimDue(now: 2, wouldTake: true), .claim(mayTake: true))
    }

    func testLostRedis_whileDisconnected_isNothingNew() {
        var machine = FleetClaimMachine(renewInterval: 1000)
        XCTAssertEqual(machine.lostRedis(), .none)
    }

    func testDrain_neverTakesAgain_evenAfterAReconnect() {
        var machine = connectedOnce()
        XCTAssertEqual(machine.drain(), .startDraining)
        XCTAssertEqual(machine.drain(), .none)
        XCTAssertEqual(machine.claimDue(now: 1, wouldTake: true), .claim(mayTake: false))
        XCTAssertEqual(machine.lostRedis(), .none)
        XCTAssertEqual(machine.connected(), .none)
        XCTAssertEqual(machine.runIDObserved("run-b", now: 2), .none)
        XCTAssertEqual(machine.claimDue(now: 5000, wouldTake: true), .claim(mayTake: false))
    }
}
