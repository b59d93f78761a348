import RoomKit
@testable import RoomKitBot
import RoomKitProtocol
import XCTest

/// `JoinSchedule`, the plan of roombot's first logins (pure: no I/O, the
/// clock and the jitter injected).
final class JoinScheduleTests: XCTestCase {
    private func schedule(_ count: Int, window: Int = 3, giveUpAfter: Int64 = 10_000) -> JoinSchedule {
        JoinSchedule(rooms: (0..<count).map { "r\($0)" }, window: window,
                     backoff: ConnectionMachine.Backoff(first: 1000, cap: 8000), giveUpAfter: giveUpAfter)
    }

    private func drain(_ s: inout JoinSchedule) -> [String] {
        var started: [String] = []
        while let room = s.nextRoom() { started.append(room) }
        return started
    }

    func testNextRoom_neverExceedsTheWindow_andRefillsAsAnswersComeIn() {
        var s = schedule(10, window: 3)
        XCTAssertEqual(drain(&s), ["r0", "r1", "r2"])
        XCTAssertEqual(s.inFlight, 3)
        s.succeeded("r1")
        XCTAssertEqual(drain(&s), ["r3"])
        s.setWindow(5)
        XCTAssertEqual(drain(&s), ["r4", "r5"])
        XCTAssertEqual(s.inFlight, 5)
    }

    func testRoomsFailingTheSameWay_shareOneBackoff() {
        var s = schedule(6, window: 6)
        _ = drain(&s)
        XCTAssertEqual(s.failed("r0", code: .timedOut, transient: true, now: 100, random: 0.5),
                       .startBackoff(cause: .timedOut, delay: 500))
        for room in ["r1", "r2", "r3"] {
            XCTAssertEqual(s.failed(room, code: .timedOut, transient: true, now: 100, random: 0.5), .joinedBackoff)
        }
        // Another cause has a backoff of its own.
        XCTAssertEqual(s.failed("r4", code: .rateLimited, transient: true, now: 100, random: 0.5),
                       .startBackoff(cause: .rateLimited, delay: 500))
        XCTAssertEqual(s.waiting, 5)
        XCTAssertNil(s.nextRoom(), "nothing is retried before its backoff ends (r5 is still out)")
        s.backoffEnded(.timedOut)
        XCTAssertEqual(drain(&s), ["r0", "r1", "r2", "r3"], "the whole batch comes back together")
        XCTAssertEqual(s.waiting, 1)
    }

    func testSharedBackoff_growsWithEachFailedRound_andStartsOverAfterASuccess() {
        var s = schedule(3, window: 3)
        _ = drain(&s)
        XCTAssertEqual(s.failed("r0", code: .timedOut, transient: true, now: 0, random: 1), .startBackoff(cause: .timedOut, delay: 1000))
        s.backoffEnded(.timedOut)
        _ = drain(&s)
        XCTAssertEqual(s.failed("r0", code: .timedOut, transient: true, now: 1000, random: 1), .startBackoff(cause: .timedOut, delay: 2000))
        s.backoffEnded(.timedOut)
        _ = drain(&s)
        s.succeeded("r1")
        XCTAssertEqual(s.failed("r0", code: .timedOut, transient: true, now: 3000, random: 1), .startBackoff(cause: .timedOut, delay: 1000))
    }

    func testRooms_countOnce_howeverManyAttemptsTheyTake() {
        var s = schedule(2, window: 2)
        _ = drain(&s)
        for round in 0..<5 {
            _ = s.failed("r0", code: .timedOut, transient: true, now: Int64(round) * 100, random: 0)
            s.backoffEnded(.timedOut)
            XCTAssertEqual(drain(&s), ["r0"])
        }
        s.succeeded("r0")
        XCTAssertEqual(s.failed("r1", code: .tokenInvalid, transient: false, now: 600, random: 0), .final)
        XCTAssertEqual([s.total, s.joined, s.failed], [2, 1, 1])
        XCTAssertTrue(s.isFinished)
    }

    func testARoomFailingLongerThanTheReconnectWindow_isGivenUp() {
        var s = schedule(1, window: 1, giveUpAfter: 5000)
        _ = drain(&s)
        _ = s.failed("r0", code: .timedOut, transient: true, now: 1000, random: 0)
        s.backoffEnded(.timedOut)
        _ = drain(&s)
        XCTAssertEqual(s.failed("r0", code: .timedOut, transient: true, now: 5999, random: 0), .startBackoff(cause: .timedOut, delay: 0))
        s.backoffEnded(.timedOut)
        _ = drain(&s)
        XCTAssertEqual(s.failed("r0", code: .timedOut, transient: true, now: 6000, random: 0), .gaveUp)
        XCTAssertEqual(s.failed, 1)
        XCTAssertTrue(s.isFinished)
    }

    func testIsFinished_waitsForRoomsInBackoff() {
        var s = schedule(1, window: 1)
        _ = drain(&s)
        _ = s.failed("r0", code: .internalError, transient: true, now: 0, random: 0)
        XCTAssertFalse(s.isFinished)
        s.backoffEnded(.internalError)
        XCTAssertFalse(s.isFinished)
        XCTAssertEqual(drain(&s), ["r0"])
        s.succeeded("r0")
        XCTAssertTrue(s.isFinished)
    }
}
