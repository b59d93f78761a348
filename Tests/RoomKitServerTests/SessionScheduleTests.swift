import RoomKitProtocol
import RoomKitServerCore
@testable import RoomKitServer
import XCTest

/// `SessionSchedule`: the sweep ticks only the sessions whose rules may act
/// (issue #26). Its deadline must be exactly the first time
/// `SessionRules.tick` answers anything but `.none`: later, and a kick,
/// leave or forget would come late; earlier is only a wasted tick, but the
/// tests hold it to the exact time. Pure logic: no server, no socket.
final class SessionScheduleTests: XCTestCase {
    private let clocks = SessionClocks(heartbeatTimeout: 90_000, sessionRetention: 1_200_000, tokenExpiryNotice: 30_000)

    /// Rules in each state the sweep can meet, by name.
    private func states() -> [(String, SessionRules)] {
        let fresh = SessionRules(id: "s-1", userId: "u", tokenExpiresAt: 3_600_000)
        var warned = fresh
        XCTAssertEqual(warned.tick(now: 3_580_000, clocks: clocks), .warn(remaining: 20))
        var nearExpiry = SessionRules(id: "s-2", userId: "u", tokenExpiresAt: 20_000)
        XCTAssertEqual(nearExpiry.loggedIn(now: 0, clocks: clocks), .warn(remaining: 20))
        var detached = fresh
        XCTAssertEqual(detached.detach(now: 10_000, lastSeen: 4_000), .persist)
        var left = detached
        XCTAssertEqual(left.tick(now: 94_000, clocks: clocks), .leave)
        var ended = fresh
        XCTAssertEqual(ended.kick(code: .kickedByAdmin, now: 50_000), .kicked(notify: true, leave: true))
        var endedDetached = detached
        XCTAssertEqual(endedDetached.kick(code: .kickedByAdmin, now: 60_000), .kicked(notify: false, leave: true))
        let restored = SessionRules(restoring: "s-3", userId: "u", tokenExpiresAt: 3_600_000, detachedAt: nil, visible: true,
                                    endedCode: nil, now: 7_000)
        let expired = SessionRules(id: "s-4", userId: "u", tokenExpiresAt: -5_000)
        return [("attached", fresh), ("attached, warned", warned), ("attached, warned at login", nearExpiry),
                ("detached, visible", detached), ("detached, left", left), ("ended while attached", ended),
                ("ended while detached", endedDetached), ("restored", restored), ("attached, token expired", expired)]
    }

    func testDue_isTheFirstTimeTheRulesTickAct_inEveryState() {
        for (name, rules) in states() {
            let due = rules.nextTick(clocks: clocks)
            var before = rules
            XCTAssertEqual(before.tick(now: due - 1, clocks: clocks), .none, "\(name): acted before its due time \(due)")
            var at = rules
            XCTAssertNotEqual(at.tick(now: due, clocks: clocks), .none, "\(name): did not act at its due time \(due)")
        }
    }

    private func session(_ id: String) -> ServerSession {
        let room = ServerRoom(id: "r", created: 0, seq: 0, model: RoomModel())
        return ServerSession(id: id, room: room, userId: "u", memberId: 1, role: .writer, wantsWritable: true,
                             rules: SessionRules(id: id, userId: "u", tokenExpiresAt: 3_600_000))
    }

    func testTakeDue_givesEachSessionOnceInItsSecond_neverBefore() {
        var schedule = SessionSchedule()
        let (a, b, c) = (session("a"), session("b"), session("c"))
        schedule.schedule(a, due: 5_500)
        schedule.schedule(b, due: 7_000)
        schedule.schedule(c, due: 9_000)
        schedule.schedule(c, due: 6_200)  // moved earlier: only the new second counts
        XCTAssertEqual(schedule.count, 3)
        XCTAssertEqual(schedule.takeDue(now: 4_999).map(\.id), [])
        XCTAssertEqual(schedule.takeDue(now: 5_000).map(\.id), ["a"])
        XCTAssertEqual(schedule.takeDue(now: 5_900).map(\.id), [])
        XCTAssertEqual(schedule.takeDue(now: 7_100).map(\.id), ["c", "b"])
        XCTAssertEqual(schedule.takeDue(now: 9_500).map(\.id), [], "c's first second was left behind when it moved")
        XCTAssertEqual(schedule.count, 0)
    }

    func testSchedule_inASecondAlreadyTaken_isTheNextSweeps_andRemoveDropsIt() {
        var schedule = SessionSchedule()
        let (a, b) = (session("a"), session("b"))
        XCTAssertEqual(schedule.takeDue(now: 10_000).map(\.id), [])
        schedule.schedule(a, due: 3_000)
        schedule.schedule(b, due: 10_400)
        XCTAssertEqual(schedule.takeDue(now: 10_600).map(\.id), [], "the second 10 was taken already")
        XCTAssertEqual(schedule.takeDue(now: 11_000).map(\.id), ["a", "b"])
        schedule.schedule(a, due: 20_000)
        schedule.remove(a)
        XCTAssertEqual(schedule.takeDue(now: 30_000).map(\.id), [])
    }

    func testTakeDue_afterAClockJump_takesEverySecondThatHoldsAnything() {
        var schedule = SessionSchedule()
        let (a, b) = (session("a"), session("b"))
        XCTAssertEqual(schedule.takeDue(now: 1_000).map(\.id), [])
        schedule.schedule(a, due: 50_000_000)
        schedule.schedule(b, due: 90_000_000)
        XCTAssertEqual(schedule.takeDue(now: 60_000_000).map(\.id), ["a"])
        XCTAssertEqual(schedule.takeDue(now: 90_000_000).map(\.id), ["b"])
    }
}
