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

    func testPythonCommandPlugin_hang_isKilledWithoutAProgressPage() async throws {
        let scenario = try await IsolationScenario(bad: { _ in "" }, supervision: ["maxCrashes": 0, "hangFactor": 4],
                                                   badPython: "hang")
        try await scenario.send(twenty)
        await eventually(20, "quarantined") { scenario.statusLines("quarantined").count == 1 }
        try await scenario.assertRoomsUnaffected(expected: twenty)
        let crashes = scenario.statusLines("crashed")
        XCTAssertEqual(crashes.count, 1, "\(crashes)")
        XCTAssertTrue(crashes.first?.contains("hung: no progress on its events for") == true, "\(crashes)")
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
