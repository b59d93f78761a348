import Foundation
import Logging
import RoomKit
import RoomKitLoop
import RoomKitPluginHost
import RoomKitProtocol
import RoomKitServer
import RoomKitTestSupport
import XCTest

/// The shared in-process roomd and client loop (`RoomdFixture`), a bot host
/// with a PluginManager, and plain hosts to act as other members.
final class PluginHarness {
    let fixture: RoomdFixture
    var serverLoop: EventLoop { fixture.serverLoop }
    let clientLoop: EventLoop
    var server: RoomServer { fixture.server }
    var secret: String { fixture.secret }
    var directory: String { fixture.directory }
    let statuses = StatusLog()
    private(set) var manager: PluginManager!

    final class StatusLog: @unchecked Sendable {
        // @unchecked Sendable: guarded by lock.
        private let lock = NSLock()
        private var lines: [String] = []
        func add(_ line: String) { lock.withLock { lines.append(line) } }
        var all: [String] { lock.withLock { lines } }
    }

    init() throws {
        fixture = try RoomdFixture(name: "plugins", secret: "plugin-secret", logLevel: .error) { $0.tokenExpiryNotice = .seconds(1) }
        clientLoop = try fixture.clientLoop
    }

    func token(_ user: String, ttl: Int64 = 3600) -> String { fixture.token(user, ttl: ttl) }

    func host(tokenProvider: (any TokenProvider)? = nil, configure: (inout RoomHostConfiguration) -> Void = { _ in }) throws -> RoomHost {
        try fixture.host(logLevel: .error, tokenProvider: tokenProvider) {
            $0.backoffFirst = .milliseconds(100)
            configure(&$0)
        }
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
        try await fixture.close()
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
