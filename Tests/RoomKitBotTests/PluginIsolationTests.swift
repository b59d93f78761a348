import Foundation
import RoomKit
import RoomKitProtocol
import RoomKitTestSupport
import XCTest

/// Process-isolated plugins that crash, hang, run out of memory or print
/// garbage, next to a healthy plugin, in a real roombot with a real roomd.
final class PluginIsolationTests: XCTestCase {
    private let twenty: [JSON] = (0..<20).map { .int(Int64($0)) }

    /// A plugin that dies on every event: crash, restart, the same event
    /// again, crash, that event skipped, the next event, crash: with
    /// maxCrashes 2 the third crash quarantines it. Nothing else notices.
    private func assertCrashLoopIsContained(_ misbehave: String, expect reason: String,
                                            file: StaticString = #filePath, line: UInt = #line) async throws {
        let scenario = try await IsolationScenario(
            bad: { IsolationPlugins.source(record: $0, trigger: IsolationPlugins.onEveryEvent, misbehave: misbehave) },
            // A sanitizer slows the plugin process 5-15x: a hook that would
            // crash must not look hung first (make check-sanitizers).
            supervision: ["maxCrashes": 2, "crashWindowSeconds": 60, "memoryLimitMB": 96,
                          "hangFactor": .int(Int64(Self.hangFactor))])
        try await scenario.send(twenty)
        try await scenario.send([.string("hall-event")], in: "hall")
        // Three hangs of timeoutMs × hangFactor each, plus the restarts, fit in the wait.
        await eventually(Self.hangFactor == 4 ? 10 : 30, file: file, line: line, "quarantined") {
            scenario.statusLines("quarantined").count == 1
        }
        try await scenario.assertCrashLoopContained(expected: twenty, reasons: [reason], context: "while handling magix in room lobby",
                                                    file: file, line: line)
    }

    func testSegfault_isRestartedThenQuarantined_roomsAndHealthyPluginUnaffected() async throws {
        try await assertCrashLoopIsContained(IsolationPlugins.segfault, expect: "killed by signal 11 (SIGSEGV)")
    }

    func testAbort_isRestartedThenQuarantined_roomsAndHealthyPluginUnaffected() async throws {
        try await assertCrashLoopIsContained(IsolationPlugins.abort, expect: "killed by signal 6 (SIGABRT)")
    }

    func testExit3_isACrash_restartedThenQuarantined() async throws {
        try await assertCrashLoopIsContained(IsolationPlugins.exit3, expect: "exited with code 3")
    }

    /// A sanitizer slows the plugin process 5-15x: a hook that would crash
    /// must not look hung first (make check-sanitizers). Under
    /// ThreadSanitizer the first call of a freshly started plugin host
    /// took more than 1 s (× 20) on a busy machine, so 60 (3 s).
    static let hangFactor = ProcessInfo.processInfo.environment["ROOMKIT_SANITIZED"] != nil ? 60 : 4

    func testHangForever_isKilledAfterTimeoutTimesHangFactor_restartedThenQuarantined() async throws {
        // timeoutMs 50 × hangFactor 4: killed after 200 ms (3 s under a sanitizer: × 60).
        let bound = String(format: "%.1f", Double(50 * Self.hangFactor) / 1000)
        try await assertCrashLoopIsContained(IsolationPlugins.hang, expect: "hung: a call ran longer than \(bound) seconds")
    }

    func testAllocatingPastMemoryLimit_isACrashWithItsReason() async throws {
        // A sanitizer build cannot run under an address-space limit (its
        // shadow memory), so the plugin host sets none there.
        try XCTSkipIf(ProcessInfo.processInfo.environment["ROOMKIT_SANITIZED"] != nil,
                      "no memory limit under a sanitizer (make check-sanitizers)")
        try await assertCrashLoopIsContained(IsolationPlugins.allocate, expect: "went over its memory limit (memoryLimitMB 96)")
    }

    func testUnparsableFrame_isACrash() async throws {
        try await assertCrashLoopIsContained(IsolationPlugins.badFrame, expect: "an unparsable frame")
    }

    func testSpinningPastCPULimit_isACrashWithItsReason_andMaxCrashes0Quarantines() async throws {
        // hangFactor high enough that the CPU limit (1 s of CPU) comes first.
        let scenario = try await IsolationScenario(
            bad: { IsolationPlugins.source(record: $0, trigger: IsolationPlugins.onEveryEvent, misbehave: IsolationPlugins.spin) },
            supervision: ["cpuLimitSeconds": 1, "hangFactor": 1000, "maxCrashes": 0])
        try await scenario.send(twenty)
        await eventually(15, "quarantined") { scenario.statusLines("quarantined").count == 1 }
        try await scenario.assertRoomsUnaffected(expected: twenty)
        let crashes = scenario.statusLines("crashed")
        XCTAssertEqual(crashes.count, 1, "\(crashes)")
        XCTAssertTrue(crashes.first?.contains("went over its CPU limit (cpuLimitSeconds 1): was killed by signal 24 (SIGXCPU)") == true,
                      "\(crashes)")
        XCTAssertTrue(scenario.statusLines("quarantined").first?.contains("1 crashes within 300 s") == true)
        XCTAssertEqual(scenario.statusLines("restarted").count, 0)
        try await scenario.finish()
    }

    func testCrashOnOneEvent_skipsThatEventAfterTwoCrashes_andGetsEveryOtherEventOnce() async throws {
        let scenario = try await IsolationScenario(
            bad: { IsolationPlugins.source(record: $0, trigger: IsolationPlugins.onBoom, misbehave: IsolationPlugins.segfault) },
            supervision: [:])
        var events: [JSON] = (0..<10).map { .int(Int64($0)) }
        events.append(.string("boom"))
        events += (10..<20).map { .int(Int64($0)) }
        try await scenario.send(events)
        try await scenario.assertRoomsUnaffected(expected: events)
        let badRecord = scenario.badRecord
        await eventually(10, "bad plugin got the others") { IsolationScenario.recorded(badRecord).count >= 20 }
        XCTAssertEqual(IsolationScenario.recorded(badRecord), events.filter { $0 != "boom" }, "every other event, in order, once")
        XCTAssertEqual(scenario.statusLines("crashed").count, 2)
        XCTAssertEqual(scenario.statusLines("skipped").count, 1)
        XCTAssertEqual(scenario.statusLines("restarted").count, 2)
        XCTAssertEqual(scenario.statusLines("quarantined").count, 0)
        let report = try XCTUnwrap(try scenario.plugin("bad"))
        XCTAssertEqual(report["status"], "loaded")
        XCTAssertEqual(report["process"]?["state"], "running")
        XCTAssertEqual(report["process"]?["skipped"], 1)
        XCTAssertEqual(report["process"]?["dropped"], 0)
        try await scenario.finish()
    }

    func testGarbageOnStdout_goesToTheLogLineByLine_andNeverBreaksTheFraming() async throws {
        let scenario = try await IsolationScenario(
            bad: { IsolationPlugins.source(record: $0, trigger: IsolationPlugins.onEveryEvent, misbehave: IsolationPlugins.garbage) },
            supervision: [:], logLevel: "info")
        try await scenario.send(twenty)
        try await scenario.assertRoomsUnaffected(expected: twenty)
        let badRecord = scenario.badRecord
        await eventually(10, "bad plugin got everything") { IsolationScenario.recorded(badRecord).count >= 20 }
        XCTAssertEqual(IsolationScenario.recorded(badRecord), twenty)
        await eventually(5, "stdout in the log") {
            scenario.log.split(separator: "\n").filter { $0.contains("GARBAGE-MARKER") }.count == 20
        }
        let lines = scenario.log.split(separator: "\n").filter { $0.contains("GARBAGE-MARKER") }
        XCTAssertTrue(lines.allSatisfy { $0.contains("plugin=bad") && $0.contains("stream=stdout") }, "\(lines.prefix(2))")
        XCTAssertTrue(scenario.log.contains("stream=stderr"), "stderr is logged too")
        XCTAssertEqual(scenario.statusLines("crashed").count, 0)
        XCTAssertEqual(try scenario.plugin("bad")?["process"]?["crashes"], 0)
        try await scenario.finish()
    }

    func testEventsDuringARestart_areQueuedUpToQueueLimit_thenDroppedAndCounted() async throws {
        let scenario = try await IsolationScenario(
            bad: { IsolationPlugins.source(record: $0, trigger: IsolationPlugins.onBoom, misbehave: IsolationPlugins.segfault) },
            supervision: ["queueLimit": 5, "restartBackoffMs": 300])
        let events: [JSON] = ["boom"] + twenty
        try await scenario.send(events)
        try await scenario.assertRoomsUnaffected(expected: events)
        await eventually(10, "boom skipped") { scenario.statusLines("skipped").count == 1 }
        let badRecord = scenario.badRecord
        // At most queueLimit events wait for the process (boom among them); the rest are dropped.
        await eventually(5, "the queued events delivered") { IsolationScenario.recorded(badRecord).count == 4 }
        let report = try XCTUnwrap(try scenario.plugin("bad"))
        XCTAssertEqual(report["process"]?["dropped"], 16)
        let delivered = IsolationScenario.recorded(badRecord).compactMap(\.int64Value)
        XCTAssertEqual(delivered, [0, 1, 2, 3], "the first four after boom, in order")
        let metrics = http(scenario.port, "GET", "/metrics").1
        XCTAssertTrue(metrics.contains("roombot_plugin_dropped_events_total{plugin=\"bad\"} 16"), metrics)
        XCTAssertTrue(metrics.contains("roombot_plugin_crashes_total{plugin=\"bad\"} 2"), metrics)
        try await scenario.finish()
    }

    func testKill9OfRoombot_itsPluginProcessesExit() async throws {
        let scenario = try await IsolationScenario(bad: { IsolationPlugins.source(record: $0) }, supervision: [:])
        let pids = ((try? JSON.parse(http(scenario.port, "GET", "/v1/plugins").1).arrayValue) ?? [])
            .compactMap { $0["process"]?["pid"]?.int64Value }.map { pid_t($0) }
        XCTAssertEqual(pids.count, 2)
        XCTAssertTrue(pids.allSatisfy(processAlive))
        scenario.bot.signal(SIGKILL)
        _ = scenario.bot.finish()
        await eventually(5, "plugin processes exit with their bot") { pids.allSatisfy { !processAlive($0) } }
        try await scenario.watcher.close()
        try scenario.harness.close()
    }
}
