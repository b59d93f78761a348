import Foundation
import Logging
import RoomKitLoop
import RoomKitRedis
import RoomKitTestSupport
import XCTest

/// RedisClient against a real redis-server on a free loopback port.
final class RedisClientTests: XCTestCase {
    private var redis: RedisProcess!
    private var loop: EventLoop!
    private var client: RedisClient!

    override func setUpWithError() throws {
        redis = RedisProcess()
        try redis.start()
        loop = try EventLoop(name: "redis-test")
        var configuration = RedisClient.Configuration()
        configuration.commandTimeout = .milliseconds(500)
        configuration.reconnectDelay = .milliseconds(50)
        let endpoint = RedisEndpoint(url: redis.url)!
        client = try loop.runAndWait { [loop] in
            let client = RedisClient(loop: loop!, endpoint: endpoint, configuration: configuration,
                                     logger: Logger(label: "redis-test"))
            try client.start()
            return client
        }
        try waitConnected()
    }

    override func tearDownWithError() throws {
        try loop.shutdown()  // throws when a handle (the adapter's poll) leaked
        loop = nil
        client = nil
        redis.kill9()
        redis = nil
    }

    private func waitConnected(_ timeout: TimeInterval = 5) throws {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if try loop.runAndWait({ [client] in client!.isConnected }) { return }
            usleep(10_000)
        }
        XCTFail("not connected to \(redis.url)")
    }

    private func run(_ arguments: [String]) throws -> Result<RedisValue, RedisError> {
        let result = LockedValue<Result<RedisValue, RedisError>?>(nil)
        let done = DispatchSemaphore(value: 0)
        _ = loop.execute { [client] in
            client!.command(arguments) { value in
                result.withLock { $0 = value }
                done.signal()
            }
        }
        XCTAssertEqual(done.wait(timeout: .now() + 5), .success)
        return try XCTUnwrap(result.withLock { $0 })
    }

    private func evaluate(_ script: RedisScript, keys: [String], arguments: [String]) throws -> Result<RedisValue, RedisError> {
        let result = LockedValue<Result<RedisValue, RedisError>?>(nil)
        let done = DispatchSemaphore(value: 0)
        _ = loop.execute { [client] in
            client!.evaluate(script, keys: keys, arguments: arguments) { value in
                result.withLock { $0 = value }
                done.signal()
            }
        }
        XCTAssertEqual(done.wait(timeout: .now() + 5), .success)
        return try XCTUnwrap(result.withLock { $0 })
    }

    func testCommand_repliesOfEveryType() throws {
        XCTAssertEqual(try run(["SET", "k", "v a l"]).get(), .status("OK"))
        XCTAssertEqual(try run(["GET", "k"]).get().string, "v a l")
        XCTAssertEqual(try run(["INCR", "n"]).get(), .integer(1))
        XCTAssertEqual(try run(["GET", "missing"]).get(), .null)
        XCTAssertEqual(try run(["RPUSH", "l", "a", "b"]).get(), .integer(2))
        XCTAssertEqual(try run(["LRANGE", "l", "0", "-1"]).get().array.compactMap(\.string), ["a", "b"])
        guard case .error(let text) = try run(["INCR", "k"]).get() else { return XCTFail("expected an error reply") }
        XCTAssertTrue(text.hasPrefix("ERR"), text)
    }

    func testEvaluate_afterScriptFlush_reloadsOnNoscript() throws {
        let script = RedisScript(name: "incrby", source: "return redis.call('INCRBY', KEYS[1], ARGV[1])")
        XCTAssertEqual(try evaluate(script, keys: ["c"], arguments: ["5"]).get(), .integer(5))
        XCTAssertEqual(try run(["SCRIPT", "FLUSH"]).get(), .status("OK"))
        XCTAssertEqual(try evaluate(script, keys: ["c"], arguments: ["2"]).get(), .integer(7))
        XCTAssertEqual(try run(["GET", "c"]).get().integer, 7)
    }

    func testCommand_whenServerPaused_timesOutAndReconnectsAfterContinue() throws {
        let pid = try XCTUnwrap(redis.pid)
        kill(pid, SIGSTOP)
        defer { kill(pid, SIGCONT) }
        let started = Date()
        guard case .failure(let error) = try run(["PING"]) else { return XCTFail("a paused server answered") }
        XCTAssertEqual(error.code, .timedOut)
        XCTAssertGreaterThanOrEqual(Date().timeIntervalSince(started), 0.4)
        kill(pid, SIGCONT)
        try waitConnected()
        XCTAssertEqual(try run(["PING"]).get(), .status("PONG"))
    }

    func testClient_whenServerKilledAndRestarted_reconnects() throws {
        XCTAssertEqual(try run(["SET", "k", "1"]).get(), .status("OK"))
        redis.kill9()
        let deadline = Date().addingTimeInterval(5)
        while Date() < deadline, (try? loop.runAndWait { [client] in client!.isConnected }) == true { usleep(10_000) }
        guard case .failure(let error) = try run(["PING"]) else { return XCTFail("a dead server answered") }
        XCTAssertEqual(error.code, .disconnected)
        try redis.start()
        try waitConnected()
        XCTAssertEqual(try run(["GET", "k"]).get(), .null, "no persistence: the restarted server is empty")
    }

    func testClient_whenServerKilled_tellsOnDisconnectOnce_andOnConnectWhenItIsBack() throws {
        let events = LockedValue<[String]>([])
        try loop.runAndWait { [client] in
            client!.onDisconnect = { error in events.withLock { $0.append(error.code == .disconnected ? "lost" : "lost: \(error)") } }
            client!.onConnect = { events.withLock { $0.append("connected") } }
        }
        redis.kill9()
        let deadline = Date().addingTimeInterval(5)
        while Date() < deadline, events.withLock({ $0.isEmpty }) { usleep(10_000) }
        XCTAssertEqual(events.withLock { $0 }, ["lost"])
        usleep(300_000)  // some reconnect attempts fail meanwhile: none of them is a lost connection
        XCTAssertEqual(events.withLock { $0 }, ["lost"])
        try redis.start()
        try waitConnected()
        XCTAssertEqual(events.withLock { $0 }, ["lost", "connected"])
        try loop.runAndWait { [client] in client!.close() }
        XCTAssertEqual(events.withLock { $0 }, ["lost", "connected"], "close() is not a lost connection")
        XCTAssertFalse(try loop.runAndWait { [client] in client!.isConnected })
    }
}

/// AUTH against a real redis-server that requires it: `requirepass` (the
/// `default` user) and a Redis 6 ACL user, from the URL; a wrong password
/// is refused with an error naming the server and user, never the password.
final class RedisAuthTests: XCTestCase {
    private func connect(_ url: String, expectConnected: Bool, logger: Logger = Logger(label: "redis-auth"),
                         configure: (inout RedisClient.Configuration) -> Void = { _ in }) throws -> (connected: Bool, reply: RedisValue?) {
        let loop = try EventLoop(name: "redis-auth")
        defer { try? loop.shutdown() }
        var configuration = RedisClient.Configuration()
        configuration.reconnectDelay = .milliseconds(50)
        configure(&configuration)
        let endpoint = try XCTUnwrap(RedisEndpoint(url: url))
        let client = try loop.runAndWait {
            let client = RedisClient(loop: loop, endpoint: endpoint, configuration: configuration, logger: logger)
            try client.start()
            return client
        }
        // Closed before the loop shuts down (the defers run in reverse order).
        defer { try? loop.runAndWait { client.close() } }
        let deadline = Date().addingTimeInterval(expectConnected ? 5 : 1)
        var connected = false
        while Date() < deadline, !connected {
            connected = try loop.runAndWait { client.isConnected }
            if !connected { usleep(10_000) }
        }
        guard connected else { return (false, nil) }
        let reply = LockedValue<RedisValue?>(nil)
        let done = DispatchSemaphore(value: 0)
        _ = loop.execute {
            client.command(["SET", "auth-key", "v"]) { _ in
                client.command(["GET", "auth-key"]) { result in
                    reply.withLock { $0 = try? result.get() }
                    done.signal()
                }
            }
        }
        XCTAssertEqual(done.wait(timeout: .now() + 5), .success)
        return (true, reply.withLock { $0 })
    }

    func testRequirepass_passwordInTheURL_authenticates_andWithoutItNothingConnects() throws {
        let redis = RedisProcess(arguments: ["--requirepass", "s3cret/p@ss"])
        try redis.start()
        defer { redis.kill9() }
        let good = try connect("redis://:s3cret%2Fp%40ss@127.0.0.1:\(redis.port)/0", expectConnected: true)
        XCTAssertTrue(good.connected)
        XCTAssertEqual(good.reply?.string, "v")
        let anonymous = try connect("redis://127.0.0.1:\(redis.port)/0", expectConnected: true)
        XCTAssertTrue(anonymous.reply?.string?.hasPrefix("NOAUTH") ?? false, "the server does require AUTH: \(String(describing: anonymous.reply))")
        XCTAssertFalse(try connect("redis://:wrong@127.0.0.1:\(redis.port)/0", expectConnected: false).connected)
    }

    /// A refused password is retried with backoff, and logged by the
    /// engine's rule (`Backoff.reportsFailure`): with the backoff at its cap
    /// from the start, the 1st attempt, then those after 2^k failures (the
    /// 2nd, 3rd, 5th, 9th, …), one line each (no second "unavailable" line
    /// per retry): a log that says why, without a storm.
    func testRefusedPassword_isLoggedByTheBackoffsRule_notPerRetry() throws {
        let redis = RedisProcess(arguments: ["--requirepass", "right"])
        try redis.start()
        defer { redis.kill9() }
        let lines = LockedValue<[(message: String, attempt: Int)]>([])
        let logger = Logger(label: "redis-auth") { _ in LineCollector { message, metadata in
            let attempt = metadata["attempt"].flatMap { Int("\($0)") } ?? 0
            lines.withLock { $0.append((message, attempt)) }
        } }
        XCTAssertFalse(try connect("redis://:wrong@127.0.0.1:\(redis.port)/0", expectConnected: false, logger: logger) {
            $0.reconnectDelay = .milliseconds(20)
            $0.reconnectDelayCap = .milliseconds(20)
        }.connected)
        let seen = lines.withLock { $0 }
        let refused = seen.filter { $0.message.contains("AUTH refused") }
        XCTAssertEqual(seen.filter { $0.message.contains("redis unavailable") }.count, 0, "\(seen)")
        XCTAssertGreaterThanOrEqual(refused.last?.attempt ?? 0, 8, "it kept retrying for the second: \(seen)")
        XCTAssertEqual(refused.map(\.attempt), refused.indices.map { $0 == 0 ? 1 : (1 << ($0 - 1)) + 1 }, "attempts 1, 2, 3, 5, 9, …")
    }

    func testACLUser_authenticatesAsThatUser_onItsKeysOnly() throws {
        let redis = RedisProcess(arguments: ["--user", "bot", "on", ">bot-pass", "~auth-*", "+@all", "--user", "default", "off"])
        try redis.start()
        defer { redis.kill9() }
        let result = try connect("redis://bot:bot-pass@127.0.0.1:\(redis.port)/0", expectConnected: true)
        XCTAssertTrue(result.connected)
        XCTAssertEqual(result.reply?.string, "v")
        XCTAssertFalse(try connect("redis://bot:nope@127.0.0.1:\(redis.port)/0", expectConnected: false).connected)
    }

    func testEndpoint_parsesUserAndPassword_andItsDescriptionHidesThePassword() throws {
        let endpoint = try XCTUnwrap(RedisEndpoint(url: "redis://bot:p%3Aw@redis.internal:6380/2"))
        XCTAssertEqual(endpoint.username, "bot")
        XCTAssertEqual(endpoint.password, "p:w")
        XCTAssertEqual(endpoint.host, "redis.internal")
        XCTAssertEqual(endpoint.port, 6380)
        XCTAssertEqual(endpoint.database, 2)
        XCTAssertEqual(endpoint.description, "redis://bot:***@redis.internal:6380/2")
        XCTAssertEqual(RedisEndpoint(url: "redis://:pw@h")?.description, "redis://:***@h:6379/0")
        XCTAssertNil(RedisEndpoint(url: "redis://:@h"), "an empty password")
        XCTAssertNil(RedisEndpoint(url: "redis://:%zz@h"), "a bad escape")
    }
}

/// A log handler handing each line's message and metadata to `collect`.
private struct LineCollector: LogHandler {
    let collect: @Sendable (String, Logger.Metadata) -> Void
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .trace

    init(_ collect: @escaping @Sendable (String, Logger.Metadata) -> Void) { self.collect = collect }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(level: Logger.Level, message: Logger.Message, metadata: Logger.Metadata?, source: String, file: String,
             function: String, line: UInt) {
        collect(message.description, self.metadata.merging(metadata ?? [:]) { $1 })
    }
}
