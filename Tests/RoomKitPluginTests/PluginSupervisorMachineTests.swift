@testable import RoomKitPluginHost
import XCTest

/// The supervision's decisions without a process: each input and its result.
final class PluginSupervisorMachineTests: XCTestCase {
    private func machine(maxCrashes: Int = 2, backoffMs: Int = 100) -> PluginSupervisorMachine {
        var limits = PluginSupervision()
        limits.maxCrashes = maxCrashes
        limits.crashWindowSeconds = 60
        limits.restartBackoffMs = backoffMs
        var machine = PluginSupervisorMachine(limits: limits, hangBound: .milliseconds(200), loadBound: .seconds(2))
        XCTAssertEqual(machine.loaded(ok: true), .running)
        return machine
    }

    private let second: UInt64 = 1_000_000_000

    func testCrashes_restartWithDoublingBackoff_thenQuarantine() {
        var m = machine(maxCrashes: 2, backoffMs: 100)
        XCTAssertEqual(m.exited(reason: "was killed by signal 11 (SIGSEGV)", suspect: .idle, now: 1 * second, jitter: 1),
                       .restart(delay: .milliseconds(100), message: "was killed by signal 11 (SIGSEGV)", skip: nil, skipNote: nil))
        XCTAssertEqual(m.phase, .restarting)
        XCTAssertEqual(m.restarted(ok: true), .running)
        XCTAssertEqual(m.exited(reason: "exited with code 3", suspect: .url, now: 2 * second, jitter: 1),
                       .restart(delay: .milliseconds(200), message: "exited with code 3 in urlInterrupter", skip: nil, skipNote: nil))
        XCTAssertEqual(m.restarted(ok: true), .running)
        XCTAssertEqual(m.exited(reason: "exited with code 3", suspect: .timer, now: 3 * second, jitter: 1),
                       .quarantine(reason: "3 crashes within 60 s; last: exited with code 3 in a timer",
                                   message: "exited with code 3 in a timer", skip: nil, skipNote: nil))
        XCTAssertEqual(m.phase, .quarantined)
        XCTAssertEqual(m.exited(reason: "late", suspect: .idle, now: 4 * second, jitter: 1), .finished)
    }

    func testCrashesOutsideTheWindow_doNotCount() {
        var m = machine(maxCrashes: 1)
        _ = m.exited(reason: "x", suspect: .idle, now: 1 * second, jitter: 1)
        _ = m.restarted(ok: true)
        guard case .restart = m.exited(reason: "x", suspect: .idle, now: 100 * second, jitter: 1) else {
            return XCTFail("a crash 99 s later is the only one in the 60 s window")
        }
    }

    func testAnEventThatCrashesTwice_isSkipped() {
        var m = machine(maxCrashes: 5)
        let event = PluginSupervisorMachine.Suspect.event(seq: 7, label: "magix in room lobby")
        XCTAssertEqual(m.exited(reason: "r", suspect: event, now: 1 * second, jitter: 1),
                       .restart(delay: .milliseconds(100), message: "r while handling magix in room lobby", skip: nil, skipNote: nil))
        _ = m.restarted(ok: true)
        XCTAssertEqual(m.exited(reason: "r", suspect: event, now: 2 * second, jitter: 1),
                       .restart(delay: .milliseconds(200), message: "r while handling magix in room lobby", skip: 7,
                                skipNote: "skipped magix in room lobby: it crashed the plugin twice"))
    }

    func testBackoff_isCappedAt30s_andJitterIsBounded() {
        var m = machine(maxCrashes: 100, backoffMs: 20_000)
        _ = m.exited(reason: "r", suspect: .idle, now: 1 * second, jitter: 1)
        _ = m.restarted(ok: true)
        XCTAssertEqual(m.exited(reason: "r", suspect: .idle, now: 2 * second, jitter: 9),
                       .restart(delay: .milliseconds(45_000), message: "r", skip: nil, skipNote: nil))
    }

    func testTick_killsAHungCall_orNoProgress_onlyWhileRunning() {
        var m = machine()
        XCTAssertEqual(m.tick(now: 10 * second, busy: .idle), .nothing)
        XCTAssertEqual(m.tick(now: 10 * second, busy: .call(since: 10 * second - 100_000_000, loading: false)), .nothing)
        XCTAssertEqual(m.tick(now: 10 * second, busy: .call(since: 10 * second - 300_000_000, loading: false)),
                       .kill(reason: "hung: a call ran longer than 0.2 seconds (timeoutMs × hangFactor), killed"))
        XCTAssertEqual(m.tick(now: 10 * second, busy: .call(since: 10 * second - 300_000_000, loading: true)), .nothing,
                       "a load has the load bound")
        XCTAssertEqual(m.tick(now: 10 * second, busy: .outstanding(lastProgress: 10 * second - 300_000_000)),
                       .kill(reason: "hung: no progress on its events for 0.2 seconds (timeoutMs × hangFactor), killed"))
        _ = m.exited(reason: "r", suspect: .idle, now: 10 * second, jitter: 1)
        XCTAssertEqual(m.tick(now: 20 * second, busy: .outstanding(lastProgress: 1)), .nothing, "restarting: not judged")
    }

    func testLoadFailure_stopRestartingAndQuarantine() {
        var failing = PluginSupervisorMachine(limits: PluginSupervision(), hangBound: .seconds(1), loadBound: .seconds(2))
        XCTAssertEqual(failing.loaded(ok: false), .stopAndKill)
        XCTAssertEqual(failing.phase, .stopped)
        XCTAssertEqual(failing.exited(reason: "r", suspect: .load, now: 1, jitter: 1), .finished)

        var m = machine()
        XCTAssertEqual(m.stop(), .unload)
        XCTAssertEqual(m.phase, .stopping)
        XCTAssertEqual(m.exited(reason: "exited with code 0", suspect: .idle, now: 1, jitter: 1), .finished, "an asked-for exit")

        var restarting = machine()
        _ = restarting.exited(reason: "r", suspect: .idle, now: 1, jitter: 1)
        XCTAssertEqual(restarting.stop(), .killCurrent)
        XCTAssertEqual(restarting.restarted(ok: true), .kill(reason: "unloaded while restarting"))

        var spawn = machine()
        _ = spawn.exited(reason: "r", suspect: .idle, now: 1, jitter: 1)
        XCTAssertEqual(spawn.spawnFailed("ENOENT"), .quarantine(reason: "cannot restart its process: ENOENT"))

        var q = machine()
        XCTAssertEqual(q.quarantine(), .killCurrent)
        XCTAssertEqual(q.phase, .quarantined)
    }
}
