import Foundation
import RoomKit
import RoomKitLoop
import RoomKitProtocol
import RoomKitServerCore

/// An in-memory room server for the simulator: PROTOCOL.md's connection,
/// session and room rules (hello, heartbeats, login and resume with replay,
/// duplicate-login kicks, membership that outlives the socket, retention,
/// token expiry) on the virtual clock. The session rules are roomd's own
/// (`SessionRules`, RoomKitServerCore); this type only carries out their
/// answers, in memory instead of SQLite and sockets. Rooms apply
/// events with the same `RoomContentModel.apply` the client, the player and
/// roomd use. Scene requests (`putScenes` and the like) are answered with
/// 1009500 "not simulated".
///
/// Loop thread only (the host's); the `Simulation` drives it.
public final class SimulatedServer: @unchecked Sendable {
    // @unchecked Sendable: used on the simulation loop's thread only (the
    // Simulation reaches it through runAndWait).
    /// Server settings, as a hello reply advertises them (ms).
    public struct Settings: Sendable {
        public var heartbeatInterval: Int64 = 10_000
        public var heartbeatTimeout: Int64 = 90_000
        public var sessionRetention: Int64 = 1_200_000
        /// A token is warned of this long before it expires (roomd's `--token-expiry-notice`).
        public var tokenExpiryNotice: Int64 = 30_000
        public init() {}

        /// The clocks the session rules apply.
        var clocks: SessionClocks {
            SessionClocks(heartbeatTimeout: heartbeatTimeout, sessionRetention: sessionRetention,
                          tokenExpiryNotice: tokenExpiryNotice)
        }
    }

    /// Something the bot did, as the server saw it (for `expect`'s `action`).
    public struct Action: Sendable {
        /// Virtual time (ms since the simulation began).
        public let at: Int64
        /// `{"op", "room", …the request's fields}`.
        public let fields: [String: JSON]
    }

    final class Connection: EngineConnection {
        unowned let server: SimulatedServer
        let id: Int
        var open = true
        var greeted = false
        /// Virtual time of its last message (the heartbeat timeout counts from here).
        var lastMessageAt: Int64
        /// For a connection a script drives instead of the host
        /// (`connectScripted`): everything the server sent it, in order.
        var heard: [JSON]?
        init(server: SimulatedServer, id: Int, now: Int64) {
            self.server = server
            self.id = id
            lastMessageAt = now
        }
        func send(_ frame: WebSocketFrame) -> Bool {
            guard open else { return false }
            server.inbox.append((self, frame.bytes))
            return true
        }
        func close(code: UInt16, reason: String, discardQueued: Bool) { server.detach(self) }
        func abort() { server.detach(self) }
    }

    /// A session: what roomd's `ServerSession` holds, in memory. Its state
    /// is the shared `SessionRules`; the simulator's tokens never expire
    /// (`Int64.max`) unless a scenario announces an expiry.
    struct Session {
        let room: String
        let user: LoginUser
        let memberId: Int64
        var writable: Bool
        var connection: Connection?
        var rules: SessionRules
        var id: String { rules.id }
    }

    struct Room {
        var content = RoomSnapshot(state: .initial)
        var seq: Int64 = 0
        /// Every event pushed, for resume replays: (seq, push JSON).
        var log: [(seq: Int64, push: JSON)] = []
        var nextMemberId: Int64 = 1
        /// Simulated users (not the bot) and their member IDs.
        var users: [String: Int64] = [:]
    }

    public var settings = Settings()
    /// What the bot did, in the order the server took it.
    public internal(set) var actions: [Action] = []
    var clock: () -> Int64 = { 0 }
    var wall: () -> Int64 = { 0 }
    var rooms: [String: Room] = [:]
    var sessions: [String: Session] = [:]
    private var nextConnection = 1
    var nextSession = 1
    private var refuseUntil: Int64 = 0
    private weak var host: RoomHost?
    private var openConnections: [Connection] = []
    /// Messages from clients, not yet handled.
    fileprivate(set) var inbox: [(Connection, [UInt8])] = []
    /// What the host will hear next: opens, messages and closes, in order.
    var deliveries: [Delivery] = []
    /// A resume's replay, sent right after its reply.
    var pendingReplay: [JSON] = []
    /// A token warning the rules asked for with a reply, sent right after it (and the replay).
    var pendingWarning: (String, SessionRules.TokenResult)?

    enum Delivery {
        case opened(Connection)
        case message(Connection, JSON)
        case closed(Connection, String)
    }

    public init() {}

    var isIdle: Bool { inbox.isEmpty && deliveries.isEmpty }

    // MARK: Connections

    func connect(host: RoomHost) -> Connection {
        self.host = host
        let connection = Connection(server: self, id: nextConnection, now: clock())
        nextConnection += 1
        if clock() < refuseUntil {
            connection.open = false
            deliveries.append(.closed(connection, "connection refused (simulated outage)"))
        } else {
            openConnections.append(connection)
            deliveries.append(.opened(connection))
        }
        return connection
    }

    /// A connection that a script drives instead of the host: the script
    /// puts messages in with `send`, and reads what the server answered in
    /// `heard` after `pump`. The tests drive roomd and the simulator with
    /// the same script this way and compare what each sent.
    func connectScripted() -> Connection {
        let connection = Connection(server: self, id: nextConnection, now: clock())
        nextConnection += 1
        connection.heard = []
        openConnections.append(connection)
        return connection
    }

    func detach(_ connection: Connection) {
        guard connection.open else { return }
        connection.open = false
        openConnections.removeAll { $0 === connection }
        let now = clock()
        for (id, session) in sessions where session.connection === connection {
            sessions[id]?.connection = nil
            _ = sessions[id]?.rules.detach(now: now, lastSeen: connection.lastMessageAt)
        }
    }

    /// Handles every queued message and hands the host what it should hear.
    /// Returns whether anything happened.
    @discardableResult
    func pump() -> Bool {
        var worked = false
        while !inbox.isEmpty || !deliveries.isEmpty {
            worked = true
            if !inbox.isEmpty {
                let (connection, bytes) = inbox.removeFirst()
                if connection.open {
                    connection.lastMessageAt = clock()
                    handle(bytes, from: connection)
                }
                continue
            }
            let delivery = deliveries.removeFirst()
            if case .message(let connection, let json) = delivery, connection.heard != nil {
                if connection.open { connection.heard?.append(json) }
                continue
            }
            guard let host else { continue }
            switch delivery {
            case .opened(let connection):
                host.transportDidOpen(connection)
            case .message(let connection, let json):
                guard connection.open else { continue }
                host.transportDidReceive(connection, WebSocketMessage(bytes: json.serialized(), isBinary: false))
            case .closed(let connection, let why):
                host.transportDidClose(connection, why: why)
            }
        }
        return worked
    }

    /// Time passed: connections silent past the heartbeat timeout are
    /// given up, and every session's clocks tick (`SessionRules.tick`):
    /// detached members leave, retention forgets, tokens warn and expire.
    func advance() {
        let now = clock()
        let clocks = settings.clocks
        for connection in openConnections where clocks.isSilent(lastMessageAt: connection.lastMessageAt, now: now) {
            detach(connection)
            deliveries.append(.closed(connection, "heartbeat timeout"))
        }
        for id in sessions.keys.sorted() {
            guard let result = sessions[id]?.rules.tick(now: now, clocks: clocks) else { continue }
            switch result {
            case .none:
                break
            case .warn(let remaining):
                warn(id, remaining: remaining)
            case .kick(let code, let warnFirst):
                if let warnFirst { warn(id, remaining: warnFirst) }
                kicked(id, code: code, reason: "token expired", notify: true, leave: true)
            case .leave:
                pushLeave(of: id)
            case .forget(let leave):
                if leave { pushLeave(of: id) }
                sessions.removeValue(forKey: id)
            }
        }
    }

    // MARK: Scenario steps (the world around the bot)

    /// Another user joins `room`; returns its member ID.
    @discardableResult
    public func join(room: String, user: String, name: String? = nil) -> Int64 {
        var state = rooms[room] ?? Room()
        if let existing = state.users[user] { return existing }
        let memberId = state.nextMemberId
        state.nextMemberId += 1
        state.users[user] = memberId
        rooms[room] = state
        let member = Member(memberId: memberId, userId: user, name: name, payload: nil, memberState: [:])
        record(room, .userUpdate(.add, users: [member]), except: nil)
        return memberId
    }

    /// Another user leaves `room`.
    public func leave(room: String, user: String) {
        guard let memberId = rooms[room]?.users.removeValue(forKey: user),
              let member = rooms[room]?.content.members.first(where: { $0.memberId == memberId }) else { return }
        record(room, .userUpdate(.delete, users: [member]), except: nil)
    }

    /// Another user (joined first if needed) sends magix `event`.
    public func magix(room: String, from user: String, event: String, payload: JSON, to: [String]? = nil) {
        let from = join(room: room, user: user)
        record(room, .magix(from: from, event: event, payload: payload), except: nil, to: to)
    }

    /// Another user (joined first if needed) changes the room state.
    public func setState(room: String, from user: String, patch: [String: JSON]) throws(ProtocolError) {
        let from = join(room: room, user: user)
        _ = try rooms[room]?.content.state.applying(patch: patch)
        record(room, .state(from: from, patch: patch), except: nil)
    }

    /// Kicks the bot's session in `room` (1002050, 1002055, 1002056).
    public func kick(room: String, code: ErrorCode, reason: String) {
        for (id, session) in sessions.sorted(by: { $0.key < $1.key }) where session.room == room && session.rules.endedCode == nil {
            end(id, kick: code, reason: reason)
        }
    }

    /// Warns the bot that its token for `room` expires in `remaining` ms; it
    /// is kicked with 1002056 then unless it renews.
    public func tokenWillExpire(room: String, in remaining: Int64) {
        for (id, session) in sessions.sorted(by: { $0.key < $1.key }) where session.room == room && session.rules.endedCode == nil {
            guard let announced = sessions[id]?.rules.announceExpiry(at: clock() + remaining, now: clock()) else { continue }
            send(announced, to: id)
        }
    }

    /// Pushes an `error` (§8) on every open connection.
    public func pushError(code: ErrorCode, message: String) {
        for connection in openConnections {
            deliveries.append(.message(connection, ServerMessage.error(ProtocolError(code: code, message: message))))
        }
    }

    /// Drops every connection; new ones are refused for `duration` ms.
    public func disconnect(for duration: Int64) {
        refuseUntil = clock() + duration
        dropConnections("simulated network outage")
    }

    /// A restart that lost every session: connections drop, resumes become fresh logins.
    public func restart() {
        dropConnections("server restarted")
        for id in sessions.keys.sorted() {
            guard let result = sessions[id]?.rules.logout(now: clock()) else { continue }
            switch result {
            case .forget(let leave): if leave { pushLeave(of: id) }
            }
        }
        sessions.removeAll()
    }

    private func dropConnections(_ why: String) {
        for connection in openConnections {
            detach(connection)
            deliveries.append(.closed(connection, why))
        }
    }
}
