import Foundation
import Logging
import RoomKit
import RoomKitLoop
import RoomKitProtocol
import RoomKitTestSupport
import XCTest

/// Keeps every log line a logger writes ("level message key=value ..."), for
/// tests that check what an operator is told.
final class CapturedLog: @unchecked Sendable {
    // @unchecked Sendable: guarded by lock.
    private let lock = NSLock()
    private var captured: [(level: Logger.Level, message: String, metadata: [String: String])] = []

    var lines: [(level: Logger.Level, message: String, metadata: [String: String])] { lock.withLock { captured } }

    func logger(_ label: String = "test.captured", level: Logger.Level = .trace) -> Logger {
        var logger = Logger(label: label) { _ in Handler(log: self) }
        logger.logLevel = level
        return logger
    }

    func matching(_ message: String) -> [(level: Logger.Level, message: String, metadata: [String: String])] {
        lines.filter { $0.message.contains(message) }
    }

    fileprivate func add(_ level: Logger.Level, _ message: String, _ metadata: [String: String]) {
        lock.withLock { captured.append((level, message, metadata)) }
    }

    private struct Handler: LogHandler {
        let log: CapturedLog
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .trace
        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }
        func log(event: LogEvent) {
            let merged = metadata.merging(event.metadata ?? [:]) { _, new in new }
            log.add(event.level, "\(event.message)", merged.mapValues { "\($0)" })
        }
    }
}

/// Issue #27 §5: the first failures an operator meets are logged, naming
/// the URL and the cause, once per backoff step rather than per retry.
final class ConnectionReportTests: XCTestCase {
    private func host(_ harness: EngineHarness, url: String, log: CapturedLog,
                      configure: (inout RoomHostConfiguration) -> Void = { _ in }) throws -> RoomHost {
        var configuration = RoomHostConfiguration(serverURL: url)
        configuration.loginTimeout = .seconds(20)
        configure(&configuration)
        return try RoomHost(loop: try harness.fixture.clientLoop, configuration: configuration, logger: log.logger())
    }

    func testBackoff_reportsTheFirstFailure_eachNewStep_thenPowersOfTwoOnly() {
        let backoff = ConnectionMachine.Backoff(first: 1000, cap: 30_000)
        let reported = (0..<200).filter { backoff.reportsFailure(ofAttempt: $0) }
        // Ceilings 1, 2, 4, 8, 16, 30 s (attempts 0-5), then only 2^k.
        XCTAssertEqual(reported, [0, 1, 2, 3, 4, 5, 8, 16, 32, 64, 128])
    }

    /// The connection's backoff stops doubling at `connectionBackoffCap`
    /// (here below the rooms' `backoffCap`): it carries every room, and a
    /// server back from a restart must not wait out a long ceiling.
    func testRefusedServer_isLoggedAtWarningNamingTheURL_onTheFirstAttempt_thenOncePerBackoffStep() async throws {
        let harness = try EngineHarness()
        let port = freePort()  // nothing listens: every attempt is refused
        let url = "ws://127.0.0.1:\(port)/v1/rooms"
        let log = CapturedLog()
        let host = try host(harness, url: url, log: log) {
            $0.backoffFirst = .milliseconds(10)
            $0.backoffCap = .seconds(30)
            $0.connectionBackoffCap = .milliseconds(40)
        }
        XCTAssertEqual(RoomHostConfiguration(serverURL: url).connectionBackoffCap, .seconds(4))
        let token = harness.token("a")
        let login = Task { try await host.loginRoom("lobby", user: LoginUser(id: "a"), token: token) }
        await eventually(30, "a report of attempt 17") {
            log.matching("cannot connect").contains { $0.metadata["attempt"] == "17" }
        }
        let reports = log.matching("cannot connect")
        XCTAssertTrue(reports.allSatisfy { $0.level == .warning })
        XCTAssertTrue(reports.allSatisfy { $0.metadata["url"] == url }, "\(reports)")
        // Ceilings 10, 20, 40 ms (attempts 1-3), then the 5th, 9th, 17th: 6 lines for 17 failures.
        XCTAssertEqual(reports.prefix(6).map { $0.metadata["attempt"] }, ["1", "2", "3", "5", "9", "17"])
        XCTAssertEqual(reports.compactMap { $0.metadata["backoffCeilingMs"].flatMap { Int($0) } }.max(), 40)
        login.cancel()
        await host.shutdown()
        _ = await login.result
        try await harness.close()
    }

    func testWrongPath_isLoggedWithTheURLAndTheHTTPStatus() async throws {
        let harness = try EngineHarness()
        let url = "ws://127.0.0.1:\(harness.server.port)/not/the/endpoint"
        let log = CapturedLog()
        let host = try host(harness, url: url, log: log) { $0.backoffFirst = .milliseconds(50) }
        let token = harness.token("a")
        let login = Task { try await host.loginRoom("lobby", user: LoginUser(id: "a"), token: token) }
        await eventually(20, "a report") { !log.matching("cannot connect").isEmpty }
        let report = log.matching("cannot connect").first
        XCTAssertEqual(report?.metadata["url"], url)
        let error = report?.metadata["error"] ?? ""
        XCTAssertTrue(error.contains("/not/the/endpoint with HTTP 4"), error)
        XCTAssertTrue(error.contains("not 101"), error)
        login.cancel()
        await host.shutdown()
        _ = await login.result
        try await harness.close()
    }

    func testRefusedServiceToken_failsTheLoginWith1002033AndRoomdsReason_atOnce() async throws {
        let harness = try EngineHarness()
        let writer = harness.token("bot", role: .writer)
        let log = CapturedLog()
        let events = EventRecorder()
        let host = try host(harness, url: "ws://127.0.0.1:\(harness.server.port)/v1/rooms", log: log) {
            $0.serviceToken = writer  // not role service: roomd refuses it in hello
            $0.loginTimeout = .seconds(60)
        }
        host.addObserver { events.record($0) }
        do {
            _ = try await host.loginRoom("lobby", user: LoginUser(id: "bot"), token: writer)
            XCTFail("the login succeeded")
        } catch let error as RoomError {
            XCTAssertEqual(error.code, .tokenInvalid, "\(error)")
            XCTAssertTrue(error.message.contains("service token"), error.message)
            XCTAssertTrue(error.message.contains("role service"), "roomd's reason: \(error.message)")
        }
        XCTAssertEqual(events.reasons("lobby"), ["LOGINING 0", "LOGIN_FAILED 1002033"])
        let refusal = log.matching("refused the service token")
        XCTAssertEqual(refusal.first?.level, .error)
        XCTAssertTrue(refusal.first?.metadata["reason"]?.contains("role service") ?? false, "\(refusal)")
        await host.shutdown()
        try await harness.close()
    }
}
