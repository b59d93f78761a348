import Dispatch
import Foundation
import RoomKitLoop
import XCTest

final class EventLoopTests: XCTestCase {
    func testExecute_fromTenThreadsTimesTenThousandTasks_losesNoneAndKeepsPerThreadOrder() throws {
        let loop = try EventLoop(name: "test-execute")
        final class Record: @unchecked Sendable { var seen: [[Int]] = Array(repeating: [], count: 10) } // loop only
        let record = Record()
        let threads = 10, perThread = 10_000
        DispatchQueue.concurrentPerform(iterations: threads) { thread in
            for n in 0..<perThread {
                loop.execute { record.seen[thread].append(n) }
            }
        }
        waitUntil(loop) { record.seen.allSatisfy { $0.count == perThread } }
        let seen = try onLoop(loop) { record.seen }
        for thread in 0..<threads {
            XCTAssertEqual(seen[thread], Array(0..<perThread), "thread \(thread) lost or reordered tasks")
        }
        XCTAssertNoThrow(try loop.shutdown())
    }

    func testTimers_fireInDeadlineOrder_andCancelledOnesNeverFire() throws {
        let loop = try EventLoop(name: "test-timers")
        final class Record: @unchecked Sendable { var fired: [Int] = [] } // loop only
        let record = Record()
        var generator = SystemRandomNumberGenerator()
        let delays = (0..<200).map { _ in Int.random(in: 1...80, using: &generator) }
        let cancelled = Set((0..<200).filter { $0 % 7 == 0 })
        try onLoop(loop) {
            var timers: [LoopTimer] = []
            for (index, delay) in delays.enumerated() {
                timers.append(try loop.scheduleTimer(after: .milliseconds(delay)) { _ in record.fired.append(index) })
            }
            for index in cancelled { timers[index].cancel() }
        }
        let expected = delays.indices.filter { !cancelled.contains($0) }
        waitUntil(loop) { record.fired.count == expected.count }
        usleep(150_000) // any cancelled timer would have fired by now
        let fired = try onLoop(loop) { record.fired }
        XCTAssertEqual(fired.count, expected.count)
        XCTAssertTrue(Set(fired).isDisjoint(with: cancelled), "a cancelled timer fired")
        let firedDelays = fired.map { delays[$0] }
        XCTAssertEqual(firedDelays, firedDelays.sorted(), "timers fired out of deadline order")
        // Equal deadlines keep start order (libuv's rule).
        for (a, b) in zip(fired, fired.dropFirst()) where delays[a] == delays[b] {
            XCTAssertLessThan(a, b)
        }
        XCTAssertNoThrow(try loop.shutdown())
    }

    func testRepeatingTimer_firesUntilCancelled() throws {
        let loop = try EventLoop(name: "test-repeat")
        final class Record: @unchecked Sendable { var ticks = 0 } // loop only
        let record = Record()
        _ = try onLoop(loop) {
            try loop.scheduleTimer(after: .milliseconds(1), repeating: .milliseconds(2)) { timer in
                record.ticks += 1
                if record.ticks == 5 { timer.cancel() }
            }
        }
        waitUntil(loop) { record.ticks == 5 }
        usleep(50_000)
        XCTAssertEqual(try onLoop(loop) { record.ticks }, 5)
        XCTAssertNoThrow(try loop.shutdown())
    }

    func testScheduledTask_cancelledFromAnotherThread_neverRuns() throws {
        let loop = try EventLoop(name: "test-schedule")
        final class Record: @unchecked Sendable { var ran: [Int] = [] } // loop only
        let record = Record()
        let keep = loop.schedule(after: .milliseconds(20)) { record.ran.append(1) }
        let drop = loop.schedule(after: .milliseconds(20)) { record.ran.append(2) }
        drop.cancel()
        waitUntil(loop) { record.ran == [1] }
        usleep(60_000)
        XCTAssertEqual(try onLoop(loop) { record.ran }, [1])
        _ = keep
        XCTAssertNoThrow(try loop.shutdown())
    }

    func testShutdown_withLiveTimersAndSignalWatcher_closesLoopCleanly() throws {
        let loop = try EventLoop(name: "test-shutdown")
        try onLoop(loop) {
            try loop.scheduleTimer(after: .seconds(3600)) { _ in XCTFail("must not fire") }
            try loop.scheduleTimer(after: .seconds(1), repeating: .seconds(1)) { _ in }
            _ = try SignalWatcher(loop: loop, signals: [SIGUSR2]) { _ in }
        }
        // shutdown() throws unless uv_loop_close returned 0.
        XCTAssertNoThrow(try loop.shutdown())
        XCTAssertFalse(loop.execute {}, "a shut-down loop must refuse work")
    }

    /// The lifecycle states: work queued before and during shutdown runs
    /// (exactly once), work after the door closed is refused, and a second
    /// (concurrent) shutdown() returns without waiting twice or throwing.
    func testShutdown_runsWorkQueuedBeforeTheDoorCloses_refusesLaterWork_andIsIdempotent() throws {
        let loop = try EventLoop(name: "test-lifecycle")
        let ran = LockedValue(0)
        for _ in 0..<100 { XCTAssertTrue(loop.execute { ran.withLock { $0 += 1 } }) }
        let hookRan = LockedValue(0)
        _ = try onLoop(loop) {
            loop.addShutdownHook {
                // A hook may still queue work: it runs before the door closes.
                _ = loop.execute { hookRan.withLock { $0 += 1 } }
            }
        }
        let concurrent = Thread { try? loop.shutdown() }
        concurrent.start()
        XCTAssertNoThrow(try loop.shutdown())
        XCTAssertNoThrow(try loop.shutdown())
        XCTAssertEqual(ran.withLock { $0 }, 100)
        XCTAssertEqual(hookRan.withLock { $0 }, 1)
        XCTAssertFalse(loop.execute { ran.withLock { $0 += 1 } })
        XCTAssertEqual(ran.withLock { $0 }, 100)
    }

    /// `inEventLoop` (the check behind `LoopBound`) is true on the loop's
    /// own thread only: not on the caller's, not on another loop's.
    func testInEventLoop_isTrueOnlyOnItsOwnThread_andLoopBoundWorksThere() throws {
        let first = try EventLoop(name: "test-first")
        let second = try EventLoop(name: "test-second")
        defer {
            XCTAssertNoThrow(try first.shutdown())
            XCTAssertNoThrow(try second.shutdown())
        }
        XCTAssertFalse(first.inEventLoop)
        XCTAssertTrue(try onLoop(first) { first.inEventLoop })
        XCTAssertFalse(try onLoop(second) { first.inEventLoop })
        XCTAssertTrue(try onLoop(second) { second.inEventLoop })
        let bound = LoopBound([Int](), loop: first)
        try onLoop(first) {
            bound.value.append(1)
            bound.withValue { $0.append(2) }
        }
        XCTAssertEqual(try onLoop(first) { bound.value }, [1, 2])
    }

    func testSignalWatcher_deliversSignalOnLoopThread() throws {
        let loop = try EventLoop(name: "test-signal")
        final class Record: @unchecked Sendable { var signals: [Int32] = []; var onLoop = false } // loop only
        let record = Record()
        try onLoop(loop) {
            _ = try SignalWatcher(loop: loop, signals: [SIGUSR1]) { signum in
                record.signals.append(signum)
                record.onLoop = loop.inEventLoop
            }
        }
        kill(getpid(), SIGUSR1)
        waitUntil(loop) { record.signals == [SIGUSR1] }
        XCTAssertTrue(try onLoop(loop) { record.onLoop })
        XCTAssertNoThrow(try loop.shutdown())
    }

    func testSerialExecutor_actorMethodsRunOnTheLoopThread() async throws {
        let loop = try EventLoop(name: "test-executor")
        actor OnLoop {
            let loop: EventLoop
            nonisolated var unownedExecutor: UnownedSerialExecutor { loop.asUnownedSerialExecutor() }
            init(loop: EventLoop) { self.loop = loop }
            func check() -> Bool { loop.inEventLoop }
        }
        let actor = OnLoop(loop: loop)
        let onLoopThread = await actor.check()
        XCTAssertTrue(onLoopThread)
        let value = try await loop.submit { 41 + 1 }
        XCTAssertEqual(value, 42)
        try loop.shutdown()
    }
}
