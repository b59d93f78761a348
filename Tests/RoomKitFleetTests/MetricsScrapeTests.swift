import Foundation
import RoomKitTestSupport
import XCTest

/// roombot's and roomd's `/metrics` scraped from real processes: every
/// family is one docs/CLI.md lists, and the new families move when what
/// they count happens (logins, plugin calls, a roomd kill and restart, a
/// Redis outage).
final class MetricsScrapeTests: XCTestCase {
    func testFleetBotAndRoomd_exposeOnlyDocumentedFamilies_andTheNewOnesMove() throws {
        let harness = try FleetHarness(hosts: 1, rooms: 3, ttl: 2, probe: true)
        defer { harness.close() }
        try harness.startAll()
        let held = harness.waitExactlyOnce(timeout: 60)
        XCTAssertNotNil(held.seconds, harness.problems(held.last) + harness.hosts[0].log)
        let bot = harness.hosts[0]
        let documented = try documentedMetricFamilies()

        // A process plugin's call counts when its child reports it done
        // (DONE), which may come after the rooms show as held.
        var botText = scrape(bot.controlPort)
        eventually(20, "the probe's three calls are done") {
            botText = scrape(bot.controlPort)
            return (value(botText, "roomkit_plugin_dispatch_seconds_count", ["plugin": "probe"]) ?? 0) >= 3
        }
        XCTAssertEqual(Set(families(botText)).subtracting(documented), [], "undocumented roombot families")
        for family in ["roombot_build_info", "process_resident_memory_bytes", "roomkit_connection_up", "roomkit_login_seconds",
                       "roomkit_plugin_call_seconds", "roomkit_plugin_dispatch_seconds", "roombot_plugin_queue_depth",
                       "roombot_fleet_redis_up", "roombot_fleet_live_hosts", "roombot_fleet_unhomed_rooms"] {
            XCTAssertTrue(families(botText).contains(family), "roombot lacks \(family)")
        }
        XCTAssertEqual(value(botText, "roomkit_connection_up"), 1, botText)
        XCTAssertEqual(value(botText, "roomkit_login_seconds_count"), 3, botText)
        XCTAssertEqual(value(botText, "roombot_fleet_live_hosts"), 1, botText)
        XCTAssertEqual(value(botText, "roombot_fleet_redis_up"), 1, botText)
        XCTAssertEqual(value(botText, "roombot_fleet_unhomed_rooms"), 0, botText)
        XCTAssertGreaterThanOrEqual(value(botText, "roomkit_plugin_dispatch_seconds_count", ["plugin": "probe"]) ?? 0, 3, botText)
        XCTAssertGreaterThanOrEqual(value(botText, "roomkit_plugin_call_seconds_count",
                                          ["plugin": "probe", "hook": "on_room_event"]) ?? 0, 3, botText)
        XCTAssertEqual(value(botText, "roombot_build_info"), 1, botText)

        let roomdText = scrape(harness.roomd.port)
        XCTAssertEqual(Set(families(roomdText)).subtracting(documented), [], "undocumented roomd families")
        let messages = try XCTUnwrap(value(roomdText, "roomd_messages_in_total"), roomdText)
        XCTAssertGreaterThanOrEqual(messages, 4, "a hello and three logins at least")
        XCTAssertGreaterThan(value(roomdText, "roomd_bytes_in_total") ?? 0, messages * 10, roomdText)

        // roomd dies: the bot's connection is down, every room counts a reconnect.
        harness.roomd.kill9()
        eventually(20, "the bot sees roomd gone") {
            botText = self.scrape(bot.controlPort)
            return self.value(botText, "roomkit_connection_up") == 0 && self.sum(botText, "roomkit_reconnects_total") >= 3
        }
        XCTAssertGreaterThanOrEqual(sum(botText, "roomkit_connection_losses_total"), 1, botText)
        // roomd is back with its data: the sessions resume, roomd counts how.
        try harness.roomd.start()
        eventually(30, "the rooms resume") {
            botText = self.scrape(bot.controlPort)
            return self.value(botText, "roomkit_resume_seconds_count") == 3 && self.value(botText, "roomkit_connection_up") == 1
        }
        let again = scrape(harness.roomd.port)
        XCTAssertEqual(sum(again, "roomd_recoveries_total"), 3, again)
        XCTAssertEqual(value(again, "roomd_recoveries_total", ["outcome": "expired"]), 0, again)

        // Redis goes away: the next claim round says so.
        harness.redis.kill9()
        eventually(20, "redis down on /metrics") { self.value(self.scrape(bot.controlPort), "roombot_fleet_redis_up") == 0 }
    }

    /// A fleet on a Redis that requires AUTH, as an ACL user whose password
    /// comes from `fleet.passwordFile`: the host holds its rooms, and the
    /// password is in no log line.
    func testFleetOnRedisWithAnACLUser_passwordFromAFile_holdsItsRooms() throws {
        let harness = try FleetHarness(hosts: 1, rooms: 2, ttl: 2,
                                       redisArguments: ["--user", "fleet", "on", ">fleet-pass-0123", "~*", "&*", "+@all",
                                                        "--user", "default", "off"],
                                       redisUser: "fleet", redisPassword: "fleet-pass-0123")
        defer { harness.close() }
        try harness.startAll()
        let held = harness.waitExactlyOnce(timeout: 60)
        XCTAssertNotNil(held.seconds, harness.problems(held.last) + harness.hosts[0].log)
        XCTAssertEqual(value(scrape(harness.hosts[0].controlPort), "roombot_fleet_redis_up"), 1)
        XCTAssertFalse(harness.hosts[0].log.contains("fleet-pass-0123"), harness.hosts[0].log)
    }

    /// A failed login (a bot with the wrong secret): roomd counts the error
    /// by code, the bot its login failure by the same code.
    func testWrongSecret_countsTheErrorOnRoomd_andTheLoginFailureOnTheBot_byCode() throws {
        let roomd = RoomdProcess(secret: "right-secret-0123456789")
        try roomd.start()
        defer { roomd.kill9() }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("scrape-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let control = freePort()
        try """
            {"server": "ws://127.0.0.1:\(roomd.port)/v1/rooms", "user": {"id": "bot-w"}, "auth": {"secret": "wrong-secret-0123456789"},
             "rooms": ["lobby"], "control": "127.0.0.1:\(control)", "state": "\(directory)/state.sqlite", "events": "\(directory)/events.ndjson"}
            """.write(toFile: directory + "/bot.json", atomically: true, encoding: .utf8)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: try builtProduct("roombot"))
        process.arguments = ["run", "--config", directory + "/bot.json"]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        defer { process.terminate(); process.waitUntilExit() }
        var botText = ""
        eventually(20, "the login failure on the bot's /metrics") {
            botText = self.scrape(control)
            return (self.value(botText, "roomkit_login_failures_total", ["code": "1002033"]) ?? 0) >= 1
        }
        let roomdText = scrape(roomd.port)
        XCTAssertGreaterThanOrEqual(value(roomdText, "roomd_errors_total", ["code": "1002033"]) ?? 0, 1, roomdText)
    }

    // MARK: Exposition text

    private func scrape(_ port: Int) -> String { http(port, "GET", "/metrics").1 }

    private func eventually(_ seconds: TimeInterval, _ what: String, file: StaticString = #filePath, line: UInt = #line,
                            _ condition: () -> Bool) {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if condition() { return }
            usleep(100_000)
        }
        XCTFail("timed out waiting for: \(what)", file: file, line: line)
    }

    /// The families of `# TYPE` lines.
    private func families(_ text: String) -> [String] {
        text.split(separator: "\n").compactMap { line -> String? in
            guard line.hasPrefix("# TYPE ") else { return nil }
            return line.split(separator: " ").dropFirst(2).first.map(String.init)
        }
    }

    /// The samples of `name`: their labels and values.
    private func samples(_ text: String, _ name: String) -> [(labels: [String: String], value: Double)] {
        text.split(separator: "\n").compactMap { line -> ([String: String], Double)? in
            guard !line.hasPrefix("#"), let space = line.lastIndex(of: " "), let number = Double(line[line.index(after: space)...])
            else { return nil }
            let series = line[..<space]
            let base = series.split(separator: "{", maxSplits: 1).first.map(String.init) ?? ""
            guard base == name else { return nil }
            var labels: [String: String] = [:]
            if let open = series.firstIndex(of: "{"), let close = series.lastIndex(of: "}") {
                for pair in series[series.index(after: open)..<close].split(separator: ",") {
                    let parts = pair.split(separator: "=", maxSplits: 1)
                    if parts.count == 2 { labels[String(parts[0])] = String(parts[1].dropFirst().dropLast()) }
                }
            }
            return (labels, number)
        }
    }

    /// The value of the one sample of `name` whose labels include `labels` (nil: none; the sum when several).
    private func value(_ text: String, _ name: String, _ labels: [String: String] = [:]) -> Double? {
        let matching = samples(text, name).filter { sample in labels.allSatisfy { sample.labels[$0.key] == $0.value } }
        return matching.isEmpty ? nil : matching.map(\.value).reduce(0, +)
    }

    private func sum(_ text: String, _ name: String) -> Double { value(text, name) ?? 0 }
}

/// Every family name docs/CLI.md's "Metrics" section lists (in backticks;
/// `process_*` stands for the six process metrics).
func documentedMetricFamilies() throws -> Set<String> {
    let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    let cli = try String(contentsOf: root.appendingPathComponent("docs/CLI.md"), encoding: .utf8)
    guard let start = cli.range(of: "\n## Metrics\n") else { throw XCTSkip("docs/CLI.md has no Metrics section") }
    let section = cli[start.upperBound...].components(separatedBy: "\n## ").first ?? ""
    let pattern = try NSRegularExpression(pattern: #"`((?:roomd|roombot|roomkit|process)_[a-z0-9_]+)"#)
    let range = NSRange(section.startIndex..., in: section)
    return Set(pattern.matches(in: section, range: range).compactMap { match -> String? in
        Range(match.range(at: 1), in: section).map { String(section[$0]) }
    })
}
