import Foundation
import RoomKitLoop
import RoomKitProtocol
@testable import RoomKitSimulator
import XCTest

/// roomd and the simulator's server share their session rules
/// (`SessionRules`); this drives one scripted session against a real
/// `roomd` process over 127.0.0.1 and against `SimulatedServer`, and
/// compares what each server sent to each connection: the pushes (types,
/// codes, members, in order) and the replies (ok or the error code). IDs,
/// sequence numbers and times are normalised away.
final class SameScriptTests: ServerTestCase {
    /// The clocks both servers run with (ms): short, so the real one takes seconds.
    static let heartbeatTimeout: Int64 = 1_500
    static let sessionRetention: Int64 = 3_000
    /// How long the short-lived token of the expiry step lives (s).
    static let tokenLifetime: Int64 = 3

    func testOneScriptedSession_givesTheSamePushes_fromRoomdAndFromTheSimulator() throws {
        let directory = try temporaryDirectory()
        let roomd = try startRoomd(dataDirectory: directory, extra: [
            "--heartbeat-interval", "0.3", "--heartbeat-timeout", "\(Double(Self.heartbeatTimeout) / 1000)",
            "--session-retention", "\(Double(Self.sessionRetention) / 1000)",
        ])
        let side = try makeClientSide()
        let real = RoomdDriver(side: side, port: roomd.port)
        let simulated = SimulatorDriver()
        let fromRoomd = try Self.run(real)
        let fromSimulator = try Self.run(simulated)
        XCTAssertFalse(fromRoomd.isEmpty)
        for name in fromRoomd.keys.sorted() {
            XCTAssertEqual(fromSimulator[name] ?? [], fromRoomd[name] ?? [], "what \(name) heard (simulator, then roomd)")
        }
        XCTAssertEqual(Set(fromSimulator.keys), Set(fromRoomd.keys))
        // The script's own expectations, so the two cannot agree on nothing.
        XCTAssertEqual(fromRoomd["a"], ["reply ok fresh", "kicked 1002050"])
        XCTAssertEqual(fromRoomd["b"], ["reply ok fresh"])
        XCTAssertEqual(fromRoomd["k"], ["reply error 1002050"])
        // The resume replays what b missed: its member's leave, then its rejoin.
        XCTAssertEqual(fromRoomd["c"], ["reply ok recovered", "userUpdate delete u#3", "userUpdate add u#3"])
        XCTAssertEqual(fromRoomd["e"], ["reply ok fresh", "reply error 1009007", "reply ok"])
        XCTAssertEqual(fromRoomd["observer"], [
            "reply ok fresh",
            "userUpdate add u#2", // a logs in
            "userUpdate delete u#2", "userUpdate add u#3", // b logs in as the same user: a is kicked
            "userUpdate delete u#3", // b went silent past the heartbeat timeout
            "userUpdate add u#3", // c resumed b's session within retention
            "userUpdate delete u#3", // c left; its session is forgotten after retention
            "userUpdate add u#4", // d's resume of it is a fresh login
            "userUpdate delete u#4", // d's token expired
            "userUpdate add u#5", "userUpdate delete u#5", // e logs in and out
        ])
        XCTAssertEqual(fromRoomd["d"], ["reply ok fresh", "tokenWillExpire", "kicked 1002056"])
    }

    /// The script: what happens to user "u" in room "r" while "o" watches.
    /// Returns what each connection heard, normalised.
    static func run(_ server: some ScriptedServer) throws -> [String: [String]] {
        try server.connect("observer")
        try server.login("observer", user: "o")
        try server.connect("a")
        let kicked = try server.login("a", user: "u")
        try server.connect("b")
        let session = try server.login("b", user: "u")  // a is kicked 1002050
        try server.close("a")
        try server.connect("k")
        try server.login("k", user: "u", resume: kicked)  // refused with the kick's code
        try server.silence("b")  // past the heartbeat timeout: b's member leaves
        try server.connect("c")
        let resumed = try server.login("c", user: "u", resume: session)
        XCTAssertEqual(resumed.session, session.session, "\(server): c resumed b's session")
        try server.close("c")
        try server.waitPastRetention()
        try server.connect("d")
        let fresh = try server.login("d", user: "u", resume: session, shortToken: true)
        XCTAssertNotEqual(fresh.session, session.session, "\(server): the forgotten session cannot be resumed")
        try server.waitForTokenExpiry("d")
        try server.connect("e")
        try server.login("e", user: "u")
        try server.login("e", user: "u")  // the same room again on e's connection: refused, nobody kicked
        try server.logout("e")
        return try server.heard().mapValues { $0.compactMap(normalise) }
    }

    /// A message as the comparison sees it; nil for what it ignores (pongs, hello replies).
    static func normalise(_ json: JSON) -> String? {
        switch json.op {
        case "pong":
            return nil
        case "reply":
            if json["hello"] != nil || json.string("connection") != nil { return nil }
            if json["ok"] == false { return "reply error \(json["error"]?.int("code") ?? json.int("code") ?? 0)" }
            if let recovered = json["recovered"] { return recovered == true ? "reply ok recovered" : "reply ok fresh" }
            return "reply ok"
        case "userUpdate":
            let users = json["users"]?.arrayValue ?? []
            let names = users.map { "\($0.string("userId") ?? "?")#\($0.int("memberId") ?? 0)" }
            return "userUpdate \(json.string("type") ?? "?") \(names.joined(separator: ","))"
        case "kicked":
            return "kicked \(json.int("code") ?? 0)"
        default:
            return json.op ?? "?"
        }
    }
}

/// One server the script can drive. Connections are named; every one
/// pings (keeps its connection alive) until `silence`d.
/// A session to resume: its ID and the last seq its client saw.
struct Resume {
    var session: String
    var seq: Int64
}

protocol ScriptedServer: CustomStringConvertible {
    func connect(_ name: String) throws
    /// Logs `name` in as `user` to room "r" (resuming `resume`, with a token
    /// that expires in `SameScriptTests.tokenLifetime` s when `shortToken`);
    /// returns the session ID and the reply's seq.
    @discardableResult
    func login(_ name: String, user: String, resume: Resume?, shortToken: Bool) throws -> Resume
    func logout(_ name: String) throws
    /// Closes the connection (a close handshake).
    func close(_ name: String) throws
    /// Stops the connection's pings and waits past the heartbeat timeout.
    func silence(_ name: String) throws
    func waitPastRetention() throws
    /// Waits until the short-lived token of `name` expired.
    func waitForTokenExpiry(_ name: String) throws
    /// What each connection heard, in order.
    func heard() throws -> [String: [JSON]]
}

extension ScriptedServer {
    @discardableResult
    func login(_ name: String, user: String, resume: Resume? = nil, shortToken: Bool = false) throws -> Resume {
        try login(name, user: user, resume: resume, shortToken: shortToken)
    }
}

/// The script against a real `roomd` process: raw WebSocket clients over
/// 127.0.0.1, real time (the clocks are short).
final class RoomdDriver: ScriptedServer {
    let side: ClientSide
    let port: Int
    private var clients: [String: RawClient] = [:]
    var description: String { "roomd" }

    init(side: ClientSide, port: Int) {
        self.side = side
        self.port = port
    }

    /// Lets the server's pushes of the last step arrive.
    private func settle() { Thread.sleep(forTimeInterval: 0.3) }

    private func client(_ name: String) throws -> RawClient {
        guard let client = clients[name] else { throw TestTimeout(description: "no connection \(name)") }
        return client
    }

    func connect(_ name: String) throws {
        let client = try side.connect(port: port)
        try client.startPinging(every: .milliseconds(250))
        clients[name] = client
    }

    func login(_ name: String, user: String, resume: Resume?, shortToken: Bool) throws -> Resume {
        let token = makeToken(user: user, ttl: shortToken ? SameScriptTests.tokenLifetime : 3600)
        let reply = try client(name).login("r", token: token, user: user, resume: resume.map { ($0.session, $0.seq) })
        settle()
        return Resume(session: reply.string("session") ?? "?", seq: reply.int("seq") ?? 0)
    }

    func logout(_ name: String) throws {
        _ = try client(name).request("logout", room: "r")
        settle()
    }

    func close(_ name: String) throws {
        try client(name).close()
        _ = try client(name).waitForClose()
        settle()
    }

    func silence(_ name: String) throws {
        try client(name).stopPinging()
        Thread.sleep(forTimeInterval: Double(SameScriptTests.heartbeatTimeout) / 1000)
        _ = try client(name).waitForClose()
        settle()
    }

    func waitPastRetention() throws {
        Thread.sleep(forTimeInterval: Double(SameScriptTests.sessionRetention) / 1000)
        settle()
    }

    func waitForTokenExpiry(_ name: String) throws {
        let client = try client(name)
        let deadline = Date().addingTimeInterval(Double(SameScriptTests.tokenLifetime) + 3)
        while try !client.history().contains(where: { $0.op == "kicked" }) {
            guard Date() < deadline else { throw TestTimeout(description: "\(name)'s token did not expire") }
            Thread.sleep(forTimeInterval: 0.05)
        }
        settle()
    }

    func heard() throws -> [String: [JSON]] {
        try clients.mapValues { try $0.history() }
    }
}

/// The script against the simulator's server: scripted connections
/// (`SimulatedServer.connectScripted`) on a virtual clock moved in 100 ms steps.
final class SimulatorDriver: ScriptedServer {
    private let server = SimulatedServer()
    private var connections: [String: SimulatedServer.Connection] = [:]
    private var silent: Set<String> = []
    private var now: Int64 = 1_000
    private var nextID: Int64 = 1
    var description: String { "the simulator" }

    init() {
        server.settings.heartbeatInterval = 300
        server.settings.heartbeatTimeout = SameScriptTests.heartbeatTimeout
        server.settings.sessionRetention = SameScriptTests.sessionRetention
        let clock = { [unowned self] in self.now }
        server.clock = clock
        server.wall = clock
    }

    private func connection(_ name: String) throws -> SimulatedServer.Connection {
        guard let connection = connections[name] else { throw TestTimeout(description: "no connection \(name)") }
        return connection
    }

    /// Sends a request and returns its reply.
    @discardableResult
    private func request(_ name: String, _ op: String, room: String? = nil, _ fields: [String: JSON] = [:]) throws -> JSON {
        let connection = try connection(name)
        var message = fields
        message["op"] = .string(op)
        message["id"] = .int(nextID)
        if let room { message["room"] = .string(room) }
        let id = nextID
        nextID += 1
        _ = connection.send(WebSocketFrame(bytes: JSON.object(message).serialized()))
        server.pump()
        guard let reply = connection.heard?.last(where: { $0.op == "reply" && $0.int("id") == id }) else {
            throw TestTimeout(description: "no reply to \(op) on \(name)")
        }
        return reply
    }

    /// Moves virtual time by `milliseconds`, 100 ms at a time; the
    /// connections not silenced ping on the way.
    private func pass(_ milliseconds: Int64) throws {
        let end = now + milliseconds
        while now < end {
            now = min(end, now + 100)
            for (name, connection) in connections where connection.open && !silent.contains(name) {
                _ = connection.send(WebSocketFrame(bytes: JSON.object(["op": "ping", "t": 1]).serialized()))
            }
            server.pump()
            server.advance()
            server.pump()
        }
    }

    func connect(_ name: String) throws {
        connections[name] = server.connectScripted()
        try request(name, "hello", ["client": "roomkit-tests/1"])
    }

    func login(_ name: String, user: String, resume: Resume?, shortToken: Bool) throws -> Resume {
        let fields = RawClient.loginFields(token: "t", user: user, resume: resume.map { ($0.session, $0.seq) })
        let reply = try request(name, "login", room: "r", fields)
        let session = reply.string("session") ?? "?"
        if shortToken, let warning = server.sessions[session]?.rules.announceExpiry(
            at: now + SameScriptTests.tokenLifetime * 1000, now: now) {
            // The simulator's tokens live until a scenario announces their end
            // (the scenario step warns every session of the room; here, only this one).
            server.send(warning, to: session)
            server.pump()
        }
        try pass(300)
        return Resume(session: session, seq: reply.int("seq") ?? 0)
    }

    func logout(_ name: String) throws {
        try request(name, "logout", room: "r")
        try pass(300)
    }

    func close(_ name: String) throws {
        try connection(name).close(code: 1000, reason: "test", discardQueued: false)
        try pass(300)
    }

    func silence(_ name: String) throws {
        silent.insert(name)
        try pass(SameScriptTests.heartbeatTimeout + 300)
    }

    func waitPastRetention() throws {
        try pass(SameScriptTests.sessionRetention + 300)
    }

    func waitForTokenExpiry(_ name: String) throws {
        try pass(SameScriptTests.tokenLifetime * 1000 + 300)
    }

    func heard() throws -> [String: [JSON]] {
        connections.mapValues { $0.heard ?? [] }
    }
}
