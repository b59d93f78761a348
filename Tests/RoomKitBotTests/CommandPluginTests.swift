import Foundation
import RoomKit
import RoomKitProtocol
import RoomKitTestSupport
import XCTest

/// `"command"` plugins (any executable speaking docs/PLUGIN-WIRE.md) in a
/// real roombot with a real roomd: WirePythonFixture, written with Python's
/// standard library only, gets the same supervision as a C plugin.
final class CommandPluginTests: XCTestCase {
    private let twenty: [JSON] = (0..<20).map { .int(Int64($0)) }

    override func setUpWithError() throws {
        guard PluginCommandProbe.python3 else { throw XCTSkip("python3 is not on PATH") }
    }

    func testPythonCommandPlugin_getsEveryEvent_printsToTheLog_andSeesNoSecrets() async throws {
        let scenario = try await IsolationScenario(bad: { _ in "" }, supervision: [:], logLevel: "info", badPython: "none",
                                                   environment: ["ROOMD_SECRET": "s3cret", "ROOMKIT_TEST_SECRET": "x",
                                                                 "ROOMKIT_HARMLESS": "kept"])
        try await scenario.send(twenty)
        let record = scenario.badRecord
        await eventually(10, "the command plugin got every event") { IsolationScenario.recorded(record).count >= 20 }
        XCTAssertEqual(IsolationScenario.recorded(record), twenty, "every event, in order, once")
        try await scenario.assertRoomsUnaffected(expected: twenty)
        XCTAssertTrue(scenario.log.contains("secrets seen: none"), "RoomKit's secrets are stripped from a plugin's environment: \(scenario.log)")
        XCTAssertTrue(scenario.log.contains("hello from python stdout"), "stdout goes to the bot's log line by line")
        XCTAssertTrue(scenario.log.contains("plugin call failed (bad arguments or unknown room)"),
                      "a failed fire-and-forget call is logged")
        let report = try XCTUnwrap(try scenario.plugin("bad"))
        XCTAssertEqual(report["status"], "loaded")
        XCTAssertEqual(report["isolation"], "process")
        try await scenario.finish()
    }

    func testPythonCommandPlugin_segfaultOnEveryEvent_isRestartedSkipsThePoisonEventThenQuarantined() async throws {
        let scenario = try await IsolationScenario(bad: { _ in "" }, supervision: ["maxCrashes": 2, "crashWindowSeconds": 60],
                                                   badPython: "segfault")
        try await scenario.send(twenty)
        await eventually(20, "quarantined") { scenario.statusLines("quarantined").count == 1 }
        try await scenario.assertRoomsUnaffected(expected: twenty)
        let crashes = scenario.statusLines("crashed")
        XCTAssertEqual(crashes.count, 3, "\(crashes)")
        XCTAssertTrue(crashes.allSatisfy { $0.contains("killed by signal 11 (SIGSEGV)") && $0.contains("while handling magix in room lobby") },
                      "\(crashes)")
        XCTAssertTrue(scenario.statusLines("skipped").first?.contains("skipped magix in room lobby: it crashed the plugin twice") == true)
        XCTAssertEqual(scenario.statusLines("restarted").count, 2)
        try await scenario.finish()
    }

    func testPythonCommandPlugin_stuckOutsideAnyEvent_isFoundByPing_andKilled() async throws {
        let scenario = try await IsolationScenario(bad: { _ in "" }, supervision: ["maxCrashes": 0, "hangFactor": 4],
                                                   badPython: "stall")
        await eventually(20, "quarantined") { scenario.statusLines("quarantined").count == 1 }
        let crashes = scenario.statusLines("crashed")
        XCTAssertEqual(crashes.count, 1, "\(crashes)")
        XCTAssertTrue(crashes.first?.contains("hung: no PONG within 0.2 seconds") == true, "\(crashes)")
        try await scenario.send(twenty)
        try await scenario.assertRoomsUnaffected(expected: twenty)
        try await scenario.finish()
    }

    func testPythonCommandPlugin_hang_isKilledWithoutAProgressPage() async throws {
        let scenario = try await IsolationScenario(bad: { _ in "" }, supervision: ["maxCrashes": 0, "hangFactor": 4],
                                                   badPython: "hang")
        try await scenario.send(twenty)
        await eventually(20, "quarantined") { scenario.statusLines("quarantined").count == 1 }
        try await scenario.assertRoomsUnaffected(expected: twenty)
        let crashes = scenario.statusLines("crashed")
        XCTAssertEqual(crashes.count, 1, "\(crashes)")
        XCTAssertTrue(crashes.first?.contains("hung: a call ran longer than") == true, "\(crashes)")
        try await scenario.finish()
    }
}

enum PluginCommandProbe {
    static let python3: Bool = {
        (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":").contains {
            FileManager.default.isExecutableFile(atPath: "\($0)/python3")
        }
    }()
}

/// `roombot simulate` runs command plugins too, repeatably by seed.
final class CommandPluginSimulateTests: XCTestCase {
    func testSimulate_aPythonCommandPlugin_answersInVirtualTime_sameLogForTheSameSeed() throws {
        guard PluginCommandProbe.python3 else { throw XCTSkip("python3 is not on PATH") }
        let directory = NSTemporaryDirectory() + "roomkit-simulate-py-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try WirePythonFixture.script.write(toFile: directory + "/fixture_plugin.py", atomically: true, encoding: .utf8)
        let manifest: JSON = ["manifestVersion": 1, "plugins": [[
            "name": "py", "command": ["python3", "fixture_plugin.py", "rec.ndjson", "echo"], "abi": 1, "hooks": ["magix"],
        ]]]
        try Data(manifest.serialized()).write(to: URL(fileURLWithPath: directory + "/plugins.json"))
        let steps = (0..<5).map { i in
            #"{"at": \#(1000 + i * 500), "magix": {"room": "lobby", "from": "alice", "event": "command", "payload": "!ping"}}"#
        }.joined(separator: ",\n")
        try Data(#"""
            {"steps": [
              {"at": 0, "login": {"room": "lobby"}},
              \#(steps),
              {"at": 1000, "expect": {"within": 100, "action": {"op": "magix", "event": "reply", "payload": {"text": "pong-py"}}}},
              {"at": 3000, "expect": {"within": 100, "action": {"op": "magix", "event": "reply", "payload": {"text": "pong-py"}}}}
            ]}
            """#.utf8).write(to: URL(fileURLWithPath: directory + "/scenario.json"))
        var logs: [Data] = []
        for index in 0..<2 {
            let events = directory + "/events-\(index).ndjson"
            let child = try ChildProcess("roombot", ["simulate", "--manifest", directory + "/plugins.json", "--script",
                                                     directory + "/scenario.json", "--events", events, "--seed", "7"])
            let (status, _, errors) = child.finish(timeout: 60)
            XCTAssertEqual(status, 0, errors)
            XCTAssertTrue(errors.contains("scenario.json: 2 expectation(s) held"), errors)
            logs.append(try Data(contentsOf: URL(fileURLWithPath: events)))
        }
        XCTAssertGreaterThan(logs[0].count, 200)
        XCTAssertEqual(logs[0], logs[1], "the same seed gives the same log, with a process plugin")
    }
}
