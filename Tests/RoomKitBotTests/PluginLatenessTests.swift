import Foundation
import RoomKit
import RoomKitProtocol
import RoomKitTestSupport
import XCTest

/// One lateness rule for both kinds of plugin (PluginCallDeadline): a call
/// over `timeoutMs` is one failed call, inline or in a process; only a
/// process plugin is also killed, and only after `timeoutMs × hangFactor`.
/// Against the built roombot on a real roomd: a plugin that sleeps 300 ms
/// on the magix "boom" (timeoutMs 100, hangFactor 20: the hang bound is 2 s).
final class PluginLatenessTests: XCTestCase {
    private let supervision: [String: JSON] = ["timeoutMs": 100, "hangFactor": 20, "maxCrashes": 5]

    /// Sends 1, then "boom" alone (nothing queued behind it: an inline
    /// plugin also counts each call still waiting behind a call stuck past
    /// `timeoutMs`, PluginCallDeadline), then 2; the plugin finishes all
    /// three; then exactly one failure, no crash or restart, still loaded,
    /// and the failure is lobby's.
    private func assertOneFailure(_ scenario: IsolationScenario, process: Bool,
                                  file: StaticString = #filePath, line: UInt = #line) async throws {
        for (index, payload) in [JSON.int(1), .string("boom"), .int(2)].enumerated() {
            try await scenario.send([payload])
            await eventually(10, file: file, line: line, "\(payload) finished") {
                IsolationScenario.recorded(scenario.badRecord).count == index + 1
            }
        }
        XCTAssertEqual(IsolationScenario.recorded(scenario.badRecord), [.int(1), .string("boom"), .int(2)], file: file, line: line)
        await eventually(10, file: file, line: line, "the late call counted") {
            (try? scenario.plugin("bad"))?["failures"]?.intValue == 1
        }
        try await Task.sleep(for: .milliseconds(300))  // nothing more may follow
        let report = try XCTUnwrap(try scenario.plugin("bad"), file: file, line: line)
        XCTAssertEqual(report["failures"]?.intValue, 1, "one late call is one failure: \(report)", file: file, line: line)
        XCTAssertEqual(report["status"], "loaded", file: file, line: line)
        if process {
            XCTAssertEqual(report["process"]?["crashes"]?.intValue, 0, "below the hang bound: no kill", file: file, line: line)
            XCTAssertEqual(report["process"]?["restarts"]?.intValue, 0, file: file, line: line)
        }
        XCTAssertTrue(scenario.statusLines("crashed").isEmpty, "\(scenario.statusLines("crashed"))", file: file, line: line)
        let lobby = (try JSON.parse(http(scenario.port, "GET", "/v1/rooms/lobby").1))["pluginCalls"]?.arrayValue?
            .first { $0["plugin"]?.stringValue == "bad" }
        XCTAssertEqual(lobby?["failures"]?.intValue, 1, "\(String(describing: lobby))", file: file, line: line)
        XCTAssertEqual(lobby?["lastError"]?.stringValue?.hasPrefix("a call took longer than 0.1 seconds"), true,
                       "\(String(describing: lobby))", file: file, line: line)
        try await scenario.assertRoomsUnaffected(expected: [.int(1), .string("boom"), .int(2)], file: file, line: line)
        try await scenario.finish(file: file, line: line)
    }

    private func cPlugin(isolation: String) async throws -> IsolationScenario {
        try await IsolationScenario(
            bad: { IsolationPlugins.source(record: $0, trigger: IsolationPlugins.onBoom, misbehave: "usleep(300000);") },
            // Inline: no supervision fields (a null removes the scenario's own).
            supervision: isolation == "process" ? supervision.merging(["isolation": "process"]) { _, new in new }
                : ["timeoutMs": 100, "isolation": "inline", "restartBackoffMs": .null])
    }

    func testInlineCPlugin_overTimeoutMs_isOneFailure() async throws {
        try await assertOneFailure(try await cPlugin(isolation: "inline"), process: false)
    }

    func testProcessCPlugin_overTimeoutMs_belowTheHangBound_isOneFailure_notKilled() async throws {
        try await assertOneFailure(try await cPlugin(isolation: "process"), process: true)
    }

    func testPythonPlugin_overTimeoutMs_belowTheHangBound_isOneFailure_notKilled() async throws {
        let scenario = try await IsolationScenario(badEntry: { record, directory in
            try PythonIsolationPlugins.entry("bad", source: PythonIsolationPlugins.source(
                record: record, trigger: PythonIsolationPlugins.onBoom, misbehave: "time.sleep(0.3)"), in: directory)
        }, supervision: supervision)
        try await assertOneFailure(scenario, process: true)
    }
}
