import Foundation
import Logging
import RoomKit
import RoomKitLoop
import RoomKitProtocol
import RoomKitServer
import RoomKitTestSupport
import XCTest

/// An in-process roomd plus a scratch directory for bot configs.
final class BotHarness {
    let serverLoop: EventLoop
    let server: RoomServer
    let secret = "bot-secret"
    let directory: String

    init(heartbeatTimeout: Duration = .seconds(30), configure: (inout ServerConfiguration) -> Void = { _ in }) throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("roombot-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        var logger = Logger(label: "test.roomd")
        logger.logLevel = .error
        serverLoop = try EventLoop(name: "bot-server", logger: logger)
        var configuration = ServerConfiguration(secret: secret, dataDirectory: directory + "/data")
        configuration.port = 0
        configuration.heartbeatTimeout = heartbeatTimeout
        configure(&configuration)
        let config = configuration
        let loop = serverLoop
        server = try serverLoop.runAndWait { try RoomServer(loop: loop, configuration: config, logger: logger) }
    }

    var serverURL: String { "ws://127.0.0.1:\(server.port)/v1/rooms" }

    func token(_ user: String) -> String {
        let now = Int64(Date().timeIntervalSince1970)
        return TokenSigner(secret: secret).sign(TokenClaims(sub: user, room: "*", role: .writer, exp: now + 3600, iat: now))
    }

    /// Writes `bot.json` (and returns its path).
    func writeConfig(_ json: JSON, name: String = "bot.json") throws -> String {
        let path = directory + "/" + name
        try Data(json.serialized()).write(to: URL(fileURLWithPath: path))
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
        let server = self.server
        try serverLoop.runAndWait { server.stop() }
        try serverLoop.shutdown()
        try? FileManager.default.removeItem(atPath: directory)
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



