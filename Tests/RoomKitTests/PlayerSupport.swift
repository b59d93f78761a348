import Foundation
import Logging
import RoomKit
import RoomKitLoop
import RoomKitProtocol
import RoomKitTokens
import RoomKitServer
import RoomKitTestSupport
import XCTest

/// The shared in-process roomd and client loop (`RoomdFixture`), plus raw
/// protocol clients and players.
final class PlayerHarness {
    let fixture: RoomdFixture
    var serverLoop: EventLoop { fixture.serverLoop }
    let clientLoop: EventLoop
    var server: RoomServer { fixture.server }
    var secret: String { fixture.secret }
    private var clients: [WireClient] = []
    private var wsClient: WebSocketClient?
    private var closed = false

    init(configure: (inout ServerConfiguration) -> Void = { _ in }) throws {
        fixture = try RoomdFixture(name: "player", secret: "player-secret", configure: configure)
        clientLoop = try fixture.clientLoop
    }

    var port: Int { server.port }
    var serverURL: String { "ws://127.0.0.1:\(port)/v1/rooms" }

    func token(_ user: String, room: String = "*", role: TokenRole = .writer, secret: String? = nil) -> String {
        let now = Int64(Date().timeIntervalSince1970)
        return TokenSigner(secret: secret ?? self.secret).sign(TokenClaims(sub: user, room: room, role: role,
                                                                          exp: now + 3600, iat: now))
    }

    /// A player configuration for `room` with test-sized slices and progress.
    func playerConfiguration(_ room: String, from: Int64? = nil, to: Int64? = nil,
                             token: String? = nil) -> PlayerConfiguration {
        var configuration = PlayerConfiguration(serverURL: serverURL, room: room, token: token ?? self.token("viewer", room: room, role: .reader),
                                                from: from, to: to)
        configuration.sliceDuration = .milliseconds(800)
        configuration.progressInterval = .milliseconds(50)
        configuration.retryDelay = .milliseconds(50)
        configuration.transport.timeout = .seconds(5)
        return configuration
    }

    /// A raw protocol client, connected and past `hello`.
    func wire(_ name: String) async throws -> WireClient {
        let loop = clientLoop
        if wsClient == nil {
            wsClient = try loop.runAndWait { try WebSocketClient(loop: loop) }
        }
        let client = try await WireClient.connect(loop: loop, client: wsClient!, port: port, name: name)
        clients.append(client)
        _ = try await client.request("hello", ["client": "player-tests/1"])
        return client
    }

    /// A raw client logged in to `room` as `user`.
    func member(_ user: String, room: String) async throws -> WireClient {
        let client = try await wire(user)
        try await client.login(room, token: token(user, room: room), user: user)
        return client
    }

    func host(configure: (inout RoomHostConfiguration) -> Void = { _ in }) throws -> RoomHost {
        try fixture.host {
            $0.loginTimeout = .seconds(3)
            configure(&$0)
        }
    }

    /// Shuts everything down; both loops must close cleanly.
    func close() async throws {
        guard !closed else { return }
        closed = true
        let clients = self.clients
        let wsClient = self.wsClient
        try clientLoop.runAndWait {
            clients.forEach { $0.close() }
            wsClient?.shutdown()
        }
        try await fixture.close()
    }
}

/// A bare `room.v1` client: sends exactly the requests a test scripts and
/// awaits their replies. Loop-thread state, reached through the loop.
final class WireClient: WebSocketDelegate, @unchecked Sendable {
    // @unchecked Sendable: every mutable field is touched on the loop thread only.
    struct Failure: Error, CustomStringConvertible { let description: String }

    let loop: EventLoop
    let name: String
    private var connection: WebSocketConnection?
    private var opening: CheckedContinuation<Void, any Error>?
    private var pending: [Int64: CheckedContinuation<JSON, any Error>] = [:]
    private var nextID: Int64 = 1

    private init(loop: EventLoop, name: String) {
        self.loop = loop
        self.name = name
    }

    static func connect(loop: EventLoop, client: WebSocketClient, port: Int, name: String) async throws -> WireClient {
        let wire = WireClient(loop: loop, name: name)
        let url = try WebSocketURL("ws://127.0.0.1:\(port)/v1/rooms")
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            loop.execute {
                wire.opening = continuation
                wire.connection = client.connect(to: url, subprotocol: "room.v1", delegate: wire)
            }
        }
        return wire
    }

    /// Sends a request and returns its reply; throws when the reply is not ok.
    @discardableResult
    func request(_ op: String, room: String? = nil, _ fields: [String: JSON] = [:]) async throws -> JSON {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<JSON, any Error>) in
            loop.execute { [self] in
                let id = nextID
                nextID += 1
                var message = fields
                message["op"] = .string(op)
                message["id"] = .int(id)
                if let room { message["room"] = .string(room) }
                pending[id] = continuation
                if connection?.send(text: JSON.object(message).jsonString) != true {
                    pending[id] = nil
                    continuation.resume(throwing: Failure(description: "\(name): not connected"))
                }
            }
        }
    }

    func login(_ room: String, token: String, user: String) async throws {
        try await request("login", room: room, ["token": .string(token), "user": ["id": .string(user), "name": .string(user.uppercased())]])
    }

    /// Closes the connection. Loop thread only.
    func close() {
        connection?.close(code: 1000, reason: "test done")
    }

    func webSocketDidOpen(_ connection: WebSocketConnection) {
        opening?.resume()
        opening = nil
    }

    func webSocket(_ connection: WebSocketConnection, didReceive message: WebSocketMessage) {
        guard let json = try? JSON.parse(message.bytes), json["op"]?.stringValue == "reply",
              let id = json["id"]?.int64Value, let continuation = pending.removeValue(forKey: id) else { return }
        if json["ok"] == .bool(true) {
            continuation.resume(returning: json)
        } else {
            continuation.resume(throwing: Failure(description: "\(name): \(json.jsonString)"))
        }
    }

    func webSocket(_ connection: WebSocketConnection, didCloseWith event: WebSocketCloseEvent) {
        opening?.resume(throwing: Failure(description: "\(name): \(event)"))
        opening = nil
        for continuation in pending.values { continuation.resume(throwing: Failure(description: "\(name): closed")) }
        pending.removeAll()
    }
}

/// Every player event with the monotonic time (ms) it was raised, recorded
/// by an observer on the loop.
final class PlayerRecorder: @unchecked Sendable {
    // @unchecked Sendable: guarded by lock.
    private let lock = NSLock()
    private var list: [(at: Int64, event: PlayerEvent)] = []

    init(_ player: Player) {
        player.addObserver { [self] event in
            let at = Int64(DispatchTime.now().uptimeNanoseconds / 1_000_000)
            lock.lock(); list.append((at, event)); lock.unlock()
        }
    }

    var timed: [(at: Int64, event: PlayerEvent)] {
        lock.lock(); defer { lock.unlock() }
        return list
    }

    var events: [PlayerEvent] { timed.map(\.event) }

    /// The starting phase followed by every phase change.
    var phases: [PlayerPhase] {
        [.waitingFirstFrame] + events.compactMap {
            if case .phaseChanged(let phase) = $0 { return phase }
            return nil
        }
    }

    /// One word per frame-driven event: the changed keys, or `magix:<event>`.
    var frameEvents: [(at: Int64, what: String)] {
        timed.compactMap { entry in
            switch entry.event {
            case .playerStateChanged(let diff): return (entry.at, diff.keys.joined(separator: ","))
            case .magix(let magix): return (entry.at, "magix:\(magix.event)")
            default: return nil
            }
        }
    }

    var errors: [PlayerError] {
        events.compactMap {
            if case .errorWhenAppendFrame(let error) = $0 { return error }
            return nil
        }
    }

    var stopError: PlayerError? {
        events.lazy.compactMap { event -> PlayerError? in
            if case .stoppedWithError(let error) = event { return error }
            return nil
        }.first
    }

    var slices: [String] {
        events.compactMap {
            if case .sliceChanged(let name) = $0 { return name }
            return nil
        }
    }
}

/// The scripted lesson: twelve events `gap` apart, each changing exactly one
/// thing a player reports. Returns the recording window around them.
struct Lesson {
    static let frameEvents = ["members", "globalState", "members", "magix:hint", "sceneState", "sceneState", "members",
                              "broadcastState", "magix:quiz", "extraInfo", "members", "globalState"]

    static func record(_ harness: PlayerHarness, room: String, gap: Duration = .milliseconds(100),
                       steps: Int = 12) async throws -> (from: Int64, to: Int64) {
        // Events before the script (e.g. a watcher's join) may share a
        // millisecond with `from`; step past it so the window holds only the script.
        try await Task.sleep(for: .milliseconds(5))
        let from = wallMilliseconds()
        try await Task.sleep(for: .milliseconds(5))
        var teacher: WireClient!
        var student: WireClient!
        let script: [() async throws -> Void] = [
            { teacher = try await harness.member("u1", room: room) },
            { try await teacher.request("setState", room: room, ["patch": ["globalState": ["topic": "fractions", "step": 1]]]) },
            { student = try await harness.member("u2", room: room) },
            { try await teacher.request("magix", room: room, ["event": "hint", "payload": ["for": "u2"]]) },
            { try await teacher.request("putScenes", room: room, ["dir": "/", "scenes": [["name": "p2"]]]) },
            { try await teacher.request("setScenePath", room: room, ["path": "/p2"]) },
            { try await student.request("setMemberState", room: room, ["memberState": ["hand": "up"]]) },
            { try await teacher.request("setViewMode", room: room, ["mode": "broadcaster"]) },
            { try await teacher.request("magix", room: room, ["event": "quiz", "payload": 2]) },
            { try await teacher.request("setExtraInfo", room: room, ["key": "k", "value": "v"]) },
            { try await student.request("logout", room: room) },
            { try await teacher.request("setState", room: room, ["patch": ["globalState": ["topic": "decimals", "step": 2]]]) },
        ]
        for step in script.prefix(steps) {
            try await step()
            try await Task.sleep(for: gap)
        }
        return (from, wallMilliseconds())
    }
}

/// Polls `condition` every 5 ms until true or `timeout` seconds; fails the test otherwise.
func waitFor(_ what: String, timeout: TimeInterval = 10, file: StaticString = #filePath, line: UInt = #line,
             _ condition: () -> Bool) async {
    let deadline = Date().addingTimeInterval(timeout)
    while Date() < deadline {
        if condition() { return }
        try? await Task.sleep(for: .milliseconds(5))
    }
    XCTFail("\(what) not met within \(timeout) s", file: file, line: line)
}
