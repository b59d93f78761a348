@testable import RoomKitPluginHost
import XCTest

/// The supervision's decisions without a process: each input (spawned,
/// frame, timeout, exited, tick, stop, quarantine) and its result.
final class PluginSupervisorMachineTests: XCTestCase {
    private let second: UInt64 = 1_000_000_000
    private let ms: UInt64 = 1_000_000

    private func fresh(maxCrashes: Int = 2, backoffMs: Int = 100) -> PluginSupervisorMachine {
        var limits = PluginSupervision()
        limits.maxCrashes = maxCrashes
        limits.crashWindowSeconds = 60
        limits.restartBackoffMs = backoffMs
        return PluginSupervisorMachine(limits: limits, callBound: .milliseconds(50), hangBound: .milliseconds(200),
                                       loadBound: .seconds(2))
    }

    /// A machine whose first child (pid 10) was spawned, greeted and loaded at `now`.
    private func machine(maxCrashes: Int = 2, backoffMs: Int = 100, now: UInt64 = 1) -> PluginSupervisorMachine {
        var machine = fresh(maxCrashes: maxCrashes, backoffMs: backoffMs)
        XCTAssertEqual(machine.spawned(.started(pid: 10), now: now), .awaitHello(deadline: now + 2 * second))
        XCTAssertEqual(machine.frame(.hello(problem: nil), now: now), .load)
        XCTAssertEqual(machine.frame(.loaded(result: 0), now: now), .running(restarted: false))
        XCTAssertEqual(machine.state, .running(.init(pid: 10, lastProgress: now, greeted: true)))
        return machine
    }

    /// After a crash: the new child's spawn, hello and load.
    private func restart(_ m: inout PluginSupervisorMachine, pid: Int32 = 11, now: UInt64 = 1) {
        XCTAssertEqual(m.spawned(.started(pid: pid), now: now), .awaitHello(deadline: now + 2 * second))
        XCTAssertEqual(m.frame(.hello(problem: nil), now: now), .load)
        XCTAssertEqual(m.frame(.loaded(result: 0), now: now), .running(restarted: true))
    }

    // MARK: spawned

    func testSpawned_firstChild_awaitsItsHello_aFailedSpawnGivesUp() {
        var m = fresh()
        XCTAssertEqual(m.phase, .starting)
        XCTAssertEqual(m.spawned(.started(pid: 7), now: 5), .awaitHello(deadline: 5 + 2 * second))
        XCTAssertEqual(m.state, .starting(.init(pid: 7, lastProgress: 5)))
        XCTAssertEqual(m.spawned(.started(pid: 8), now: 6), .kill(reason: "a second child while one runs"))

        var failing = fresh()
        XCTAssertEqual(failing.spawned(.failed(error: "ENOENT"), now: 1), .giveUp(reason: "cannot start its process: ENOENT"))
        XCTAssertEqual(failing.phase, .stopped)
    }

    func testSpawned_duringARestart_aFailureQuarantines_afterAStopTheChildIsKilled() {
        var m = machine()
        _ = m.exited(reason: "r", suspect: .idle, now: 1, jitter: 1)
        XCTAssertEqual(m.state, .restarting(nil))
        XCTAssertEqual(m.spawned(.failed(error: "EAGAIN"), now: 2), .quarantine(reason: "cannot restart its process: EAGAIN"))
        XCTAssertEqual(m.state, .quarantined(reason: "cannot restart its process: EAGAIN"))

        var stopped = machine()
        _ = stopped.exited(reason: "r", suspect: .idle, now: 1, jitter: 1)
        XCTAssertEqual(stopped.stop(), .killCurrent)
        XCTAssertEqual(stopped.spawned(.started(pid: 12), now: 2), .kill(reason: "unloaded while restarting"))
        XCTAssertEqual(stopped.spawned(.failed(error: "x"), now: 2), .nothing)
    }

    // MARK: frame

    func testFrame_helloProblem_stopsTheFirstChild_killsARestartedOne() {
        var m = fresh()
        _ = m.spawned(.started(pid: 7), now: 1)
        XCTAssertEqual(m.frame(.hello(problem: "declares hook 'room' but does not export it"), now: 2),
                       .stopAndKill(reason: "declares hook 'room' but does not export it"))
        XCTAssertEqual(m.phase, .stopped)

        var r = machine()
        _ = r.exited(reason: "r", suspect: .idle, now: 1, jitter: 1)
        _ = r.spawned(.started(pid: 11), now: 2)
        XCTAssertEqual(r.frame(.hello(problem: "abi mismatch"), now: 3), .kill(reason: "restart failed: abi mismatch"))
        XCTAssertEqual(r.phase, .restarting, "its exit is the next crash")
    }

    func testFrame_loaded_runsOnZero_elseStopsOrKills() {
        var m = fresh()
        _ = m.spawned(.started(pid: 7), now: 1)
        _ = m.frame(.hello(problem: nil), now: 1)
        XCTAssertEqual(m.frame(.loaded(result: 3), now: 2), .stopAndKill(reason: "on_load failed (returned 3)"))
        XCTAssertEqual(m.phase, .stopped)
        XCTAssertEqual(m.frame(.loaded(result: 0), now: 3), .kill(reason: "unloaded while loading"))

        var r = machine()
        _ = r.exited(reason: "r", suspect: .idle, now: 1, jitter: 1)
        _ = r.spawned(.started(pid: 11), now: 2)
        _ = r.frame(.hello(problem: nil), now: 2)
        XCTAssertEqual(r.frame(.loaded(result: -1), now: 3), .kill(reason: "restart failed (on_load did not succeed)"))
        XCTAssertEqual(r.frame(.loaded(result: 0), now: 4), .running(restarted: true))
        XCTAssertEqual(r.state, .running(.init(pid: 11, lastProgress: 4, greeted: true)))
    }

    func testFrame_progress_movesTheLastProgress_whileRunning_only() {
        var m = machine(now: 1 * second)
        XCTAssertEqual(m.frame(.progress, now: 3 * second), .nothing)
        XCTAssertEqual(m.state, .running(.init(pid: 10, lastProgress: 3 * second, greeted: true)))
        XCTAssertEqual(m.frame(.pong, now: 2 * second), .nothing)
        XCTAssertEqual(m.state, .running(.init(pid: 10, lastProgress: 3 * second, greeted: true)), "never back in time")
        XCTAssertEqual(m.frame(.hello(problem: nil), now: 4 * second), .kill(reason: "an unexpected handshake frame"))
        _ = m.exited(reason: "r", suspect: .idle, now: 5 * second, jitter: 1)
        XCTAssertEqual(m.frame(.progress, now: 6 * second), .nothing)
        XCTAssertEqual(m.state, .restarting(nil))
    }

    // MARK: timeout

    func testTimeout_ofTheFirstChild_stopsIt_ofARestartedOne_killsIt() {
        var m = fresh()
        XCTAssertEqual(m.timeout(.hello, now: 1), .nothing, "nothing spawned yet")
        _ = m.spawned(.started(pid: 7), now: 1)
        XCTAssertEqual(m.timeout(.hello, now: 3 * second), .stopAndKill(reason: "did not answer within 2.0 seconds"))
        XCTAssertEqual(m.phase, .stopped)

        var r = machine()
        _ = r.exited(reason: "r", suspect: .idle, now: 1, jitter: 1)
        _ = r.spawned(.started(pid: 11), now: 2)
        _ = r.frame(.hello(problem: nil), now: 2)
        XCTAssertEqual(r.timeout(.load, now: 3 * second), .kill(reason: "restart failed: on_load did not return in time"))
        var running = machine()
        XCTAssertEqual(running.timeout(.load, now: 1), .nothing, "running: no wait to run out")
    }

    // MARK: exited

    func testExited_crashesRestartWithDoublingBackoff_thenQuarantine() {
        var m = machine(maxCrashes: 2, backoffMs: 100)
        XCTAssertEqual(m.exited(reason: "was killed by signal 11 (SIGSEGV)", suspect: .idle, now: 1 * second, jitter: 1),
                       .restart(delay: .milliseconds(100), message: "was killed by signal 11 (SIGSEGV)", skip: nil, skipNote: nil))
        XCTAssertEqual(m.phase, .restarting)
        restart(&m)
        XCTAssertEqual(m.exited(reason: "exited with code 3", suspect: .url, now: 2 * second, jitter: 1),
                       .restart(delay: .milliseconds(200), message: "exited with code 3 in urlInterrupter", skip: nil, skipNote: nil))
        restart(&m)
        XCTAssertEqual(m.exited(reason: "exited with code 3", suspect: .timer, now: 3 * second, jitter: 1),
                       .quarantine(reason: "3 crashes within 60 s; last: exited with code 3 in a timer",
                                   message: "exited with code 3 in a timer", skip: nil, skipNote: nil))
        XCTAssertEqual(m.state, .quarantined(reason: "3 crashes within 60 s; last: exited with code 3 in a timer"))
        XCTAssertEqual(m.exited(reason: "late", suspect: .idle, now: 4 * second, jitter: 1), .finished)
    }

    func testExited_crashesOutsideTheWindow_doNotCount() {
        var m = machine(maxCrashes: 1)
        _ = m.exited(reason: "x", suspect: .idle, now: 1 * second, jitter: 1)
        restart(&m)
        guard case .restart = m.exited(reason: "x", suspect: .idle, now: 100 * second, jitter: 1) else {
            return XCTFail("a crash 99 s later is the only one in the 60 s window")
        }
    }

    func testExited_anEventThatCrashesTwice_isSkipped() {
        var m = machine(maxCrashes: 5)
        let event = PluginSupervisorMachine.Suspect.event(seq: 7, label: "magix in room lobby")
        XCTAssertEqual(m.exited(reason: "r", suspect: event, now: 1 * second, jitter: 1),
                       .restart(delay: .milliseconds(100), message: "r while handling magix in room lobby", skip: nil, skipNote: nil))
        restart(&m)
        XCTAssertEqual(m.exited(reason: "r", suspect: event, now: 2 * second, jitter: 1),
                       .restart(delay: .milliseconds(200), message: "r while handling magix in room lobby", skip: 7,
                                skipNote: "skipped magix in room lobby: it crashed the plugin twice"))
    }

    func testExited_backoffIsCappedAt30s_andJitterIsBounded() {
        var m = machine(maxCrashes: 100, backoffMs: 20_000)
        _ = m.exited(reason: "r", suspect: .idle, now: 1 * second, jitter: 1)
        restart(&m)
        XCTAssertEqual(m.exited(reason: "r", suspect: .idle, now: 2 * second, jitter: 9),
                       .restart(delay: .milliseconds(45_000), message: "r", skip: nil, skipNote: nil))
    }

    func testExited_whileStartingOrStopping_isTheEnd() {
        var starting = fresh()
        _ = starting.spawned(.started(pid: 7), now: 1)
        XCTAssertEqual(starting.exited(reason: "r", suspect: .load, now: 1, jitter: 1), .finished)
        XCTAssertEqual(starting.phase, .stopped)

        var m = machine()
        XCTAssertEqual(m.stop(), .unload)
        XCTAssertEqual(m.phase, .stopping)
        XCTAssertEqual(m.exited(reason: "exited with code 0", suspect: .idle, now: 1, jitter: 1), .finished, "an asked-for exit")
    }

    // MARK: tick

    func testTick_isIdle_untilRecordsAreSent_andCountsAHeadRecordOverTimeoutMs_once() {
        var m = machine(now: 10 * second)
        XCTAssertEqual(m.tick(now: 10 * second + 90 * ms), .nothing, "nothing sent: not busy, not quiet for long")
        m.sent(through: 5, now: 10 * second + 100 * ms)
        XCTAssertEqual(m.tick(now: 10 * second + 149 * ms), .nothing, "the head began 49 ms ago: within timeoutMs")
        XCTAssertEqual(m.tick(now: 10 * second + 150 * ms), .late(after: 0), "the head record used up timeoutMs")
        XCTAssertEqual(m.tick(now: 10 * second + 160 * ms), .nothing, "one failure per record")
        m.sent(through: 8, now: 10 * second + 170 * ms)
        XCTAssertEqual(m.tick(now: 10 * second + 180 * ms), .nothing, "more records do not move the head")
        XCTAssertEqual(m.frame(.done(through: 3), now: 10 * second + 200 * ms), .nothing)
        XCTAssertEqual(m.tick(now: 10 * second + 249 * ms), .nothing, "the new head began at the DONE")
        XCTAssertEqual(m.tick(now: 10 * second + 250 * ms), .late(after: 3), "the next head, late in turn")
        XCTAssertEqual(m.frame(.done(through: 8), now: 10 * second + 260 * ms), .nothing)
        guard case .running(let child) = m.state else { return XCTFail("\(m.state)") }
        XCTAssertEqual(child.work.sentThrough, 8)
        XCTAssertEqual(child.work.doneThrough, 8)
        XCTAssertFalse(child.work.outstanding)
        XCTAssertEqual(m.tick(now: 10 * second + 300 * ms), .nothing, "all done: idle")
    }

    func testTick_killsAChildWithNoDoneForTheHangBound_butNotOneThatProgresses() {
        var m = machine(now: 10 * second)
        m.sent(through: 1, now: 10 * second)
        XCTAssertEqual(m.tick(now: 10 * second + 60 * ms), .late(after: 0))
        XCTAssertEqual(m.tick(now: 10 * second + 199 * ms), .nothing, "late, not hung yet (timeoutMs × hangFactor is 200 ms)")
        XCTAssertEqual(m.tick(now: 10 * second + 200 * ms),
                       .kill(reason: "hung: a call ran longer than 0.2 seconds (timeoutMs × hangFactor), killed"))
        var p = machine(now: 10 * second)
        p.sent(through: 100, now: 10 * second)
        for step in 1...10 {
            let now = 10 * second + UInt64(step) * 40 * ms
            XCTAssertEqual(p.frame(.done(through: UInt64(step * 10)), now: now), .nothing)
            XCTAssertEqual(p.tick(now: now + 30 * ms), .nothing, "a DONE every 40 ms: neither late nor hung")
        }
        _ = m.exited(reason: "r", suspect: .idle, now: 11 * second, jitter: 1)
        m.sent(through: 2, now: 11 * second)
        XCTAssertEqual(m.tick(now: 20 * second), .nothing, "restarting: not judged")
    }

    func testTick_killsAChildThatDoesNotAnswerARequestWithinTheHangBound() {
        var m = machine(now: 10 * second)
        m.requested(now: 10 * second)
        m.requested(now: 10 * second + 50 * ms)
        XCTAssertEqual(m.frame(.answer, now: 10 * second + 60 * ms), .nothing)
        XCTAssertEqual(m.tick(now: 10 * second + 259 * ms), .nothing, "the second request waits from the first ANSWER")
        XCTAssertEqual(m.tick(now: 10 * second + 260 * ms),
                       .kill(reason: "hung: a call ran longer than 0.2 seconds (timeoutMs × hangFactor), killed"))
        XCTAssertEqual(m.frame(.answer, now: 10 * second + 262 * ms), .nothing)
        XCTAssertEqual(m.frame(.answer, now: 10 * second + 263 * ms), .nothing, "a late ANSWER to a given-up request")
        guard case .running(let child) = m.state else { return XCTFail("\(m.state)") }
        XCTAssertEqual(child.work.requests, 0)
        XCTAssertEqual(m.tick(now: 10 * second + 300 * ms), .nothing, "answered: not busy")
    }

    func testTick_pingsAQuietChild_andKillsItWithoutAPong() {
        var m = machine(now: 10 * second)
        XCTAssertEqual(m.tick(now: 10 * second + 99 * ms), .nothing, "quiet for less than half the hang bound: not yet")
        XCTAssertEqual(m.tick(now: 10 * second + 100 * ms), .ping)
        XCTAssertEqual(m.tick(now: 10 * second + 150 * ms), .nothing, "one PING at a time")
        XCTAssertEqual(m.frame(.pong, now: 10 * second + 160 * ms), .nothing)
        XCTAssertEqual(m.tick(now: 10 * second + 200 * ms), .nothing, "answered: quiet again from the PONG")
        XCTAssertEqual(m.tick(now: 10 * second + 260 * ms), .ping)
        XCTAssertEqual(m.tick(now: 10 * second + 459 * ms), .nothing)
        XCTAssertEqual(m.tick(now: 10 * second + 460 * ms),
                       .kill(reason: "hung: no PONG within 0.2 seconds (timeoutMs × hangFactor), killed"))
    }

    // MARK: stop and quarantine

    func testStopAndQuarantine() {
        var restarting = machine()
        _ = restarting.exited(reason: "r", suspect: .idle, now: 1, jitter: 1)
        XCTAssertEqual(restarting.stop(), .killCurrent)
        XCTAssertEqual(restarting.phase, .stopped)

        var m = machine()
        XCTAssertEqual(m.stop(), .unload)
        m.stopped()
        XCTAssertEqual(m.stop(), .nothing)

        var q = machine()
        XCTAssertEqual(q.quarantine(because: "3 failures in a row"), .killCurrent)
        XCTAssertEqual(q.state, .quarantined(reason: "3 failures in a row"))
        q.stopped()
        XCTAssertEqual(q.quarantine(because: "again"), .nothing)
    }
}
