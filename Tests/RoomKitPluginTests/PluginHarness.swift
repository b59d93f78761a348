import Foundation
import Logging
import RoomKit
import RoomKitLoop
import RoomKitPlugins
import RoomKitProtocol
import RoomKitServer
import RoomKitTestSupport
import XCTest

/// An in-process roomd, a bot host with a PluginManager, and a second
/// (plain) host to act as another member. Timeouts are short.
final class PluginHarness {
    let serverLoop: EventLoop
    let clientLoop: EventLoop
    let server: RoomServer
    let secret = "plugin-secret"
    let directory: String
    let statuses = StatusLog()
    private var hosts: [RoomHost] = []
    private(set) var manager: PluginManager!

    final class StatusLog: @unchecked Sendable {
        // @unchecked Sendable: guarded by lock.
        private let lock = NSLock()
        private var lines: [String] = []
        func add(_ line: String) { lock.withLock { lines.append(line) } }
        var all: [String] { lock.withLock { lines } }
    }

    init() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("roomkit-plugins-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        var logger = Logger(label: "test.plugins")
        logger.logLevel = .error
        serverLoop = try EventLoop(name: "plugins-server", logger: logger)
        clientLoop = try EventLoop(name: "plugins-client", logger: logger)
        var configuration = ServerConfiguration(secret: secret, dataDirectory: directory + "/data")
        configuration.port = 0
        configuration.tokenExpiryNotice = .seconds(1)
        let config = configuration
        let loop = serverLoop
        server = try serverLoop.runAndWait { try RoomServer(loop: loop, configuration: config, logger: logger) }
    }

    func token(_ user: String, ttl: Int64 = 3600) -> String {
        let now = Int64(Date().timeIntervalSince1970)
        return TokenSigner(secret: secret).sign(TokenClaims(sub: user, room: "*", role: .writer, exp: now + ttl, iat: now))
    }

    func host(tokenProvider: (any TokenProvider)? = nil, configure: (inout RoomHostConfiguration) -> Void = { _ in }) throws -> RoomHost {
        var configuration = RoomHostConfiguration(serverURL: "ws://127.0.0.1:\(server.port)/v1/rooms")
        configuration.backoffFirst = .milliseconds(100)
        configure(&configuration)
        var logger = Logger(label: "test.host")
        logger.logLevel = .error
        let host = try RoomHost(loop: clientLoop, configuration: configuration, logger: logger, tokenProvider: tokenProvider)
        hosts.append(host)
        return host
    }

    /// The bot host with plugins loaded from a manifest written to disk.
    func botHost(manifest: JSON, tokenProvider: (any TokenProvider)? = nil,
                 configure: (inout RoomHostConfiguration) -> Void = { _ in }) throws -> (RoomHost, [PluginLoadError]) {
        let host = try self.host(tokenProvider: tokenProvider, configure: configure)
        let statuses = self.statuses
        manager = PluginManager(host: host) { name, status, message in
            statuses.add("\(name) \(status.rawValue)\(message.map { ": \($0)" } ?? "")")
        }
        let path = try writeManifest(manifest)
        let errors = manager.load(try PluginManifest(path: path))
        return (host, errors)
    }

    func writeManifest(_ manifest: JSON, name: String = "plugins.json") throws -> String {
        let path = directory + "/" + name
        try Data(manifest.serialized()).write(to: URL(fileURLWithPath: path))
        return path
    }

    func close() async throws {
        manager?.unloadAll()
        for host in hosts { await host.shutdown() }
        let server = self.server
        try serverLoop.runAndWait { server.stop() }
        try clientLoop.shutdown()
        try serverLoop.shutdown()
        try? FileManager.default.removeItem(atPath: directory)
    }
}

/// Where SwiftPM put the shipped plugin libraries (next to the test bundle).
func shippedPlugin(_ product: String) throws -> String {
    try builtProduct("lib\(product).so")
}


/// A manifest entry.
func pluginEntry(_ name: String, library: String, hooks: [String], order: Int = 0, rooms: [String] = ["*"],
                 timeoutMs: Int = 200, config: JSON = .null, entry: String? = nil,
                 isolation: String? = nil, supervision: [String: JSON] = [:]) -> JSON {
    var object: [String: JSON] = [
        "name": .string(name), "library": .string(library), "abi": 1,
        "hooks": .array(hooks.map(JSON.string)), "rooms": .array(rooms.map(JSON.string)),
        "order": .int(Int64(order)), "timeoutMs": .int(Int64(timeoutMs)), "config": config,
    ]
    if let entry { object["entry"] = .string(entry) }
    if let isolation { object["isolation"] = .string(isolation) }
    object.merge(supervision) { _, new in new }
    return .object(object)
}

func manifest(_ plugins: [JSON]) -> JSON {
    ["manifestVersion": 1, "plugins": .array(plugins)]
}


/// Collects magix events a member receives.
final class MagixInbox: @unchecked Sendable {
    // @unchecked Sendable: guarded by lock.
    private let lock = NSLock()
    private var events: [MagixEvent] = []
    func add(_ event: MagixEvent) { lock.withLock { events.append(event) } }
    var all: [MagixEvent] { lock.withLock { events } }
}
