import Foundation
import NIOCore
import NIOHTTP1
import WebSocketKit

/// One room session: the server's handle on it and the room it caches.
final class Session {
    let room: String
    var session: String?
    var memberId: Int?
    var seq = 0
    var state: [String: JSONValue] = [:]
    var members: [Int: Member] = [:]
    var streams: [JSONValue] = []
    var extraInfo: [String: JSONValue] = [:]
    var phase = Phase.logout

    enum Phase { case logout, logined, reconnecting, reconnected, loginFailed, kickOut }

    init(room: String) { self.room = room }
}

/// One WebSocket connection (websocket-kit) carrying many room sessions.
/// Logins are pipelined with at most `window` replies outstanding, pushes
/// are applied by seq and handed to the plugins inline, and a lost
/// connection comes back with full-jitter backoff, resuming every session.
final class Connection: @unchecked Sendable {
    // @unchecked Sendable: every property is used on `loop` only. The peer
    // runs one single-threaded EventLoopGroup, websocket-kit calls back on the
    // channel's loop (that one), and the command thread goes through `submit`.
    let loop: any EventLoop
    let url: String
    let userID: String
    let token: String
    let service: Bool
    let sessions: [String: Session]
    let order: [Session]
    let plugins: [Plugin]
    let stats: Stats
    let window: Int
    var onLoggedIn: (() -> Void)?
    private(set) var loginFailures = 0

    private var socket: WebSocket?
    private var pending: [Int: (Incoming) -> Void] = [:]
    private var nextID = 1
    private var pinger: RepeatedTask?
    private var attempt = 0
    private var toLogin: [Session] = []
    private var loginIndex = 0
    private var inFlight = 0
    private var generation = 0
    private var loggedIn = false
    private let decoder = JSONDecoder()
    private let encoder = JSONEncoder()

    init(loop: any EventLoop, url: String, user: String, token: String, rooms: [String], plugins: [Plugin],
         stats: Stats, window: Int, service: Bool) {
        self.loop = loop
        self.url = url
        userID = user
        self.token = token
        order = rooms.map(Session.init(room:))
        sessions = Dictionary(uniqueKeysWithValues: order.map { ($0.room, $0) })
        self.plugins = plugins
        self.stats = stats
        self.window = window
        self.service = service
    }

    /// Connects (again). Event loop only.
    func connect() {
        let configuration = WebSocketClient.Configuration(maxFrameSize: 16 << 20)
        WebSocket.connect(to: url, headers: ["Sec-WebSocket-Protocol": "room.v1"], configuration: configuration,
                          on: loop) { socket in
            self.opened(socket)
        }.whenFailure { error in
            note("connect failed: \(error)")
            self.reconnectLater()
        }
    }

    private func opened(_ socket: WebSocket) {
        self.socket = socket
        attempt = 0
        generation += 1
        socket.onText { _, text in self.received(text) }
        socket.onClose.whenComplete { _ in
            guard self.socket === socket else { return }
            self.connectionLost()
            self.reconnectLater()
        }
        let hello = Hello(id: takeID(), token: service ? token : nil)
        request(hello, id: hello.id) { reply in
            let interval = Int64(reply.heartbeatInterval ?? 10_000)
            self.pinger = self.loop.scheduleRepeatedTask(initialDelay: .milliseconds(interval),
                                                         delay: .milliseconds(interval)) { _ in
                self.send(Ping(t: Int64(Date().timeIntervalSince1970 * 1000)))
            }
            self.loginAll()
        }
    }

    private func takeID() -> Int {
        defer { nextID += 1 }
        return nextID
    }

    private func send(_ message: some Encodable) {
        guard let socket, let data = try? encoder.encode(message) else { return }
        socket.send(raw: data, opcode: .text)
    }

    private func request(_ message: some Encodable, id: Int, onReply: @escaping (Incoming) -> Void) {
        pending[id] = onReply
        send(message)
    }

    private func reconnectLater() {
        let delay = Double.random(in: 0...min(30, pow(2, Double(attempt))))
        attempt += 1
        loop.scheduleTask(in: .nanoseconds(Int64(delay * 1e9))) { self.connect() }
    }

    private func connectionLost() {
        socket = nil
        pinger?.cancel()
        pinger = nil
        pending.removeAll()
        inFlight = 0
        var lost = false
        for session in order where session.phase == .logined || session.phase == .reconnected {
            session.phase = .reconnecting
            lost = true
        }
        if lost && stats.firstLost == 0 { stats.firstLost = monotonicNanos() }
    }

    // MARK: logins

    private func loginAll() {
        toLogin = order.filter { $0.phase != .logined && $0.phase != .reconnected }
        loginIndex = 0
        inFlight = 0
        pump()
    }

    private func pump() {
        while inFlight < window && loginIndex < toLogin.count {
            let session = toLogin[loginIndex]
            loginIndex += 1
            inFlight += 1
            login(session)
        }
        if inFlight == 0 && loginIndex == toLogin.count && !loggedIn {
            loggedIn = true
            onLoggedIn?()
        }
    }

    private func login(_ session: Session) {
        let resume = session.session.map { Login.Resume(session: $0, seq: session.seq) }
        let message = Login(id: takeID(), room: session.room, token: token, user: .init(id: userID), resume: resume)
        let generation = self.generation
        request(message, id: message.id) { reply in
            self.logged(session, resuming: resume != nil, reply: reply)
            guard generation == self.generation else { return }
            self.inFlight -= 1
            self.pump()
        }
    }

    private func logged(_ session: Session, resuming: Bool, reply: Incoming) {
        guard reply.ok == true, let handle = reply.session, let memberId = reply.memberId else {
            loginFailures += 1
            session.phase = .loginFailed
            return
        }
        session.session = handle
        session.memberId = memberId
        if let state = reply.state {
            session.seq = reply.seq ?? 0
            session.state = state
            session.members = Dictionary((reply.members ?? []).map { ($0.memberId, $0) }, uniquingKeysWith: { $1 })
            session.streams = reply.streams ?? []
            session.extraInfo = reply.extraInfo ?? [:]
        }
        if resuming {
            session.phase = .reconnected
            let now = monotonicNanos()
            if stats.reconnected == 0 { stats.firstReconnected = now }
            stats.lastReconnected = now
            stats.reconnected += 1
            stats.reconnectTimes.append(now)
        } else {
            session.phase = .logined
        }
    }

    // MARK: reading

    private func received(_ text: String) {
        let message: Incoming
        do {
            message = try decoder.decode(Incoming.self, from: Data(text.utf8))
        } catch {
            note("undecodable message: \(error)")
            return
        }
        switch message.op {
        case "reply":
            if let id = message.id, let onReply = pending.removeValue(forKey: id) { onReply(message) }
        case "pong":
            break
        default:
            if let room = message.room, let session = sessions[room] { apply(message, to: session) }
        }
    }

    /// Applies a push once (by seq) to the cached room, then calls the plugins.
    private func apply(_ message: Incoming, to session: Session) {
        if let seq = message.seq {
            if seq <= session.seq { return }
            session.seq = seq
        }
        let kind: Kind?
        switch message.op {
        case "magix":
            if message.from == session.memberId { return }
            kind = .magix
        case "state":
            for (key, value) in message.patch ?? [:] {
                if key == "globalState", case .object(let patch) = value, case .object(var merged)? = session.state[key] {
                    for (name, entry) in patch {
                        if case .null = entry { merged.removeValue(forKey: name) } else { merged[name] = entry }
                    }
                    session.state[key] = .object(merged)
                } else {
                    session.state[key] = value
                }
            }
            kind = .state
        case "userUpdate":
            for member in message.users ?? [] {
                if message.type == "add" { session.members[member.memberId] = member }
                else { session.members.removeValue(forKey: member.memberId) }
            }
            kind = .userUpdate
        case "memberState":
            if let id = message.memberId { session.members[id]?.memberState = message.memberState }
            kind = .state
        case "streamUpdate":
            kind = .streamUpdate
        case "extraInfo":
            kind = .extraInfo
        case "kicked":
            session.phase = .kickOut
            kind = nil
        default:
            kind = nil
        }
        guard let kind else { return }
        for plugin in plugins { plugin(kind, session.room, message) }
    }
}
