import Foundation
import RoomKit
import RoomKitLoop
import RoomKitProtocol

/// An in-memory room server for the simulator: PROTOCOL.md's connection,
/// session and room rules (hello, heartbeats, login and resume with replay,
/// duplicate-login kicks, membership that outlives the socket, retention,
/// token expiry) kept as plain values on the virtual clock. Rooms apply
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
        public init() {}
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
        init(server: SimulatedServer, id: Int) {
            self.server = server
            self.id = id
        }
        func send(_ frame: WebSocketFrame) -> Bool {
            guard open else { return false }
            server.inbox.append((self, frame.bytes))
            return true
        }
        func close(code: UInt16, reason: String, discardQueued: Bool) { server.detach(self) }
        func abort() { server.detach(self) }
    }

    struct Session {
        let id: String
        let room: String
        let user: LoginUser
        let memberId: Int64
        var writable: Bool
        var connection: Connection?
        /// When it lost its connection (nil: attached).
        var detachedAt: Int64?
        /// Whether its member is still in the room.
        var present = true
        var tokenExpiresAt: Int64?
        /// Ended by a kick: a resume is refused with this code.
        var endedBy: ErrorCode?
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
        let connection = Connection(server: self, id: nextConnection)
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

    func detach(_ connection: Connection) {
        guard connection.open else { return }
        connection.open = false
        openConnections.removeAll { $0 === connection }
        let now = clock()
        for (id, session) in sessions where session.connection === connection {
            sessions[id]?.connection = nil
            sessions[id]?.detachedAt = now
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
                if connection.open { handle(bytes, from: connection) }
                continue
            }
            let delivery = deliveries.removeFirst()
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

    /// Time passed: detached members leave after the heartbeat timeout,
    /// sessions end after retention, unrenewed tokens expire (kick 1002056).
    func advance() {
        let now = clock()
        for id in sessions.keys.sorted() {
            guard let session = sessions[id] else { continue }
            if let expiry = session.tokenExpiresAt, expiry <= now, session.endedBy == nil {
                end(id, kick: .kickedTokenExpired, reason: "token expired")
                continue
            }
            if let detachedAt = session.detachedAt {
                if session.present, now - detachedAt >= settings.heartbeatTimeout {
                    removeMember(of: id)
                }
                if now - detachedAt >= settings.sessionRetention {
                    sessions.removeValue(forKey: id)
                }
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
        for (id, session) in sessions.sorted(by: { $0.key < $1.key }) where session.room == room && session.endedBy == nil {
            end(id, kick: code, reason: reason)
        }
    }

    /// Warns the bot that its token for `room` expires in `remaining` ms; it
    /// is kicked with 1002056 then unless it renews.
    public func tokenWillExpire(room: String, in remaining: Int64) {
        for (id, session) in sessions.sorted(by: { $0.key < $1.key }) where session.room == room && session.endedBy == nil {
            sessions[id]?.tokenExpiresAt = clock() + remaining
            if let connection = session.connection {
                deliveries.append(.message(connection, ServerMessage.tokenWillExpire(room: room, remaining: remaining / 1000)))
            }
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
        for id in sessions.keys.sorted() where sessions[id]?.present == true { removeMember(of: id) }
        sessions.removeAll()
    }

    private func dropConnections(_ why: String) {
        for connection in openConnections {
            detach(connection)
            deliveries.append(.closed(connection, why))
        }
    }
}
