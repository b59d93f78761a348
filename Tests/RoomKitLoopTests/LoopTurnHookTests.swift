import Foundation
import RoomKitLoop
import XCTest

/// `LoopTurnHook`: called after the work of each loop turn, before the loop
/// can block (roomd commits its turn's transaction there).
final class LoopTurnHookTests: XCTestCase {
    /// Loop thread only.
    final class Record: @unchecked Sendable {
        var done: [Int] = []
        /// How many tasks had run at each call of the hook.
        var seenAtHook: [Int] = []
        var hook: LoopTurnHook?
    }

    func testHook_runsAfterTheTasksOfATurn_beforeTheLoopWaitsAgain() throws {
        let loop = try EventLoop(name: "test-turn-hook")
        let record = Record()
        try loop.runAndWait {
            record.hook = try LoopTurnHook(loop: loop) { record.seenAtHook.append(record.done.count) }
        }
        // Queued from the loop thread by one task: they run together on the
        // next wakeup (one drain, one turn).
        loop.execute {
            for n in 0..<3 { loop.execute { record.done.append(n) } }
        }
        waitUntil(loop) { record.seenAtHook.contains(3) }
        let seen = try onLoop(loop) { record.seenAtHook }
        XCTAssertFalse(seen.contains(1) || seen.contains(2), "the hook ran between tasks of one turn: \(seen)")
        XCTAssertNoThrow(try loop.shutdown())
    }

    func testCancelledHook_isNotCalledAgain_andALiveHookDoesNotKeepTheLoopFromShuttingDown() throws {
        let loop = try EventLoop(name: "test-turn-hook-cancel")
        let record = Record()
        try loop.runAndWait {
            record.hook = try LoopTurnHook(loop: loop) { record.seenAtHook.append(record.done.count) }
        }
        loop.execute { record.done.append(0) }
        waitUntil(loop) { !record.seenAtHook.isEmpty }
        let calls = try onLoop(loop) { () -> Int in
            record.hook?.cancel()
            return record.seenAtHook.count
        }
        for n in 1...5 { loop.execute { record.done.append(n) } }
        waitUntil(loop) { record.done.count == 6 }
        XCTAssertEqual(try onLoop(loop) { record.seenAtHook.count }, calls, "a cancelled hook is never called")

        let other = try EventLoop(name: "test-turn-hook-live")
        let live = Record()
        try other.runAndWait { live.hook = try LoopTurnHook(loop: other) { live.seenAtHook.append(0) } }
        XCTAssertNoThrow(try other.shutdown(), "shutdown closes a live hook's handles")
        XCTAssertNoThrow(try loop.shutdown())
    }
}
