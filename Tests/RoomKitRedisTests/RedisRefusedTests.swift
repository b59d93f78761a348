import Foundation
import Logging
import RoomKitLoop
import RoomKitRedis
import RoomKitTestSupport
import XCTest

/// Issue #27 §5: a refused Redis connection is reported as refused, at once,
/// not as a connect timeout.
final class RedisRefusedTests: XCTestCase {
    final class Lines: @unchecked Sendable {
        // @unchecked Sendable: guarded by lock.
        private let lock = NSLock()
        private var list: [String] = []
        func add(_ line: String) { lock.withLock { list.append(line) } }
        var all: [String] { lock.withLock { list } }
    }

    struct Capture: LogHandler {
        let lines: Lines
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .trace
        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }
        func log(event: LogEvent) {
            let pairs = (event.metadata ?? [:]).sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }
            lines.add("\(event.level) \(event.message) \(pairs.joined(separator: " "))")
        }
    }

    func testRefusedConnection_isLoggedAsRefused_notAsATimeout() async throws {
        let lines = Lines()
        let loop = try EventLoop(name: "redis-refused")
        var configuration = RedisClient.Configuration()
        configuration.connectTimeout = .seconds(60)  // a timeout cannot be what the test sees
        configuration.reconnectDelay = .seconds(60)
        let endpoint = RedisEndpoint(host: "127.0.0.1", port: freePort())
        let client = try loop.runAndWait {
            let client = RedisClient(loop: loop, endpoint: endpoint, configuration: configuration,
                                     logger: Logger(label: "redis") { _ in Capture(lines: lines) })
            try client.start()
            return client
        }
        await eventually(10, "the failed connect is logged") { lines.all.contains { $0.contains("redis unavailable") } }
        let line = lines.all.first { $0.contains("redis unavailable") } ?? ""
        XCTAssertTrue(line.lowercased().contains("refused"), line)
        XCTAssertFalse(line.contains("timed out"), line)
        try loop.runAndWait { client.close() }
        try loop.shutdown()
    }
}
