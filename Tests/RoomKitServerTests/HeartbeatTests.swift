import Foundation
import RoomKitProtocol
import RoomKitTestSupport
import XCTest

/// PROTOCOL.md §4 items 3–4: membership outlives the socket until the
/// heartbeat timeout (shortened here to 0.6 s, pings every 0.2 s).
final class HeartbeatTests: ServerTestCase {
    private func startShortHeartbeatServer() throws -> ServerHarness {
        try startServer {
            $0.heartbeatInterval = .milliseconds(200)
            $0.heartbeatTimeout = .milliseconds(600)
        }
    }

    /// Two pinging members of `room`; `first` has seen `second`'s add (seq 2).
    private func twoMembers(_ server: ServerHarness, room: String = "r1")
        throws -> (first: RawClient, firstLogin: JSON, second: RawClient, secondLogin: JSON) {
        let (first, firstLogin) = try server.join(room, user: "u1")
        try first.startPinging(every: .milliseconds(200))
        let (second, secondLogin) = try server.join(room, user: "u2")
        try second.startPinging(every: .milliseconds(200))
        try first.waitFor("userUpdate", room: room)
        return (first, firstLogin, second, secondLogin)
    }

    func testBlip_resumeWithinHeartbeatTimeout_isInvisibleToOthers() throws {
        let server = try startShortHeartbeatServer()
        let (first, login, second, _) = try twoMembers(server)
        try first.send(["op": "ping", "t": 0])
        try first.abort()
        let again = try server.connect()
        try again.startPinging(every: .milliseconds(200))
        let session = try XCTUnwrap(login.string("session"))
        let resumed = try again.login("r1", token: makeToken(user: "u1"), user: "u1", resume: (session, 2))
        XCTAssertEqual(resumed["ok"], true)
        XCTAssertEqual(resumed.string("session"), session)
        XCTAssertEqual(resumed.int("memberId"), login.int("memberId"))
        XCTAssertEqual(resumed["recovered"], true)
        XCTAssertEqual(resumed.int("seq"), 2)
        // Well past the heartbeat timeout: the other member saw nothing at all.
        try second.expectNothing(for: 1.0)
        // The resumed session is live on the new connection.
        let seq = try second.ok("setState", room: "r1", ["patch": ["globalState": ["after": "blip"]]]).int("seq")
        XCTAssertEqual(try again.waitFor("state", room: "r1").int("seq"), seq)
        XCTAssertEqual(seq, 3, "no membership events were appended")
    }

    /// A retention shorter than the heartbeat timeout: the session is
    /// forgotten while its member is still visible, and the member leaves
    /// with it (roomd used to drop the session and keep the member for good).
    func testRetentionShorterThanTheHeartbeat_forgetsTheSessionAndItsMemberLeaves() throws {
        let server = try startServer {
            $0.heartbeatInterval = .milliseconds(200)
            $0.heartbeatTimeout = .seconds(30)
            $0.sessionRetention = .milliseconds(300)
        }
        let (first, _, second, secondLogin) = try twoMembers(server)
        try second.close()
        let delete = try first.waitFor("userUpdate", room: "r1", timeout: 3) { $0.string("type") == "delete" }
        XCTAssertEqual(delete["users"]?.arrayValue?.first?.int("memberId"), secondLogin.int("memberId"))
    }

    func testTimeout_givesDeleteThenAddOnResume() throws {
        let server = try startShortHeartbeatServer()
        let (first, login, second, _) = try twoMembers(server)
        let memberId = try XCTUnwrap(login.int("memberId"))
        try first.send(["op": "ping", "t": 0])
        let lastMessage = Date()
        try first.abort()
        let delete = try second.waitFor("userUpdate", room: "r1", timeout: 3) { $0.string("type") == "delete" }
        let silence = Date().timeIntervalSince(lastMessage)
        XCTAssertGreaterThanOrEqual(silence, 0.5, "removed before the heartbeat timeout")
        XCTAssertLessThan(silence, 1.5, "removed long after the heartbeat timeout")
        XCTAssertEqual(delete.array("users").first?.int("memberId"), memberId)
        XCTAssertEqual(delete.int("seq"), 3)

        let again = try server.connect()
        let session = try XCTUnwrap(login.string("session"))
        let resumed = try again.login("r1", token: makeToken(user: "u1"), user: "u1", name: "back",
                                      resume: (session, 2))
        XCTAssertEqual(resumed["ok"], true)
        XCTAssertEqual(resumed.string("session"), session, "the same session continues")
        XCTAssertEqual(resumed.int("memberId"), memberId)
        XCTAssertEqual(resumed.int("seq"), 4)
        let add = try second.waitFor("userUpdate", room: "r1") { $0.string("type") == "add" }
        XCTAssertEqual(add.int("seq"), 4)
        XCTAssertEqual(add.array("users").first?.int("memberId"), memberId)
        XCTAssertEqual(add.array("users").first?.string("name"), "back")
        // The resumed client recovers what it missed: its own delete, then its add.
        XCTAssertEqual(resumed["recovered"], true)
        let replay = [try again.waitFor("userUpdate", room: "r1"), try again.waitFor("userUpdate", room: "r1")]
        XCTAssertEqual(replay.map { $0.int("seq") }, [3, 4])
        XCTAssertEqual(replay.map { $0.string("type") }, ["delete", "add"])
    }

    func testCleanCloseWithoutLogout_keepsMemberUntilHeartbeatTimeout() throws {
        let server = try startShortHeartbeatServer()
        let (first, login, second, _) = try twoMembers(server)
        try first.close()
        XCTAssertEqual(try first.waitForClose(), 1000)
        try second.expectNothing(for: 0.3)
        let delete = try second.waitFor("userUpdate", room: "r1", timeout: 2) { $0.string("type") == "delete" }
        XCTAssertEqual(delete.array("users").first?.int("memberId"), login.int("memberId"))
    }

    func testSilentConnection_isClosed1001_andItsMemberRemoved() throws {
        let server = try startShortHeartbeatServer()
        let (first, login, second, _) = try twoMembers(server)
        try first.stopPinging()
        XCTAssertEqual(try first.waitForClose(timeout: 3), 1001)
        let delete = try second.waitFor("userUpdate", room: "r1", timeout: 2) { $0.string("type") == "delete" }
        XCTAssertEqual(delete.array("users").first?.int("memberId"), login.int("memberId"))
    }

    /// A peer that stops sending *and* reading (a frozen host, a dead NAT
    /// entry) never answers the close handshake. Its member must still go at
    /// heartbeatTimeout after its last message, not when the handshake times
    /// out (lws waits about 5 s): the proxy's blackhole keeps the socket open
    /// and swallows everything both ways.
    func testFrozenPeer_isRemovedAtHeartbeatTimeout_notAfterTheCloseHandshake() throws {
        let server = try startShortHeartbeatServer()
        let proxy = FaultProxy(targetPort: server.port)
        defer { proxy.stop() }
        let first = try server.connect(port: proxy.port)
        let login = try first.login("r1", token: makeToken(user: "u1"), user: "u1")
        XCTAssertEqual(login["ok"], true)
        let (second, _) = try server.join("r1", user: "u2")
        try second.startPinging(every: .milliseconds(200))
        try first.send(["op": "ping", "t": 0])
        _ = try first.waitFor("pong")
        let lastMessage = Date()
        proxy.setMode(.blackhole)
        let delete = try second.waitFor("userUpdate", room: "r1", timeout: 6) { $0.string("type") == "delete" }
        let silence = Date().timeIntervalSince(lastMessage)
        XCTAssertEqual(delete.array("users").first?.int("memberId"), login.int("memberId"))
        XCTAssertGreaterThanOrEqual(silence, 0.5, "removed before the heartbeat timeout")
        // 0.6 s timeout + the sweep tick, with room for a loaded CI machine;
        // waiting for the handshake took 5.6 s.
        XCTAssertLessThan(silence, 2.5, "the removal waited for the close handshake")
        try second.expectNothing("userUpdate", for: 0.3)
    }

    func testTimeout_removesTheUsersStreams() throws {
        let server = try startShortHeartbeatServer()
        let (first, _, second, _) = try twoMembers(server)
        try first.ok("publishStream", room: "r1", ["stream": ["id": "cam-1", "extraInfo": "hd"]])
        try second.waitFor("streamUpdate", room: "r1") { $0.string("type") == "add" }
        try first.abort()
        let delete = try second.waitFor("userUpdate", room: "r1", timeout: 3) { $0.string("type") == "delete" }
        let streams = try second.waitFor("streamUpdate", room: "r1") { $0.string("type") == "delete" }
        XCTAssertEqual(streams.int("seq"), delete.int("seq").map { $0 + 1 })
        XCTAssertEqual(streams["streams"], [["id": "cam-1", "userId": "u1", "extraInfo": "hd"]])
        let (_, late) = try server.join("r1", user: "u3")
        XCTAssertEqual(late["streams"], [])
        XCTAssertEqual(late.array("members").compactMap { $0.string("userId") }, ["u2", "u3"])
    }

    func testPingingMember_isNeverRemoved() throws {
        let server = try startShortHeartbeatServer()
        let (_, _, second, _) = try twoMembers(server)
        try second.expectNothing(for: 1.5)
        let (_, late) = try server.join("r1", user: "u3")
        XCTAssertEqual(late.array("members").count, 3)
    }
}
