import Foundation
import Logging
import RoomKitLoop
import RoomKitProtocol
import RoomKitTokens
import RoomKitServer
import XCTest

/// The secret every test server and token uses.
let testSecret = "protocol-test-secret"

/// Mints tokens signed with `testSecret` (or another secret).
func makeToken(user: String, room: String = "*", role: TokenRole = .writer, ttl: Int64 = 3600,
               secret: String = testSecret) -> String {
    let now = Int64(Date().timeIntervalSince1970)
    return TokenSigner(secret: secret).sign(TokenClaims(sub: user, room: room, role: role, exp: now + ttl, iat: now))
}

/// A token whose `exp` is exactly `exp` (seconds since the epoch).
func makeToken(user: String, room: String = "*", role: TokenRole = .writer, exp: Int64) -> String {
    let now = Int64(Date().timeIntervalSince1970)
    return TokenSigner(secret: testSecret).sign(TokenClaims(sub: user, room: room, role: role, exp: exp, iat: now - 1))
}

/// Wall-clock milliseconds since the epoch.
func nowMilliseconds() -> Int64 {
    Int64((Date().timeIntervalSince1970 * 1000).rounded(.down))
}

/// A fresh empty directory under the temporary directory.
func makeTemporaryDirectory(_ prefix: String) throws -> String {
    let path = (NSTemporaryDirectory() as NSString).appendingPathComponent("\(prefix)-\(UUID().uuidString)")
    try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    return path
}

/// A client-side loop with a `WebSocketClient`: enough to talk to any room
/// server (in-process or a `roomd` child). `shutdown()` must end every test.
class ClientSide: @unchecked Sendable {
    // @unchecked Sendable: `clientCount` is touched by the test thread only.
    let loop: EventLoop
    let webSocketClient: WebSocketClient
    private var clientCount = 0

    /// A client side on `loop` (which may also run a server).
    init(loop: EventLoop) throws {
        self.loop = loop
        webSocketClient = try loop.runAndWait { try WebSocketClient(loop: loop) }
    }

    /// A client side on a loop of its own.
    convenience init(loopName: String) throws {
        try self.init(loop: EventLoop(name: loopName))
    }

    /// Opens a raw connection to `port` (and sends `hello` unless told not to).
    func connect(port: Int, hello: Bool = true, file: StaticString = #filePath, line: UInt = #line) throws -> RawClient {
        clientCount += 1
        let client = try RawClient.connect(loop: loop, client: webSocketClient, port: port,
                                           name: "client-\(clientCount)", file: file, line: line)
        if hello { try client.hello(file: file, line: line) }
        return client
    }

    /// Closes the client side, then shuts the loop down (throws unless it
    /// closed cleanly).
    func shutdown() throws {
        try loop.runAndWait { self.webSocketClient.shutdown() }
        try loop.shutdown()
    }
}

/// An in-process `RoomServer` on port 0 with a temporary data directory,
/// plus a client side on the same loop.
final class ServerHarness: ClientSide, @unchecked Sendable {
    // @unchecked Sendable: `server` is replaced only by the test thread
    // (restart) and used on the loop.
    let dataDirectory: String
    let configuration: ServerConfiguration
    private(set) var server: RoomServer

    /// The test defaults: a 10 s heartbeat timeout (tests that do not ping
    /// stay alive), everything else as shipped unless `configure` changes it.
    init(configure: (inout ServerConfiguration) -> Void = { _ in }) throws {
        let directory = try makeTemporaryDirectory("roomd-test")
        var configuration = ServerConfiguration(secret: testSecret, dataDirectory: directory)
        configuration.port = 0
        configuration.heartbeatInterval = .seconds(1)
        configuration.heartbeatTimeout = .seconds(10)
        configure(&configuration)
        dataDirectory = directory
        self.configuration = configuration
        var logger = Logger(label: "roomd-test")
        logger.logLevel = .warning
        let loop = try EventLoop(name: "roomd-test", logger: logger)
        let config = configuration
        do {
            server = try loop.runAndWait { try RoomServer(loop: loop, configuration: config, logger: logger) }
        } catch {
            try? loop.shutdown()
            throw error
        }
        try super.init(loop: loop)
    }

    /// The port the server listens on.
    var port: Int {
        (try? loop.runAndWait { self.server.port }) ?? 0
    }

    /// Opens a raw connection to the server (and sends `hello`).
    func connect(hello: Bool = true, file: StaticString = #filePath, line: UInt = #line) throws -> RawClient {
        try connect(port: port, hello: hello, file: file, line: line)
    }

    /// Connects, says hello and logs `user` in to `room`; returns the client and the login reply.
    func join(_ room: String, user: String, role: TokenRole = .writer, name: String? = nil, payload: JSON? = nil,
              file: StaticString = #filePath, line: UInt = #line) throws -> (RawClient, JSON) {
        let client = try connect(file: file, line: line)
        let reply = try client.login(room, token: makeToken(user: user, room: room, role: role), user: user,
                                     name: name, payload: payload, file: file, line: line)
        XCTAssertEqual(reply["ok"], true, "login of \(user): \(reply)", file: file, line: line)
        return (client, reply)
    }

    /// Stops the server (connections close 1001, storage closes), waits for
    /// the stop to complete, and starts a new one on the same data directory
    /// (a new port).
    func restart(file: StaticString = #filePath, line: UInt = #line) throws {
        let loop = self.loop
        let config = configuration
        let logger = loop.logger
        let stopped = StopFlag()
        try loop.runAndWait { self.server.stop { stopped.done = true } }
        let deadline = Date().addingTimeInterval(5)
        while try !loop.runAndWait({ stopped.done }) {
            guard Date() < deadline else {
                XCTFail("the server did not stop within 5 s", file: file, line: line)
                throw TestTimeout(description: "server stop")
            }
            usleep(2_000)
        }
        server = try loop.runAndWait { try RoomServer(loop: loop, configuration: config, logger: logger) }
    }

    /// Shuts the loop down (throws unless it closed cleanly) and removes the data.
    override func shutdown() throws {
        try super.shutdown()
        try? FileManager.default.removeItem(atPath: dataDirectory)
    }

    // MARK: HTTP

    /// An HTTP request to the server; `token` goes in `Authorization: Bearer`.
    func http(_ method: String, _ path: String, token: String? = nil, body: String? = nil,
              file: StaticString = #filePath, line: UInt = #line) throws -> HTTPReply {
        var headers: [(String, String)] = []
        if let token { headers.append(("Authorization", "Bearer \(token)")) }
        return try httpRequest(port: port, method: method, path: path, headers: headers, body: body, file: file, line: line)
    }
}

/// Set on the loop when a server's stop completed.
private final class StopFlag: @unchecked Sendable {
    // @unchecked Sendable: loop thread only.
    var done = false
}
