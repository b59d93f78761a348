import Foundation
import Logging
import RoomKit
import RoomKitLoop
import RoomKitProtocol
import RoomKitTokens
import RoomKitServer

/// An in-process roomd on a loop of its own, a scratch directory, and a
/// second loop for the client hosts a test creates: the part every
/// in-process harness (engine, plugins, bot) shares. Each suite's harness
/// wraps one and adds only what is its own (a fault proxy, a plugin
/// manager, bot configs).
///
/// Use from the test's thread; `close()` shuts the hosts, then the server,
/// then both loops (which must close cleanly), and removes the directory.
public final class RoomdFixture {
    public let serverLoop: EventLoop
    public let server: RoomServer
    public let secret: String
    /// The scratch directory (created); the server keeps its data in `data/` below it.
    public let directory: String
    private let logger: Logger
    private var hosts: [RoomHost] = []
    private var client: EventLoop?
    private(set) var closed = false

    /// `name` labels the loops and the directory; `configure` may change the
    /// server's configuration last (timeouts, limits).
    public init(name: String, secret: String, logLevel: Logger.Level = .warning,
                configure: (inout ServerConfiguration) -> Void = { _ in }) throws {
        self.secret = secret
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("roomkit-\(name)-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        var logger = Logger(label: "test.\(name)")
        logger.logLevel = logLevel
        self.logger = logger
        serverLoop = try EventLoop(name: "\(name)-server", logger: logger)
        var configuration = ServerConfiguration(secret: secret, dataDirectory: directory + "/data")
        configuration.port = 0
        configure(&configuration)
        let config = configuration
        let loop = serverLoop
        server = try serverLoop.runAndWait { try RoomServer(loop: loop, configuration: config, logger: logger) }
    }

    /// The loop the hosts run on, started on first use.
    public var clientLoop: EventLoop {
        get throws {
            if let client { return client }
            let loop = try EventLoop(name: "\(logger.label)-client", logger: logger)
            client = loop
            return loop
        }
    }

    public var serverURL: String { "ws://127.0.0.1:\(server.port)/v1/rooms" }

    /// A JWT for `user`, signed with the server's secret.
    public func token(_ user: String, room: String = "*", role: TokenRole = .writer, ttl: Int64 = 3600) -> String {
        let now = Int64(Date().timeIntervalSince1970)
        return TokenSigner(secret: secret).sign(TokenClaims(sub: user, room: room, role: role, exp: now + ttl, iat: now))
    }

    /// A host on `clientLoop`, to `port` (the server's by default), shut down by `close()`.
    public func host(port: Int? = nil, logLevel: Logger.Level = .warning, tokenProvider: (any TokenProvider)? = nil,
                     configure: (inout RoomHostConfiguration) -> Void = { _ in }) throws -> RoomHost {
        var configuration = RoomHostConfiguration(serverURL: "ws://127.0.0.1:\(port ?? server.port)/v1/rooms")
        configure(&configuration)
        var logger = Logger(label: "test.host")
        logger.logLevel = logLevel
        let host = try RoomHost(loop: try clientLoop, configuration: configuration, logger: logger, tokenProvider: tokenProvider)
        hosts.append(host)
        return host
    }

    /// Shuts the hosts, the server and both loops; removes the directory. Idempotent.
    public func close() async throws {
        guard !closed else { return }
        for host in hosts { await host.shutdown() }
        try closeServer()
    }

    /// `close()` for a fixture that made no hosts (callable without async).
    public func closeServer() throws {
        guard !closed else { return }
        closed = true
        let server = self.server
        try serverLoop.runAndWait { server.stop() }
        try client?.shutdown()
        try serverLoop.shutdown()
        try? FileManager.default.removeItem(atPath: directory)
    }
}
