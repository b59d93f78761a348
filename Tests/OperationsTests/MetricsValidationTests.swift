import Foundation
import RoomKitTestSupport
import XCTest

/// Both `/metrics` endpoints pass a real validator, `promtool check metrics`
/// (Debian: `apt-get install --no-install-recommends prometheus`; skipped
/// without it), and roomd's carries build_info, process metrics and the
/// latency histograms.
final class MetricsValidationTests: XCTestCase {
    private func promtool(_ text: String, file: StaticString = #filePath, line: UInt = #line) throws {
        guard let which = runTool(["sh", "-c", "command -v promtool"]), which.status == 0 else {
            throw XCTSkip("promtool is not installed (apt-get install --no-install-recommends prometheus)")
        }
        let path = NSTemporaryDirectory() + "metrics-\(UUID().uuidString).txt"
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let check = try XCTUnwrap(runTool(["sh", "-c", "promtool check metrics < \"$0\"", path]))
        XCTAssertEqual(check.status, 0, "promtool check metrics: \(check.stdout)\(check.stderr)\n\(text)", file: file, line: line)
    }

    /// The value of the sample line starting with `prefix` (name and labels).
    private func sample(_ text: String, _ prefix: String) -> Double? {
        text.split(separator: "\n").first { $0.hasPrefix(prefix + " ") }.flatMap { Double($0.split(separator: " ").last ?? "") }
    }

    func testMetrics_ofRoomdAndRoombot_passPromtool_andRoomdHasBuildInfoProcessAndLatency() async throws {
        let roomd = RoomdProcess(secret: "metrics-secret")
        try roomd.start()
        defer { roomd.stop() }
        let directory = try temporaryDirectory("metrics")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try """
            {"server": "ws://127.0.0.1:\(roomd.port)/v1/rooms", "user": {"id": "bot-m"},
             "auth": {"secret": "metrics-secret"}, "rooms": ["lobby", "hall"], "control": "127.0.0.1:0"}
            """.write(toFile: directory + "/bot.json", atomically: true, encoding: .utf8)
        let bot = try startProduct("roombot", ["run", "--config", directory + "/bot.json"])
        defer {
            bot.signal(SIGTERM)
            _ = bot.finish()
        }
        XCTAssertTrue(bot.waitFor("control on "), bot.stderr)
        let control = try XCTUnwrap(bot.stderr.split(separator: "\n").first { $0.hasPrefix("control on ") }
            .flatMap { Int($0.dropFirst("control on ".count)) }, bot.stderr)
        // Both rooms are in: two logins, two events (the bot's own userUpdate add).
        await eventually(15, "both rooms LOGINED") { (try? JSONSerialization.jsonObject(with: Data(http(control, "GET", "/v1/rooms").1.utf8)) as? [[String: Any]])?
            .filter { $0["reason"] as? String == "LOGINED" }.count == 2 }

        let (status, text) = http(roomd.port, "GET", "/metrics")
        XCTAssertEqual(status, 200)
        try promtool(text)
        let version = try runProduct("roomd", ["--version"]).stdout
        let revision = try XCTUnwrap(version.split(separator: " ").last?.dropLast(2), version)  // "abc)\n" → "abc"
        XCTAssertEqual(sample(text, #"roomd_build_info{version="0.1.0",revision="\#(revision)"}"#), 1, text)
        XCTAssertGreaterThan(sample(text, "process_resident_memory_bytes") ?? 0, 1_000_000, text)
        XCTAssertGreaterThan(sample(text, "process_open_fds") ?? 0, 3, text)
        XCTAssertGreaterThan(sample(text, "process_cpu_seconds_total") ?? 0, 0, text)
        XCTAssertGreaterThan(sample(text, "process_start_time_seconds") ?? 0, Date().timeIntervalSince1970 - 3600, text)
        XCTAssertEqual(sample(text, #"roomd_request_duration_seconds_count{op="login"}"#), 2, text)
        XCTAssertEqual(sample(text, #"roomd_request_duration_seconds_count{op="hello"}"#), 1, "one connection for both rooms")
        let events = try XCTUnwrap(sample(text, "roomd_events_total"), text)
        XCTAssertGreaterThanOrEqual(events, 2)
        XCTAssertEqual(sample(text, "roomd_append_commit_duration_seconds_count"), events, "one commit per event")
        XCTAssertEqual(sample(text, "roomd_fanout_duration_seconds_count"), events, "one fan-out per event")
        XCTAssertEqual(sample(text, #"roomd_append_commit_duration_seconds_bucket{le="+Inf"}"#), events)

        let (botStatus, botText) = http(control, "GET", "/metrics")
        XCTAssertEqual(botStatus, 200)
        try promtool(botText)
        XCTAssertEqual(sample(botText, #"roombot_sessions{reason="LOGINED"}"#), 2, botText)
    }
}
