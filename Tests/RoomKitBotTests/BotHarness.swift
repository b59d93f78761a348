import Foundation
import Logging
import RoomKit
import RoomKitLoop
import RoomKitProtocol
@testable import RoomKitBot
import RoomKitServer
import RoomKitTestSupport
import XCTest

/// The shared in-process roomd (`RoomdFixture`) plus bot configs in its
/// scratch directory.
final class BotHarness {
    let fixture: RoomdFixture
    var serverLoop: EventLoop { fixture.serverLoop }
    var server: RoomServer { fixture.server }
    var secret: String { fixture.secret }
    var directory: String { fixture.directory }

    init(heartbeatTimeout: Duration = .seconds(30), configure: (inout ServerConfiguration) -> Void = { _ in }) throws {
        fixture = try RoomdFixture(name: "roombot", secret: "bot-secret", logLevel: .error) {
            $0.heartbeatTimeout = heartbeatTimeout
            configure(&$0)
        }
    }

    var serverURL: String { fixture.serverURL }

    func token(_ user: String) -> String { fixture.token(user) }

    /// Writes `bot.json` (and returns its path).
    func writeConfig(_ json: JSON, name: String = "bot.json") throws -> String {
        let path = directory + "/" + name
        try Data(json.serialized()).write(to: URL(fileURLWithPath: path))
        // Owner-only, as docs/SECURITY.md asks of a file holding a secret:
        // roombot warns (one more stderr line) about a readable one.
        chmod(path, 0o600)
        return path
    }

    func standardConfig(rooms: [String], control: String? = "127.0.0.1:0", events: String = "events.ndjson") -> JSON {
        var object: [String: JSON] = [
            "server": .string(serverURL), "user": ["id": "bot-1", "name": "Helper"], "auth": ["secret": .string(secret)],
            "rooms": .array(rooms.map(JSON.string)), "events": .string(events), "loginTimeout": 5, "reconnectWindow": 30,
        ]
        if let control { object["control"] = .string(control) }
        return .object(object)
    }

    func close() throws {
        try fixture.closeServer()
    }
}

/// A member watching a room, through the engine, straight to the server.
final class Watcher {
    let loop: EventLoop
    let host: RoomHost
    let events = Recorder()

    final class Recorder: @unchecked Sendable {
        // @unchecked Sendable: guarded by lock.
        private let lock = NSLock()
        private var list: [RoomEvent] = []
        func add(_ event: RoomEvent) { lock.withLock { list.append(event) } }
        var all: [RoomEvent] { lock.withLock { list } }
    }

    init(url: String) throws {
        loop = try EventLoop(name: "watcher")
        host = try RoomHost(loop: loop, configuration: RoomHostConfiguration(serverURL: url))
        let events = self.events
        host.addObserver { events.add($0) }
    }

    func deletes(of user: String) -> Int {
        events.all.filter { if case .userUpdate(_, .delete, let users) = $0 { return users.contains { $0.userId == user } }; return false }.count
    }

    func close() async throws {
        await host.shutdown()
        try loop.shutdown()
    }
}




extension BotHarness {
    /// A `BotRunner` in this process on the standard config for `rooms`, with
    /// `plugins` as its manifest and a control API guarded by `controlToken`
    /// (logging only critical lines), started; returns it and its control port.
    func startRunner(plugins: JSON, rooms: [String], controlToken: String) async throws -> (BotRunner, Int) {
        let manifest = try writeConfig(["manifestVersion": 1, "plugins": plugins], name: "plugins.json")
        guard case .object(var fields) = standardConfig(rooms: rooms) else { throw XCTSkip("config") }
        fields["manifest"] = .string(manifest)
        fields["controlToken"] = .string(controlToken)
        var logger = Logger(label: "test.bot")
        logger.logLevel = .critical
        let runner = try BotRunner(config: try BotConfig(path: try writeConfig(.object(fields))), logger: logger)
        try await runner.start()
        return (runner, try XCTUnwrap(runner.controlPort))
    }
}
