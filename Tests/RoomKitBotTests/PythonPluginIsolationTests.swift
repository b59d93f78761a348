import Foundation
import RoomKit
import RoomKitProtocol
import RoomKitTestSupport
import XCTest

/// Python plugins (the roomkit_plugin SDK, manifest `"command"`) for the
/// isolation tests: the same record file as `IsolationPlugins` (one JSON
/// line per magix event finished, written with os.write so a crash loses
/// nothing already handled), misbehaving when `trigger` (a Python
/// expression over `payload`) holds.
enum PythonIsolationPlugins {
    static let sdk = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("sdk/python").path

    static func source(record: String, trigger: String = "False", misbehave: String = "pass") -> String {
        """
        import json, os, signal, sys, time
        sys.path.insert(0, \(JSON.string(sdk).description))
        from roomkit_plugin import Plugin
        plugin = Plugin()
        out = os.open(\(JSON.string(record).description), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

        def misbehave(payload):
            \(misbehave)

        @plugin.on_magix
        def on_magix(room, event):
            payload = event.get("payload")
            if \(trigger):
                misbehave(payload)
            line = json.dumps({"room": room, "event": event.get("magixEvent"), "payload": payload}) + "\\n"
            os.write(out, line.encode())

        @plugin.on_unload
        def unloaded():
            os.write(out, b'{"unloaded":true}\\n')

        if __name__ == "__main__":
            plugin.run()

        """
    }

    /// A real segfault of the interpreter's process (no Python-level handler).
    static let segfault = "os.kill(os.getpid(), signal.SIGSEGV)"
    static let abort = "os.abort()"
    static let exit3 = "sys.exit(3)"
    static let hang = "time.sleep(100000)"
    static let allocate = "blocks = []\n    while True: blocks.append(bytearray(1 << 20))"
    static let raise = "raise RuntimeError('boom from python ' + json.dumps(payload))"
    static let onEveryEvent = "True"
    static let onBoom = "payload == 'boom'"

    /// Counts the magix events it handled in memory, records each count as
    /// the payload, and hands the count to its next version on a reload.
    static func counter(record: String) -> String {
        """
        import json, os, sys
        sys.path.insert(0, \(JSON.string(sdk).description))
        from roomkit_plugin import Plugin
        plugin = Plugin()
        out = os.open(\(JSON.string(record).description), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        state = {"n": 0}

        @plugin.on_magix
        def on_magix(room, event):
            state["n"] += 1
            os.write(out, (json.dumps({"room": room, "event": "chat", "payload": state["n"]}) + "\\n").encode())

        @plugin.export_state
        def export():
            return json.dumps(state)

        @plugin.import_state
        def restore(text):
            state.update(json.loads(text))

        if __name__ == "__main__":
            plugin.run()

        """
    }

    /// Writes the plugin as `name`.py in `directory`; its manifest entry's base.
    static func entry(_ name: String, source: String, in directory: String) throws -> [String: JSON] {
        let path = directory + "/\(name).py"
        try source.write(toFile: path, atomically: true, encoding: .utf8)
        return ["name": .string(name), "command": ["python3", .string(path)], "abi": 1, "hooks": ["magix"]]
    }
}

/// The C plugins' isolation tests (PluginIsolationTests), for a Python
/// plugin: a crash, an exit, a hang and the memory limit each cost only the
/// plugin's own calls (restart with backoff, the poison event skipped,
/// quarantine), and an exception in a handler is one failed call.
final class PythonPluginIsolationTests: XCTestCase {
    private let twenty: [JSON] = (0..<20).map { .int(Int64($0)) }

    override func setUpWithError() throws {
        let (status, _) = try shell("command -v python3")
        if status != 0 { throw XCTSkip("python3 is not installed") }
    }

    private func shell(_ command: String) throws -> (Int32, String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = ["-c", command]
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        return (process.terminationStatus, text)
    }

    private func scenario(trigger: String, misbehave: String, supervision: [String: JSON],
                          logLevel: String = "warning") async throws -> IsolationScenario {
        try await IsolationScenario(badEntry: { record, directory in
            try PythonIsolationPlugins.entry("bad", source: PythonIsolationPlugins.source(record: record, trigger: trigger, misbehave: misbehave),
                                             in: directory)
        }, supervision: supervision, logLevel: logLevel)
    }

    /// As PluginIsolationTests.assertCrashLoopIsContained: crash, restart,
    /// the same event again, crash, that event skipped, the next, crash: the
    /// third crash quarantines it (maxCrashes 2). Nothing else notices.
    private func assertCrashLoopIsContained(_ misbehave: String, expect reason: String, supervision extra: [String: JSON] = [:],
                                            file: StaticString = #filePath, line: UInt = #line) async throws {
        try await assertCrashLoopIsContained(misbehave, expect: [reason], supervision: extra, file: file, line: line)
    }

    /// `reasons`: a crash line must contain one of them.
    private func assertCrashLoopIsContained(_ misbehave: String, expect reasons: [String], supervision extra: [String: JSON] = [:],
                                            file: StaticString = #filePath, line: UInt = #line) async throws {
        var supervision: [String: JSON] = ["maxCrashes": 2, "crashWindowSeconds": 60, "memoryLimitMB": 256,
                                           "hangFactor": .int(Int64(PluginIsolationTests.hangFactor))]
        supervision.merge(extra) { _, new in new }
        let scenario = try await scenario(trigger: PythonIsolationPlugins.onEveryEvent, misbehave: misbehave, supervision: supervision)
        try await scenario.send(twenty)
        try await scenario.send([.string("hall-event")], in: "hall")
        await eventually(30, file: file, line: line, "quarantined") { scenario.statusLines("quarantined").count == 1 }
        try await scenario.assertCrashLoopContained(expected: twenty, reasons: reasons, context: "magix in room lobby",
                                                    file: file, line: line)
    }

    func testPythonSegfault_isRestartedThenQuarantined_roomsAndHealthyPluginUnaffected() async throws {
        try await assertCrashLoopIsContained(PythonIsolationPlugins.segfault, expect: "killed by signal 11 (SIGSEGV)")
    }

    func testPythonAbort_isRestartedThenQuarantined() async throws {
        try await assertCrashLoopIsContained(PythonIsolationPlugins.abort, expect: "killed by signal 6 (SIGABRT)")
    }

    func testPythonSysExit3_isACrash_restartedThenQuarantined() async throws {
        try await assertCrashLoopIsContained(PythonIsolationPlugins.exit3, expect: "exited with code 3")
    }

    func testPythonHangForever_isKilledAfterTimeoutTimesHangFactor_restartedThenQuarantined() async throws {
        // timeoutMs 50 × hangFactor 4: killed after 200 ms, as the C plugin.
        let bound = String(format: "%.1f", Double(50 * PluginIsolationTests.hangFactor) / 1000)
        // The bot words it after what it watched: the progress page's call, or DONE frames (PLUGIN-WIRE.md §8).
        try await assertCrashLoopIsContained(PythonIsolationPlugins.hang, expect: ["hung: a call ran longer than \(bound) seconds",
                                                                                   "hung: no progress on its events for \(bound) seconds"])
    }

    func testPythonAllocatingPastMemoryLimit_isACrashWithItsReason() async throws {
        try XCTSkipIf(ProcessInfo.processInfo.environment["ROOMKIT_SANITIZED"] != nil,
                      "no memory limit under a sanitizer (make check-sanitizers)")
        // CPython zero-fills every block: allow the allocation time to reach the limit before a hang would count.
        try await assertCrashLoopIsContained(PythonIsolationPlugins.allocate, expect: "went over its memory limit (memoryLimitMB 128)",
                                             supervision: ["memoryLimitMB": 128, "hangFactor": 100])
    }

    func testPythonHandlerException_isOneFailedCall_loggedWithTraceback_theProcessKeepsServing() async throws {
        let scenario = try await scenario(trigger: PythonIsolationPlugins.onBoom, misbehave: PythonIsolationPlugins.raise,
                                          supervision: [:])
        var events: [JSON] = (0..<10).map { .int(Int64($0)) }
        events.append("boom")
        events += (10..<20).map { .int(Int64($0)) }
        try await scenario.send(events)
        try await scenario.assertRoomsUnaffected(expected: events)
        let badRecord = scenario.badRecord
        await eventually(10, "bad plugin got the others") { IsolationScenario.recorded(badRecord).count >= 20 }
        XCTAssertEqual(IsolationScenario.recorded(badRecord), events.filter { $0 != "boom" }, "every other event, in order, once")
        await eventually(5, "the traceback in the bot's log") { scenario.log.contains("RuntimeError: boom from python \"boom\"") }
        XCTAssertTrue(scenario.log.contains("Traceback (most recent call last)"), scenario.log)
        XCTAssertEqual(scenario.statusLines("crashed").count, 0, "an exception is not a crash")
        XCTAssertEqual(scenario.statusLines("restarted").count, 0)
        // The child's FAILED frame: one failed call, counted and logged at
        // warning like an inline hook's failure; the other 20 are calls.
        await eventually(10, "21 calls counted") { (try? scenario.plugin("bad"))??["calls"] == 21 }
        let report = try XCTUnwrap(try scenario.plugin("bad"))
        XCTAssertEqual(report["status"], "loaded")
        XCTAssertEqual(report["failures"], 1, "the raising handler is one failure")
        XCTAssertEqual(report["calls"], 21)
        XCTAssertEqual(report["process"]?["crashes"], 0)
        XCTAssertTrue(scenario.log.contains("plugin call failed"), scenario.log)
        XCTAssertTrue(scenario.log.contains("magix in room lobby failed in the plugin process: on_magix handler on_magix raised RuntimeError"),
                      scenario.log)
        try await scenario.finish()
    }

    func testPythonCrashOnOneEvent_skipsThatEventAfterTwoCrashes_andGetsEveryOtherEventOnce() async throws {
        let scenario = try await scenario(trigger: PythonIsolationPlugins.onBoom, misbehave: PythonIsolationPlugins.segfault,
                                          supervision: [:])
        var events: [JSON] = (0..<10).map { .int(Int64($0)) }
        events.append("boom")
        events += (10..<20).map { .int(Int64($0)) }
        try await scenario.send(events)
        try await scenario.assertRoomsUnaffected(expected: events)
        let badRecord = scenario.badRecord
        await eventually(20, "bad plugin got the others") { IsolationScenario.recorded(badRecord).count >= 20 }
        XCTAssertEqual(IsolationScenario.recorded(badRecord), events.filter { $0 != "boom" }, "every other event, in order, once")
        XCTAssertEqual(scenario.statusLines("crashed").count, 2)
        XCTAssertEqual(scenario.statusLines("skipped").count, 1)
        XCTAssertEqual(scenario.statusLines("restarted").count, 2)
        XCTAssertEqual(scenario.statusLines("quarantined").count, 0)
        try await scenario.finish()
    }

    func testPythonReload_handsItsStateToTheNewProcess() async throws {
        let scenario = try await IsolationScenario(badEntry: { record, directory in
            try PythonIsolationPlugins.entry("bad", source: PythonIsolationPlugins.counter(record: record), in: directory)
        }, supervision: [:])
        let record = scenario.badRecord
        try await scenario.send([1, 2, 3])
        await eventually(10, "three counted") { IsolationScenario.recorded(record).count == 3 }
        let pid = try XCTUnwrap(try scenario.plugin("bad")?["process"]?["pid"]?.int64Value)
        let (status, body) = http(scenario.port, "POST", "/v1/plugins/bad/reload")
        XCTAssertEqual(status, 200, body)
        try await scenario.send([4, 5])
        await eventually(10, "two more counted") { IsolationScenario.recorded(record).count == 5 }
        XCTAssertEqual(IsolationScenario.recorded(record), [1, 2, 3, 4, 5], "the new process went on from the exported count")
        let newPid = try XCTUnwrap(try scenario.plugin("bad")?["process"]?["pid"]?.int64Value)
        XCTAssertNotEqual(newPid, pid, "a new process")
        XCTAssertEqual(scenario.statusLines("crashed").count, 0)
        try await scenario.finish()
    }
}
