import Foundation
import Logging
import RoomKit
import RoomKitLoop
import RoomKitProtocol
import RoomKitServer
import XCTest

/// An in-process roomd plus a scratch directory for bot configs.
final class BotHarness {
    let serverLoop: EventLoop
    let server: RoomServer
    let secret = "bot-secret"
    let directory: String

    init(heartbeatTimeout: Duration = .seconds(30)) throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("roombot-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        var logger = Logger(label: "test.roomd")
        logger.logLevel = .error
        serverLoop = try EventLoop(name: "bot-server", logger: logger)
        var configuration = ServerConfiguration(secret: secret, dataDirectory: directory + "/data")
        configuration.port = 0
        configuration.heartbeatTimeout = heartbeatTimeout
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

/// A spawned `roombot` (or any built binary next to the tests).
final class ChildProcess {
    let process = Process()
    let output = Pipe()
    let errors = Pipe()

    static func binary(_ name: String) throws -> String {
        var directory = URL(fileURLWithPath: CommandLine.arguments.first ?? "").deletingLastPathComponent()
        for _ in 0..<4 {
            let candidate = directory.appendingPathComponent(name).path
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
            directory = directory.deletingLastPathComponent()
        }
        throw XCTSkip("\(name) is not built next to the tests (run `swift build --build-tests`)")
    }

    init(_ name: String, _ arguments: [String]) throws {
        process.executableURL = URL(fileURLWithPath: try Self.binary(name))
        process.arguments = arguments
        process.standardOutput = output
        process.standardError = errors
        try process.run()
    }

    /// Waits for exit (with a deadline) and returns (status, stdout, stderr).
    func finish(timeout: TimeInterval = 20) -> (Int32, String, String) {
        let deadline = Date().addingTimeInterval(timeout)
        while process.isRunning && Date() < deadline { usleep(20_000) }
        if process.isRunning { process.terminate(); process.waitUntilExit() }
        let out = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        let err = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        return (process.terminationStatus, out, err)
    }

    func signal(_ signal: Int32) { kill(process.processIdentifier, signal) }
}

func eventually(_ timeout: TimeInterval = 5, file: StaticString = #filePath, line: UInt = #line,
                _ what: String = "condition", _ condition: () -> Bool) async {
    let deadline = Date().addingTimeInterval(timeout)
    while Date() < deadline {
        if condition() { return }
        try? await Task.sleep(for: .milliseconds(10))
    }
    XCTFail("\(what) not met within \(timeout) s", file: file, line: line)
}

/// One HTTP request to 127.0.0.1 over a raw socket (test probe only); returns (status, body).
func http(_ port: Int, _ method: String, _ path: String, _ body: String = "", headers: [String] = []) -> (Int, String) {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = in_port_t(UInt16(port).bigEndian)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    let connected = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    guard connected == 0 else { return (0, "") }
    let extra = headers.map { $0 + "\r\n" }.joined()
    let request = "\(method) \(path) HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\(extra)Content-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)"
    _ = request.withCString { send(fd, $0, strlen($0), 0) }
    var response = [UInt8]()
    var buffer = [UInt8](repeating: 0, count: 16384)
    while true {
        let n = recv(fd, &buffer, buffer.count, 0)
        if n <= 0 { break }
        response.append(contentsOf: buffer[0..<n])
    }
    let text = String(decoding: response, as: UTF8.self)
    let status = Int(text.split(separator: " ").dropFirst().first ?? "") ?? 0
    let body = text.components(separatedBy: "\r\n\r\n").dropFirst().joined(separator: "\r\n\r\n")
    return (status, body)
}
