import Foundation
import Logging
import RoomKit
import RoomKitLoop
import RoomKitProtocol
import RoomKitServer
import RoomKitTestSupport
import XCTest

/// Records every event a host raises, in order (observer on the loop).
final class EventRecorder: @unchecked Sendable {
    // @unchecked Sendable: guarded by lock.
    private let lock = NSLock()
    private var events: [RoomEvent] = []

    var all: [RoomEvent] {
        lock.lock(); defer { lock.unlock() }
        return events
    }

    func record(_ event: RoomEvent) {
        lock.lock(); events.append(event); lock.unlock()
    }

    /// "REASON code" strings for one room, in order.
    func reasons(_ room: String) -> [String] {
        all.compactMap {
            if case .roomStateChanged(room, let reason, let code, _) = $0 { return "\(reason) \(code.rawValue)" }
            return nil
        }
    }

    func phases(_ room: String) -> [RoomPhase] {
        all.compactMap {
            if case .phaseChanged(room, let phase) = $0 { return phase }
            return nil
        }
    }

    func count(where predicate: (RoomEvent) -> Bool) -> Int { all.filter(predicate).count }
}

/// An in-process roomd (own loop), an optional fault proxy in front of it,
/// and hosts on a separate client loop. Timeouts are shortened.
final class EngineHarness {
    let serverLoop: EventLoop
    let clientLoop: EventLoop
    let server: RoomServer
    let proxy: FaultProxy
    let secret = "test-secret"
    let dataDirectory: String
    private var hosts: [RoomHost] = []
    private(set) var closed = false

    struct Timing {
        var heartbeatInterval: Duration = .milliseconds(200)
        var heartbeatTimeout: Duration = .milliseconds(1500)
        var retention: Duration = .seconds(20)
    }

    /// `configure` may change the server's configuration last (limits, for example).
    init(timing: Timing = Timing(), configure: (inout ServerConfiguration) -> Void = { _ in }) throws {
        dataDirectory = FileManager.default.temporaryDirectory.appendingPathComponent("roomkit-engine-\(UUID().uuidString)").path
        var logger = Logger(label: "test.roomd")
        logger.logLevel = .warning
        serverLoop = try EventLoop(name: "test-server", logger: logger)
        clientLoop = try EventLoop(name: "test-client", logger: logger)
        var configuration = ServerConfiguration(secret: secret, dataDirectory: dataDirectory)
        configuration.port = 0
        configuration.heartbeatInterval = timing.heartbeatInterval
        configuration.heartbeatTimeout = timing.heartbeatTimeout
        configuration.sessionRetention = timing.retention
        configuration.tokenExpiryNotice = .seconds(1)
        configure(&configuration)
        let config = configuration
        let loop = serverLoop
        server = try serverLoop.runAndWait { try RoomServer(loop: loop, configuration: config, logger: logger) }
        proxy = FaultProxy(targetPort: server.port)
    }

    func token(_ user: String, room: String = "*", role: TokenRole = .writer, ttl: Int64 = 3600) -> String {
        let now = Int64(Date().timeIntervalSince1970)
        return TokenSigner(secret: secret).sign(TokenClaims(sub: user, room: room, role: role, exp: now + ttl, iat: now))
    }

    /// A host through the proxy (`viaProxy`) or straight to the server.
    func host(viaProxy: Bool = true, recorder: EventRecorder? = nil, tokenProvider: (any TokenProvider)? = nil,
              configure: (inout RoomHostConfiguration) -> Void = { _ in }) throws -> RoomHost {
        let port = viaProxy ? proxy.port : server.port
        var configuration = RoomHostConfiguration(serverURL: "ws://127.0.0.1:\(port)/v1/rooms")
        configuration.loginTimeout = .seconds(3)
        configuration.reconnectWindow = .seconds(10)
        configuration.backoffFirst = .milliseconds(100)
        configuration.backoffCap = .milliseconds(300)
        configure(&configuration)
        var logger = Logger(label: "test.host")
        logger.logLevel = .warning
        let host = try RoomHost(loop: clientLoop, configuration: configuration, logger: logger, tokenProvider: tokenProvider)
        if let recorder { host.addObserver { recorder.record($0) } }
        hosts.append(host)
        return host
    }

    func user(_ id: String) -> LoginUser { LoginUser(id: id, name: id.uppercased()) }

    /// Shuts everything down; the loops must close cleanly.
    func close() async throws {
        guard !closed else { return }
        closed = true
        for host in hosts { await host.shutdown() }
        proxy.stop()
        let server = self.server
        try serverLoop.runAndWait { server.stop() }
        try clientLoop.shutdown()
        try serverLoop.shutdown()
        try? FileManager.default.removeItem(atPath: dataDirectory)
    }
}


