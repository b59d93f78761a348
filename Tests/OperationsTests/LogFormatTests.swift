import Foundation
import RoomKitTestSupport
import XCTest

/// `--log-format json` on roomd and roombot: every stderr line is one JSON
/// object with swift-log's level, label, message and metadata.
final class LogFormatTests: XCTestCase {
    /// Parses every non-empty line of `text` as a JSON log line; fails on any other line.
    private func jsonLines(_ text: String, file: StaticString = #filePath, line: UInt = #line) -> [[String: Any]] {
        var objects: [[String: Any]] = []
        for raw in text.split(separator: "\n") where !raw.isEmpty {
            guard let object = (try? JSONSerialization.jsonObject(with: Data(raw.utf8))) as? [String: Any] else {
                XCTFail("not a JSON object: \(raw)", file: file, line: line)
                continue
            }
            XCTAssertTrue(object["level"] is String && object["label"] is String && object["message"] is String
                          && object["metadata"] is [String: Any] && object["ts"] is String,
                          "missing fields: \(raw)", file: file, line: line)
            objects.append(object)
        }
        return objects
    }

    func testRoomd_jsonLogFormat_writesOnlyJSONLinesWithLevelLabelMessageAndMetadata() throws {
        let data = try temporaryDirectory("logformat-roomd")
        defer { try? FileManager.default.removeItem(atPath: data) }
        let roomd = try startProduct("roomd", ["serve", "--listen", "127.0.0.1:0", "--data", data, "--log-format", "json",
                                               "--log-level", "debug"], environment: ["ROOMD_SECRET": "s"])
        XCTAssertTrue(roomd.waitFor("listening on"), roomd.stderr)
        roomd.signal(SIGTERM)
        let run = roomd.finish()
        XCTAssertEqual(run.status, 0, run.stderr)
        let lines = jsonLines(run.stderr)
        XCTAssertGreaterThanOrEqual(lines.count, 3, run.stderr)
        let stopping = lines.filter { $0["message"] as? String == "stopping" }
        XCTAssertEqual(stopping.count, 1, run.stderr)
        XCTAssertEqual(stopping.first?["level"] as? String, "info")
        XCTAssertEqual(stopping.first?["label"] as? String, "roomd")
        // The group names the signal (ShutdownOrderTests); "stopping" is the program's own line.
        XCTAssertTrue(lines.contains { $0["level"] as? String == "debug" }, "--log-level debug applies in json mode")
    }

    func testRoombot_jsonLogFormat_writesOnlyJSONLines() throws {
        let roomd = RoomdProcess(secret: "bot-secret")
        try roomd.start()
        defer { roomd.stop() }
        let directory = try temporaryDirectory("logformat-bot")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let config = """
            {"server": "ws://127.0.0.1:\(roomd.port)/v1/rooms", "user": {"id": "bot-1"},
             "auth": {"secret": "bot-secret"}, "rooms": ["lobby"], "control": "127.0.0.1:0"}
            """
        try config.write(toFile: directory + "/bot.json", atomically: true, encoding: .utf8)
        let bot = try startProduct("roombot", ["run", "--config", directory + "/bot.json", "--log-format", "json"])
        XCTAssertTrue(bot.waitFor("control API listening"), bot.stderr)
        bot.signal(SIGTERM)
        let run = bot.finish()
        XCTAssertEqual(run.status, 0, run.stderr)
        let lines = jsonLines(run.stderr)
        let listening = try XCTUnwrap(lines.first { $0["message"] as? String == "control API listening" }, run.stderr)
        XCTAssertEqual(listening["label"] as? String, "roombot")
        XCTAssertNotNil((listening["metadata"] as? [String: Any])?["address"], "\(listening)")
        XCTAssertEqual(lines.filter { $0["message"] as? String == "stopping" }.count, 1, run.stderr)
    }

    func testReplay_jsonLogFormat_reportsAFailureAsAJSONLine() throws {
        let roomd = RoomdProcess(secret: "s")
        try roomd.start()
        defer { roomd.stop() }
        let run = try runProduct("roombot", ["replay", "--server", "ws://127.0.0.1:\(roomd.port)/v1/rooms", "--room", "ghost",
                                             "--token", "not-a-token", "--events", "/dev/null", "--log-format", "json"])
        XCTAssertEqual(run.status, 1, run.stderr)
        let lines = jsonLines(run.stderr)
        let failure = try XCTUnwrap(lines.first { $0["message"] as? String == "replay failed" }, run.stderr)
        XCTAssertEqual(failure["level"] as? String, "error")
        XCTAssertEqual((failure["metadata"] as? [String: Any])?["room"] as? String, "ghost")
    }

    func testLogFormat_unknownValue_isAUsageErrorNamingTheFlag() throws {
        let roomd = try runProduct("roomd", ["serve", "--listen", "127.0.0.1:0", "--data", NSTemporaryDirectory() + "/lf-\(UUID())",
                                             "--log-format", "xml"], environment: ["ROOMD_SECRET": "s"])
        XCTAssertEqual(roomd.status, 2)
        XCTAssertTrue(roomd.stderr.contains("--log-format: expected text or json, got 'xml'"), roomd.stderr)
        let bot = try runProduct("roombot", ["run", "--config", "/nonexistent/bot.json", "--log-format", "xml"])
        XCTAssertEqual(bot.status, 2)
        XCTAssertTrue(bot.stderr.contains("--log-format: expected text or json, got 'xml'"), bot.stderr)
    }

    /// Metadata numbers are JSON numbers, and a closed connection is told
    /// in words, not as Swift's debug text of the close event.
    func testJSONLogs_writeCodesAsNumbers_andCloseReasonsInWords() throws {
        let data = try temporaryDirectory("logformat-numbers")
        defer { try? FileManager.default.removeItem(atPath: data) }
        let port = freePort()
        let roomd = try startProduct("roomd", ["serve", "--listen", "127.0.0.1:\(port)", "--data", data, "--log-format", "json",
                                               "--log-level", "debug"], environment: ["ROOMD_SECRET": "numbers-secret"])
        XCTAssertTrue(roomd.waitFor("listening on"), roomd.stderr)
        let control = freePort()
        try """
            {"server": "ws://127.0.0.1:\(port)/v1/rooms", "user": {"id": "bot-n"}, "auth": {"secret": "numbers-secret"},
             "rooms": ["lobby"], "control": "127.0.0.1:\(control)", "state": "\(data)/bot.sqlite"}
            """.write(toFile: data + "/bot.json", atomically: true, encoding: .utf8)
        let bot = try startProduct("roombot", ["run", "--config", data + "/bot.json", "--log-format", "json"])
        let deadline = Date().addingTimeInterval(15)
        while Date() < deadline, !http(control, "GET", "/v1/rooms").1.contains("LOGINED") { usleep(50_000) }
        roomd.signal(SIGTERM)  // closes every connection with 1001
        XCTAssertEqual(roomd.finish().status, 0)
        XCTAssertTrue(bot.waitFor("connection lost"), bot.stderr)
        bot.signal(SIGTERM)
        let botRun = bot.finish()

        let closed = try XCTUnwrap(jsonLines(roomd.stderr).first { $0["message"] as? String == "connection closed" }, roomd.stderr)
        let metadata = try XCTUnwrap(closed["metadata"] as? [String: Any])
        XCTAssertEqual(metadata["code"] as? Int, 1001, "a number, not a string: \(metadata)")
        XCTAssertEqual(metadata["how"] as? String, "closed", "\(metadata)")
        let lost = try XCTUnwrap(jsonLines(botRun.stderr).first { $0["message"] as? String == "connection lost" }, botRun.stderr)
        let why = try XCTUnwrap((lost["metadata"] as? [String: Any])?["why"] as? String)
        XCTAssertEqual(why, "closed by the peer with 1001 (server shutting down)")
    }
}
