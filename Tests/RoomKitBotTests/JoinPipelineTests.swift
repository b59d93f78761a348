import Foundation
import Logging
import RoomKit
import RoomKitBot
import RoomKitLoop
import RoomKitProtocol
@testable import RoomKitServer
import RoomKitTestSupport
import XCTest

/// roombot's first logins at scale, CI-sized (issue #26): thousands of rooms
/// against a roomd whose request bucket is shrunk, so the logins must wait
/// their turn as 300,000 do on a default roomd. No speed is asserted: only
/// what happens (attempts, reconnects, log lines, counts).
final class JoinPipelineTests: XCTestCase {
    /// roomd admits `perSecond` requests a second on the bot's connection, `burst` at once.
    private func harness(perSecond: Double, burst: Double) throws -> BotHarness {
        try BotHarness { configuration in
            configuration.rateLimitPerSecond = perSecond
            configuration.rateLimitBurst = burst
        }
    }

    private func config(_ harness: BotHarness, rooms: Int, server: String? = nil, extra: [String: JSON]) throws -> String {
        guard case .object(var fields) = harness.standardConfig(rooms: (0..<rooms).map { "room-\($0)" }, control: nil) else {
            throw XCTSkip("standardConfig is an object")
        }
        if let server { fields["server"] = .string(server) }
        for (key, value) in extra { fields[key] = value }
        return try harness.writeConfig(.object(fields))
    }

    /// roomStateChanged lines of the event log with `reason`.
    private func count(_ reason: String, in harness: BotHarness) -> Int {
        let text = (try? String(contentsOfFile: harness.directory + "/events.ndjson", encoding: .utf8)) ?? ""
        return text.components(separatedBy: "\"reason\":\"\(reason)\"").count - 1
    }

    func testManyRoomsOnASlowBucket_eachRoomLogsInOnce_andTheProgressCountsRooms() async throws {
        // 3,000 logins at 570/s take 5 s, over twice the login timeout: one
        // task per room queued them all at once, and the last ones timed out.
        let harness = try harness(perSecond: 600, burst: 60)
        let rooms = 3000
        let path = try config(harness, rooms: rooms, extra: ["loginTimeout": 2])
        let runner = try BotRunner(config: try BotConfig(path: path), logger: Logger(label: "t"))
        try await runner.start()
        XCTAssertEqual(runner.joinProgress.withLock { $0 }, {
            var done = JoinProgress()
            done.total = rooms
            done.joined = rooms
            return done
        }())
        XCTAssertEqual(count("LOGINING", in: harness), rooms, "one attempt per room")
        XCTAssertEqual(count("LOGIN_FAILED", in: harness), 0)
        let server = harness.server
        XCTAssertEqual(try harness.serverLoop.runAndWait { server.metrics.requestsOverLimit }, 0)
        await runner.stop()
        try harness.close()
    }

    func testALostConnectionMidway_costsOneReconnect_andNoLoginIsTriedTwice() async throws {
        let harness = try harness(perSecond: 600, burst: 60)
        let rooms = 4000
        let path = try config(harness, rooms: rooms, extra: ["loginTimeout": 5])
        let logs = CapturedLogs()
        let runner = try BotRunner(config: try BotConfig(path: path), logger: logs.logger(level: .info))
        let joining = runner.startJoining()
        await eventually(30, "a quarter of the rooms in") { runner.joinProgress.withLock { $0.joined } >= rooms / 4 }
        runner.host.simulateConnectionLoss()
        await joining.value
        XCTAssertEqual(runner.joinProgress.withLock { $0.joined }, rooms)
        XCTAssertEqual(logs.lines(containing: "connection lost").count, 1, logs.text)
        XCTAssertEqual(count("LOGINING", in: harness), rooms, "the logins cut off were sent again, not retried")
        XCTAssertEqual(count("LOGIN_FAILED", in: harness), 0)
        await runner.stop()
        try harness.close()
    }

    func testWhenTheServerIsDown_failuresAreLoggedOncePerCausePerInterval_withCounts() async throws {
        let harness = try harness(perSecond: 200, burst: 200)
        let down = "ws://127.0.0.1:\(RoomdProcess.freePort())/v1/rooms"
        let path = try config(harness, rooms: 500, server: down,
                              extra: ["loginTimeout": 0.3, "logInterval": 1, "reconnectWindow": 60])
        let logs = CapturedLogs()
        let runner = try BotRunner(config: try BotConfig(path: path), logger: logs.logger(level: .warning))
        runner.startJoining()
        try await Task.sleep(for: .milliseconds(3500))
        await runner.stop()
        let failed = count("LOGIN_FAILED", in: harness)
        XCTAssertGreaterThan(failed, 100, "logins kept failing: \(failed)")
        let lines = logs.lines(containing: "logins failed")
        // One line per interval (3 in 3.5 s) and the last flush at the stop.
        XCTAssertGreaterThan(lines.count, 0, logs.text)
        XCTAssertLessThanOrEqual(lines.count, 5, logs.text)
        let counted = lines.compactMap { $0.metadata["rooms"].flatMap { Int("\($0)") } }
        XCTAssertEqual(counted.count, lines.count, "every line says how many rooms: \(logs.text)")
        XCTAssertTrue(counted.contains { $0 > 1 }, "aggregated: \(counted)")
        XCTAssertLessThanOrEqual(counted.reduce(0, +), failed)
        XCTAssertTrue(lines.allSatisfy { $0.metadata["example"] != nil && $0.metadata["error"] != nil }, logs.text)
        try harness.close()
    }
}

/// Every log line a `Logger` made with `logger(level:)` wrote.
final class CapturedLogs: Sendable {
    struct Line: Sendable {
        let level: Logger.Level
        let message: String
        let metadata: Logger.Metadata
    }

    private let captured = LockedValue<[Line]>([])

    func logger(level: Logger.Level) -> Logger {
        var logger = Logger(label: "captured") { _ in Handler(sink: self) }
        logger.logLevel = level
        return logger
    }

    func add(_ line: Line) { captured.withLock { $0.append(line) } }

    func lines(containing text: String) -> [Line] { captured.withLock { $0 }.filter { $0.message.contains(text) } }

    var text: String { captured.withLock { $0 }.map { "\($0.level) \($0.message) \($0.metadata)" }.joined(separator: "\n") }

    private struct Handler: LogHandler {
        let sink: CapturedLogs
        var metadata: Logger.Metadata = [:]
        var metadataProvider: Logger.MetadataProvider?
        var logLevel: Logger.Level = .trace

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }

        func log(event: LogEvent) {
            sink.add(Line(level: event.level, message: "\(event.message)", metadata: metadata.merging(event.metadata ?? [:]) { $1 }))
        }
    }
}
