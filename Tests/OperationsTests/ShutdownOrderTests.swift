import Foundation
import RoomKitTestSupport
import XCTest

/// roomd, roombot and the example each run their parts in one
/// `ServiceGroup`: SIGTERM goes through the group's graceful shutdown, which
/// stops the parts in reverse. The order is read from the logs: the group
/// names each service as it finishes (debug, metadata `service`).
final class ShutdownOrderTests: XCTestCase {
    /// The JSON log lines of `text` (other lines skipped).
    private func jsonLines(_ text: String) -> [[String: Any]] {
        text.split(separator: "\n").compactMap { (try? JSONSerialization.jsonObject(with: Data($0.utf8))) as? [String: Any] }
    }

    /// The services in the order the group reported them finished.
    private func finished(_ lines: [[String: Any]]) -> [String] {
        lines.filter { $0["message"] as? String == "Service finished" }
            .compactMap { ($0["metadata"] as? [String: Any])?["service"] as? String }
    }

    func testRoomd_SIGTERM_stopsTheServerThenTheLoop_andExits0() throws {
        let data = try temporaryDirectory("shutdown-roomd")
        defer { try? FileManager.default.removeItem(atPath: data) }
        let roomd = try startProduct("roomd", ["serve", "--listen", "127.0.0.1:0", "--data", data, "--log-format", "json",
                                               "--log-level", "debug"], environment: ["ROOMD_SECRET": "s"])
        XCTAssertTrue(roomd.waitFor("listening on"), roomd.stderr)
        roomd.signal(SIGTERM)
        let run = roomd.finish()
        XCTAssertEqual(run.status, 0, run.stderr)
        let lines = jsonLines(run.stderr)
        XCTAssertEqual(finished(lines), ["announcer", "server", "loop"], run.stderr)
        let caught = lines.first { $0["message"] as? String == "Signal caught. Shutting down the group." }
        XCTAssertEqual((caught?["metadata"] as? [String: Any])?["signal"] as? String, "SIGTERM", run.stderr)
        let stopping = try XCTUnwrap(lines.firstIndex { $0["message"] as? String == "stopping" }, run.stderr)
        let server = try XCTUnwrap(lines.firstIndex { $0["message"] as? String == "Service finished" }, run.stderr)
        XCTAssertLessThan(stopping, server, "'stopping' is logged before anything stops")
    }

    func testRoombot_SIGTERM_logsOutOfEveryRoom_thenUnloadsPlugins_thenClosesTheLoop() throws {
        let roomd = RoomdProcess(secret: "order-secret")
        try roomd.start()
        defer { roomd.stop() }
        let directory = try temporaryDirectory("shutdown-bot")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let manifest = """
            {"manifestVersion": 1, "plugins": [{"name": "error-log", "library": "\(try builtProduct("liberror-log.so"))",
              "abi": 1, "hooks": ["throwError"], "config": {"file": "\(directory)/errors.ndjson"}}]}
            """
        try manifest.write(toFile: directory + "/plugins.json", atomically: true, encoding: .utf8)
        let config = """
            {"server": "ws://127.0.0.1:\(roomd.port)/v1/rooms", "user": {"id": "bot-1"},
             "auth": {"secret": "order-secret"}, "rooms": ["lobby", "hall"], "control": "127.0.0.1:0",
             "manifest": "\(directory)/plugins.json", "events": "\(directory)/events.ndjson"}
            """
        try config.write(toFile: directory + "/bot.json", atomically: true, encoding: .utf8)
        let bot = try startProduct("roombot", ["run", "--config", directory + "/bot.json", "--log-format", "json",
                                               "--log-level", "debug"])
        let events = directory + "/events.ndjson"
        let deadline = Date().addingTimeInterval(20)
        while Date() < deadline && (fileText(events) ?? "").components(separatedBy: #""reason":"LOGINED""#).count < 3 {
            usleep(50_000)
        }
        XCTAssertEqual((fileText(events) ?? "").components(separatedBy: #""reason":"LOGINED""#).count, 3, fileText(events) ?? "")
        bot.signal(SIGTERM)
        let run = bot.finish()
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertEqual(finished(jsonLines(run.stderr)),
                       ["announcer", "logins", "host", "plugins", "control API", "event log", "loop", "store"], run.stderr)
        // From the event log: both rooms reached LOGOUT, then the plugin unloaded, and nothing came after it.
        let log = (fileText(events) ?? "").split(separator: "\n").map(String.init)
        let logouts = log.indices.filter { log[$0].contains(#""reason":"LOGOUT""#) }
        let unloaded = try XCTUnwrap(log.firstIndex { $0.contains(#""event":"plugin""#) && $0.contains("unloaded") },
                                     log.joined(separator: "\n"))
        XCTAssertEqual(logouts.count, 2, log.joined(separator: "\n"))
        XCTAssertTrue(logouts.allSatisfy { $0 < unloaded }, log.joined(separator: "\n"))
        XCTAssertEqual(unloaded, log.count - 1, "the plugin unloads after the last event:\n" + log.joined(separator: "\n"))
    }

    func testExample_SIGTERM_inForeverMode_stopsTheTourCrowdHostsPluginsLoopThenServers() throws {
        let example = try startProduct("multiroom-bot", ["--quick", "--forever", "--plain", "--log-level", "debug"])
        XCTAssertTrue(example.waitFor("── --forever", timeout: 90), example.stdout)
        example.signal(SIGTERM)
        let run = example.finish(timeout: 60)
        XCTAssertEqual(run.status, 0, run.stdout + run.stderr)
        let output = run.stdout + run.stderr
        let order = output.split(separator: "\n").compactMap { line -> String? in
            guard line.contains("Service finished"), let range = line.range(of: "service=") else { return nil }
            return String(line[range.upperBound...].prefix { $0 != " " })
        }
        XCTAssertEqual(order, ["tour", "crowd", "canary", "bot", "plugins", "loop", "roomd-canary", "roomd", "work-directory"], output)
        let lines = output.split(separator: "\n").map(String.init)
        let logout = try XCTUnwrap(lines.firstIndex { $0.contains("── stopping: logoutRoom() of every room") }, output)
        let unloaded = try XCTUnwrap(lines.firstIndex { $0.contains("plugin") && $0.contains("unloaded") }, output)
        XCTAssertLessThan(logout, unloaded, output)
    }
}
