import Foundation
import RoomKit
import RoomKitBot
import RoomKitLoop
import RoomKitPluginHost
import RoomKitProtocol
import RoomKitTokens
import RoomKitTestSupport
import XCTest

/// Issue #27 §1: one table of edge numbers fed to every entry point that
/// takes a number from outside (an HTTP query, a JWT claim, roomd's and
/// roombot's flags, bot.json, the manifest, a server's hello), against real
/// roomd and roombot processes where the number reaches a process. Each
/// entry point must either accept the value (and stay up) or give its
/// documented error: 400/1009006 on HTTP, a refused token, exit 2 with one
/// line naming the flag or field. No process may die of a signal.
final class EdgeNumberTests: XCTestCase {
    /// The edge numbers, as text (what a query string or a flag carries).
    static let edges = [
        "-9223372036854775809", "-9223372036854775808", "-9223372036854775807", "-1", "0", "1",
        "9300000000000000", "9223372036854775806", "9223372036854775807", "9223372036854775808",
        "1e12", "1e19", "1e300", "-1e300", "1e99999", "nan", "inf", "-inf", "0.5",
    ]

    /// Whether `text` is an integer in `range` (the rule for integer fields).
    private func integer(_ text: String, _ range: ClosedRange<Int64>) -> Bool {
        Int64(text).map(range.contains) ?? false
    }

    /// Whether `text` is a finite number of seconds in `range`.
    private func seconds(_ text: String, _ range: ClosedRange<Double>) -> Bool {
        Double(text).map { $0.isFinite && range.contains($0) } ?? false
    }

    private func run(_ product: String, _ arguments: [String], environment: [String: String] = [:]) throws
        -> (status: Int32, signaled: Bool, stdout: String, stderr: String) {
        let child = try ChildProcess(product, arguments)
        let (status, out, err) = child.finish(timeout: 20)
        return (status, child.process.terminationReason == .uncaughtSignal, out, err)
    }

    func testEveryEntryPoint_withEdgeNumbers_acceptsOrGivesItsDocumentedError() async throws {
        // roomd serve: every duration flag, value as its own argument (a
        // negative number is a value, not "Missing value"). An accepted value
        // gets as far as --data (a file, so refused last).
        let notADirectory = FileManager.default.temporaryDirectory.appendingPathComponent("edge-\(UUID().uuidString)").path
        _ = FileManager.default.createFile(atPath: notADirectory, contents: Data())
        defer { try? FileManager.default.removeItem(atPath: notADirectory) }
        let secretFile = notADirectory + ".secret"
        try Data("edge-secret\n".utf8).write(to: URL(fileURLWithPath: secretFile))
        defer { try? FileManager.default.removeItem(atPath: secretFile) }
        let serve = ["serve", "--listen", "127.0.0.1:0", "--secret-file", secretFile, "--data", notADirectory]
        for (flag, accepts) in [
            ("--heartbeat-interval", { self.seconds($0, 0.001...86_400) && Double($0)! <= 90 }),
            ("--heartbeat-timeout", { self.seconds($0, 0.001...86_400) }),  // the default interval follows it
            ("--session-retention", { self.seconds($0, 0.001...31_536_000) }),
        ] as [(String, (String) -> Bool)] {
            for value in Self.edges {
                let result = try run("roomd", serve + [flag, value])
                XCTAssertFalse(result.signaled, "roomd \(flag) \(value) died of a signal")
                XCTAssertEqual(result.status, 2, "\(flag) \(value)")
                XCTAssertEqual(result.stderr.filter { $0 == "\n" }.count, 1, "one line: \(result.stderr)")
                if accepts(value) {
                    XCTAssertFalse(result.stderr.contains(flag), "\(flag) \(value) accepted: \(result.stderr)")
                } else {
                    XCTAssertTrue(result.stderr.hasPrefix("roomd: \(flag): "), "\(flag) \(value): \(result.stderr)")
                }
            }
        }
        // roomd token --ttl: a token that verifies, or exit 2 naming --ttl.
        for value in Self.edges {
            // Verified as of just before the mint: a token of 1 s must not
            // run out while a slow (sanitized) roomd starts and exits.
            let minted = Int64(Date().timeIntervalSince1970)
            let result = try run("roomd", ["token", "--secret", "s", "--user", "u", "--ttl", value])
            XCTAssertFalse(result.signaled, "roomd token --ttl \(value) died of a signal")
            if seconds(value, 0.001...3_153_600_000) {
                XCTAssertEqual(result.status, 0, "--ttl \(value): \(result.stderr)")
                let token = result.stdout.trimmingCharacters(in: .newlines)
                XCTAssertNoThrow(try TokenSigner(secret: "s").verify(token, now: minted))
            } else {
                XCTAssertEqual(result.status, 2, "--ttl \(value)")
                XCTAssertTrue(result.stderr.hasPrefix("roomd: --ttl: "), "--ttl \(value): \(result.stderr)")
            }
        }
        // roombot run --progress-interval (checked before the config is read)
        // and roombot replay --from / --to (checked before the token is).
        for value in Self.edges {
            let run = try run("roombot", ["run", "--config", "/nonexistent/bot.json", "--progress-interval", value])
            XCTAssertFalse(run.signaled)
            XCTAssertEqual(run.status, 2)
            XCTAssertEqual(run.stderr.contains("--progress-interval"), !seconds(value, 0...86_400), "\(value): \(run.stderr)")
            XCTAssertEqual(run.stderr.filter { $0 == "\n" }.count, 1, "one line: \(run.stderr)")
            for flag in ["--from", "--to"] {
                let replay = try self.run("roombot", ["replay", "--server", "ws://127.0.0.1:1/v1/rooms", "--room", "r",
                                                      "--token-file", "/nonexistent", flag, value])
                XCTAssertFalse(replay.signaled)
                XCTAssertEqual(replay.status, 2)
                let named = replay.stderr.contains("\(flag):") || replay.stderr.contains("'\(flag)")
                XCTAssertEqual(named, !integer(value, 0...ExternalNumber.maxEpochMilliseconds),
                               "\(flag) \(value): \(replay.stderr)")
            }
        }
        // bot.json durations and manifest integers, parsed as JSON numbers.
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("edge-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        for value in Self.edges {
            guard let number = try? JSON.parse(Array(value.utf8)), number.isNumber else { continue }
            for key in ["loginTimeout", "reconnectWindow"] {
                var object: [String: JSON] = ["server": "ws://127.0.0.1:1/v1/rooms", "user": ["id": "b"], "auth": ["secret": "s"]]
                object[key] = number
                let json = JSON.object(object)
                let accepted = (try? BotConfig(json: json, path: directory + "/bot.json")) != nil
                XCTAssertEqual(accepted, seconds(value, 0.001...31_536_000), "\(key) \(value)")
            }
            for (key, range) in [("timeoutMs", 1...600_000), ("hangFactor", 1...1000), ("restartBackoffMs", 0...3_600_000)]
                as [(String, ClosedRange<Int64>)] {
                var plugin: [String: JSON] = ["name": "p", "library": "/etc/hostname", "abi": 1, "hooks": ["room"]]
                plugin[key] = number
                let json: JSON = ["manifestVersion": 1, "plugins": .array([.object(plugin)])]
                let accepted = (try? PluginManifest(json: json, path: directory + "/plugins.json")) != nil
                XCTAssertEqual(accepted, number.int64Value.map(range.contains) ?? false, "\(key) \(value)")
            }
            // A hello's heartbeat fields (the client engine's entry point).
            for key in ["heartbeatInterval", "heartbeatTimeout"] {
                let accepted = (try? HelloReply.heartbeat(fields: [key: number])) != nil
                XCTAssertEqual(accepted, number.int64Value.map { ExternalNumber.heartbeatMilliseconds.contains($0) } ?? false, "hello.\(key) \(value)")
            }
        }

        // A real roomd: every recording parameter at every edge, alone and in
        // pairs, then JWT `exp` at the edges on login and renewToken.
        let roomd = RoomdProcess(secret: "edge-secret")
        try roomd.start()
        defer { roomd.kill9() }
        let signer = TokenSigner(secret: "edge-secret")
        let now = Int64(Date().timeIntervalSince1970)
        let reader = signer.sign(TokenClaims(sub: "r", room: "*", role: .reader, exp: now + 3600, iat: now))
        let loop = try EventLoop(name: "edge-client")
        var configuration = RoomHostConfiguration(serverURL: "ws://127.0.0.1:\(roomd.port)/v1/rooms")
        configuration.loginTimeout = .seconds(5)
        let host = try RoomHost(loop: loop, configuration: configuration)
        let writer = signer.sign(TokenClaims(sub: "w", room: "*", role: .writer, exp: now + 3600, iat: now))
        try await host.loginRoom("lobby", user: LoginUser(id: "w"), token: writer)
        let parameters = ["from", "to", "sliceStart", "sliceEnd"]
        var queries = parameters.flatMap { name in Self.edges.map { "\(name)=\($0)" } }
        for (a, b) in [("from", "to"), ("sliceStart", "sliceEnd"), ("from", "sliceEnd"), ("to", "sliceStart")] {
            for x in ["-9223372036854775808", "-1", "0", "9223372036854775807"] {
                for y in ["-9223372036854775808", "-1", "0", "9223372036854775807"] { queries.append("\(a)=\(x)&\(b)=\(y)") }
            }
        }
        for query in queries {
            let response = httpRequest(port: roomd.port, "GET", "/v1/rooms/lobby/recording?\(query)", token: reader)
            let status = Int(response.split(separator: " ").dropFirst().first ?? "") ?? 0
            XCTAssertTrue(status == 200 || status == 400, "\(query): \(response.prefix(200))")
            if status == 400 { XCTAssertTrue(response.contains(#""code":1009006"#), "\(query): \(response)") }
            let outOfRange = query.split(separator: "&").contains {
                !integer(String($0.split(separator: "=")[1]), 0...ExternalNumber.maxEpochMilliseconds)
            }
            if outOfRange { XCTAssertEqual(status, 400, query) }
        }
        for exp in [9_300_000_000_000_000, 9_223_372_036_854_775, .max, .min, -1, ExternalNumber.maxEpochSeconds + 1] as [Int64] {
            let token = signer.sign(TokenClaims(sub: "w", room: "*", role: .writer, exp: exp, iat: now))
            do {
                try await host.loginRoom("edge-\(exp & 0xFFFF)", user: LoginUser(id: "w"), token: token)
                XCTFail("exp \(exp) logged in")
            } catch let error as RoomError {
                XCTAssertEqual(error.code, .tokenInvalid, "exp \(exp): \(error)")
            }
            do {
                try await host.renewToken("lobby", token: token)
                XCTFail("exp \(exp) renewed")
            } catch let error as RoomError {
                XCTAssertEqual(error.code, .tokenInvalid, "renew exp \(exp): \(error)")
            }
        }
        XCTAssertEqual(roomd.process?.isRunning, true, "roomd is still up: \(roomd.log)")
        XCTAssertTrue(httpRequest(port: roomd.port, "GET", "/healthz").hasSuffix("ok"))
        await host.shutdown()
        try loop.shutdown()
    }
}

/// A man-in-the-middle or broken server (issue #27 §1): a real `WebServer`
/// (libwebsockets frames the messages) whose answers a test chooses; the
/// default hello reply is roomd's with `hello` merged in.
private final class HostileServer: WebServerDelegate, WebSocketDelegate, @unchecked Sendable {
    // @unchecked Sendable: loop thread only (`hellos` is locked).
    let hello: [String: JSON]
    let login: [String: JSON]?
    let hellos = LockedValue(0)
    init(hello: [String: JSON], login: [String: JSON]? = nil) {
        self.hello = hello
        self.login = login
    }

    func webServer(_ server: WebServer, didAccept connection: WebSocketConnection) { connection.delegate = self }
    func webServer(_ server: WebServer, didReceive request: HTTPRequest, responder: HTTPResponder) {
        responder.respond(status: 404, text: "{}")
    }
    func webSocket(_ connection: WebSocketConnection, didReceive message: WebSocketMessage) {
        guard let json = try? JSON.parse(message.bytes), let id = json["id"]?.int64Value else { return }
        switch json["op"]?.stringValue {
        case "hello"?:
            hellos.withLock { $0 += 1 }
            let fields = HelloReply(connection: "c-hostile", serverTime: 1_700_000_000_000).fields.merging(hello) { $1 }
            _ = connection.send(text: ServerMessage.reply(id: id, fields).jsonString)
        case "login"?:
            if let login { _ = connection.send(text: ServerMessage.reply(id: id, login).jsonString) }
        default:
            break
        }
    }
}

extension EdgeNumberTests {
    func testRoombot_whenTheServersHelloHasAnInt64MaxHeartbeat_staysUpAndLogsAProtocolError() throws {
        for field in ["heartbeatInterval", "heartbeatTimeout"] {
            let loop = try EventLoop(name: "hostile-hello")
            let delegate = HostileServer(hello: [field: .int(.max)])
            let server = try loop.runAndWait { try WebServer(loop: loop, configuration: WebServerConfiguration(), delegate: delegate) }
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("hostile-\(UUID().uuidString)").path
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let config: JSON = ["server": .string("ws://127.0.0.1:\(server.port)/v1/rooms"), "user": ["id": "bot"],
                                "auth": ["secret": "s"], "rooms": ["lobby"], "loginTimeout": 2, "reconnectWindow": 30]
            try Data(config.serialized()).write(to: URL(fileURLWithPath: directory + "/bot.json"))
            let bot = try ChildProcess("roombot", ["run", "--config", directory + "/bot.json", "--log-level", "warning"])
            let deadline = Date().addingTimeInterval(10)
            while delegate.hellos.withLock({ $0 }) < 2 && Date() < deadline && bot.process.isRunning { usleep(20_000) }
            XCTAssertTrue(bot.process.isRunning, "roombot died (\(field) = Int64.max)")
            bot.signal(SIGTERM)
            let (status, _, errors) = bot.finish()
            XCTAssertEqual(bot.process.terminationReason, .exit, "\(field): \(errors)")
            XCTAssertEqual(status, 0, errors)
            XCTAssertGreaterThanOrEqual(delegate.hellos.withLock { $0 }, 2, "it reconnected after the bad hello")
            XCTAssertTrue(errors.contains("bad hello reply") && errors.contains("hello.\(field)"), errors)
            try loop.runAndWait { server.stop() }
            try loop.shutdown()
        }
    }
}

extension EdgeNumberTests {
    /// A login reply with a well-typed but invalid value is a 1009006 error,
    /// and says so: it carried 1009001 with "1009006" in its message.
    func testBadLoginReply_failsWithTheErrorsOwnCode() async throws {
        let loop = try EventLoop(name: "hostile-login")
        let delegate = HostileServer(hello: [:], login: ["session": "s-1", "memberId": 1.5, "seq": 0, "recovered": false])
        let server = try loop.runAndWait { try WebServer(loop: loop, configuration: WebServerConfiguration(), delegate: delegate) }
        var configuration = RoomHostConfiguration(serverURL: "ws://127.0.0.1:\(server.port)/v1/rooms")
        configuration.loginTimeout = .seconds(5)
        let host = try RoomHost(loop: loop, configuration: configuration)
        let thrown = LockedValue<[RoomEvent]>([])
        let registration = host.addObserver { event in thrown.withLock { $0.append(event) } }
        defer { _ = registration }
        do {
            try await host.loginRoom("lobby", user: LoginUser(id: "u"), token: "t.t.t")
            XCTFail("a bad login reply logged in")
        } catch let error as RoomError {
            XCTAssertEqual(error.code, .invalidArgument, "\(error)")
            XCTAssertTrue(error.message.contains("memberId"), error.message)
        }
        let protocolErrors = thrown.withLock { $0 }.compactMap { event -> (ErrorCode, String)? in
            if case .throwError(domain: "protocol", code: let code, message: let message) = event { return (code, message) }
            return nil
        }
        XCTAssertEqual(protocolErrors.map(\.0), [.invalidArgument], "\(protocolErrors)")
        XCTAssertFalse(protocolErrors.contains { $0.1.contains("1009006") && $0.0 != .invalidArgument })
        await host.shutdown()
        try loop.runAndWait { server.stop() }
        try loop.shutdown()
    }
}
