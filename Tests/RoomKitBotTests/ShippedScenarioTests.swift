import Foundation
import RoomKitProtocol
import RoomKitTestSupport
import XCTest

/// `roombot simulate` (CLI.md) on the scenarios shipped for the shipped
/// plugins (Plugins/Scenarios), each against the freshly built library.
final class ShippedScenarioTests: XCTestCase {
    private static let scenarios = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("Plugins/Scenarios").path

    private var directory = ""

    override func setUpWithError() throws {
        directory = NSTemporaryDirectory() + "roomkit-simulate-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    }

    override func tearDown() {
        try? FileManager.default.removeItem(atPath: directory)
    }

    private func manifest(_ name: String, library: String, hooks: [String], config: JSON = .null) throws -> String {
        let path = directory + "/\(name).plugins.json"
        let manifest: JSON = ["manifestVersion": 1, "plugins": [[
            "name": .string(name), "library": .string(try builtProduct(library)), "abi": 1,
            "hooks": .array(hooks.map(JSON.string)), "config": config,
        ]]]
        try Data(manifest.serialized()).write(to: URL(fileURLWithPath: path))
        return path
    }

    private func simulate(_ manifest: String, _ script: String, _ extra: [String] = []) throws -> (Int32, String) {
        let child = try ChildProcess("roombot", ["simulate", "--manifest", manifest, "--script", script] + extra)
        let (status, _, errors) = child.finish(timeout: 60)
        return (status, errors)
    }

    func testEchoCommands_answersPing_renewsItsToken_andGivesUpAfterTwentyMinutes() throws {
        let manifest = try manifest("echo-commands", library: "libecho-commands.so", hooks: ["room"])
        let (status, errors) = try simulate(manifest, Self.scenarios + "/echo-commands.json")
        XCTAssertEqual(status, 0, errors)
        XCTAssertTrue(errors.contains("echo-commands.json: 12 expectation(s) held over 1460000 ms of virtual time"), errors)
    }

    func testURLRewrite_rewritesTheImageURLTheBotSends() throws {
        let manifest = try manifest("url-rewrite", library: "liburl-rewrite.so", hooks: ["urlInterrupter"],
                                    config: ["from": "http://assets.example/", "to": "https://cdn.example/assets/"])
        let (status, errors) = try simulate(manifest, Self.scenarios + "/url-rewrite.json")
        XCTAssertEqual(status, 0, errors)
    }

    func testErrorLog_writesTheServersErrorToItsFile() throws {
        let log = directory + "/errors.ndjson"
        let manifest = try manifest("error-log", library: "liberror-log.so", hooks: ["throwError"], config: ["file": .string(log)])
        let (status, errors) = try simulate(manifest, Self.scenarios + "/error-log.json")
        XCTAssertEqual(status, 0, errors)
        let lines = (try String(contentsOfFile: log, encoding: .utf8)).split(separator: "\n").map { try? JSON.parse(Array($0.utf8)) }
        XCTAssertEqual(lines.count, 1, "one throwError, once")
        XCTAssertEqual(lines.first??["domain"], "server")
        XCTAssertEqual(lines.first??["code"], 1_009_001)
    }

    /// The Python example (Plugins/PyEcho, a `command` plugin over the wire)
    /// with its own manifest: magix answered, storage kept, the image URL
    /// rewritten; the same seed writes the same event log.
    func testPyEcho_aPythonCommandPlugin_answersCountsAndRewritesURLs() throws {
        let manifest = URL(fileURLWithPath: Self.scenarios).deletingLastPathComponent().appendingPathComponent("PyEcho/plugins.json").path
        var logs: [Data] = []
        for index in 0..<2 {
            let events = directory + "/py-events-\(index).ndjson"
            let (status, errors) = try simulate(manifest, Self.scenarios + "/py-echo.json", ["--events", events])
            XCTAssertEqual(status, 0, errors)
            XCTAssertTrue(errors.contains("py-echo.json: 4 expectation(s) held"), errors)
            logs.append(try Data(contentsOf: URL(fileURLWithPath: events)))
        }
        XCTAssertEqual(logs[0], logs[1], "deterministic by seed with a process plugin too")
    }

    /// Same seed, same event log, byte for byte; another seed moves the
    /// reconnect attempts (the backoff's jitter) but not what the plugin does.
    func testSameSeed_sameEventLog_byteForByte() throws {
        let manifest = try manifest("echo-commands", library: "libecho-commands.so", hooks: ["room"])
        let script = Self.scenarios + "/echo-commands.json"
        var logs: [Data] = []
        for (index, seed) in ["7", "7", "8"].enumerated() {
            let events = directory + "/events-\(index).ndjson"
            let (status, errors) = try simulate(manifest, script, ["--events", events, "--seed", seed])
            XCTAssertEqual(status, 0, errors)
            logs.append(try Data(contentsOf: URL(fileURLWithPath: events)))
        }
        XCTAssertGreaterThan(logs[0].count, 1000)
        XCTAssertEqual(logs[0], logs[1], "the same seed gives the same log")
        let lines = String(decoding: logs[0], as: UTF8.self).split(separator: "\n")
        let stamps = lines.compactMap { (try? JSON.parse(Array($0.utf8)))?["ts"]?.int64Value }
        XCTAssertEqual(stamps.count, lines.count)
        let epoch: Int64 = 1_767_225_600_000  // 2026-01-01T00:00:00Z, the simulation's virtual wall clock at 0
        XCTAssertTrue(stamps.allSatisfy { (epoch...(epoch + 1_460_000)).contains($0) }, "virtual timestamps: \(stamps.prefix(3))")
        XCTAssertEqual(stamps, stamps.sorted(), "in virtual-time order")
        XCTAssertEqual(lines.filter { $0.contains(#""reason":"RECONNECT_FAILED""#) }.count, 1)
    }

    func testFailedExpectation_exits1_namingTheStepAndTime() throws {
        let manifest = try manifest("echo-commands", library: "libecho-commands.so", hooks: ["room"])
        let script = directory + "/wrong.json"
        try Data(#"""
            {"steps": [
              {"at": 0, "login": {"room": "lobby"}},
              {"at": 1000, "magix": {"room": "lobby", "from": "alice", "event": "command", "payload": "!ping"}},
              {"at": 1000, "expect": {"within": 100, "action": {"op": "magix", "event": "reply", "payload": {"text": "PONG"}}}},
              {"at": 1000, "expect": {"within": 100, "action": {"op": "magix", "event": "reply", "payload": {"text": "pong"}}}}
            ]}
            """#.utf8).write(to: URL(fileURLWithPath: script))
        let (status, errors) = try simulate(manifest, script)
        XCTAssertEqual(status, 1, errors)
        XCTAssertTrue(errors.contains(#"wrong.json: step 2 (at 1000 ms): expected action {"event":"reply","op":"magix","payload":{"text":"PONG"}} within 100 ms, saw none"#), errors)
        XCTAssertFalse(errors.contains("step 3"), errors)
        XCTAssertTrue(errors.contains("1 of 2 expectation(s) failed"), errors)
    }

    func testBadScenario_exits2_namingTheFileAndField() throws {
        let manifest = try manifest("echo-commands", library: "libecho-commands.so", hooks: ["room"])
        let script = directory + "/bad.json"
        try Data(#"{"steps": [{"at": 0, "login": {"room": "lobby"}}, {"at": 5, "kick": {"room": "lobby", "code": 42}}]}"#.utf8)
            .write(to: URL(fileURLWithPath: script))
        let (status, errors) = try simulate(manifest, script)
        XCTAssertEqual(status, 2, errors)
        XCTAssertEqual(errors, "roombot: bad.json: steps[1].kick.code: must be 1002050, 1002055 or 1002056\n")
    }
}
