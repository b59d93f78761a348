import Foundation
import RoomKitProtocol
import XCTest

/// PROTOCOL.md §10: healthz, metrics, admin API and HTTP errors. Recording
/// content is in RecordingTests.
final class HTTPAPITests: ServerTestCase {
    private let admin = makeToken(user: "ops", role: .admin)

    private func assertErrorBody(_ reply: HTTPReply, status: Int, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertEqual(reply.status, status, reply.text, file: file, line: line)
        XCTAssertNotNil(reply.json?.int("code"), "body \(reply.text)", file: file, line: line)
        XCTAssertNotNil(reply.json?.string("message"), "body \(reply.text)", file: file, line: line)
    }

    func testHealthz_answersOk() throws {
        let server = try startServer()
        let reply = try server.http("GET", "/healthz")
        XCTAssertEqual(reply.status, 200)
        XCTAssertEqual(reply.text, "ok")
    }

    func testMetrics_isPrometheusTextWithTheNamedMetrics() throws {
        let server = try startServer()
        let (a, _) = try server.join("r1", user: "u1")
        _ = try server.join("r1", user: "u2")
        _ = try server.join("r2", user: "u1")
        try a.ok("setState", room: "r1", ["patch": ["globalState": ["a": 1]]])
        XCTAssertEqual(try a.login("r3", token: "bad", user: "u1").code, 1_002_033)
        _ = try server.join("r1", user: "u2")  // kicks the older u2 session
        let reply = try server.http("GET", "/metrics")
        XCTAssertEqual(reply.status, 200)
        XCTAssertTrue(reply.headers["content-type"]?.hasPrefix("text/plain") ?? false, "\(reply.headers)")
        var values: [String: Double] = [:]
        for line in reply.text.split(separator: "\n") where !line.hasPrefix("#") {
            let parts = line.split(separator: " ")
            XCTAssertEqual(parts.count, 2, "a sample line is `name value`: \(line)")
            values[String(parts[0])] = parts.count == 2 ? Double(parts[1]) : nil
        }
        let expected: [String: Double] = [
            "roomd_connections": 4, "roomd_rooms": 2, "roomd_members": 3, "roomd_sessions": 4,
            "roomd_events_total": 6, "roomd_kicks_total": 1, "roomd_auth_failures_total": 1,
        ]
        for (name, value) in expected {
            XCTAssertEqual(values[name], value, name)
            XCTAssertTrue(reply.text.contains("# TYPE \(name) "), "TYPE line for \(name)")
            XCTAssertTrue(reply.text.contains("# HELP \(name) "), "HELP line for \(name)")
        }
        XCTAssertNotNil(values["roomd_events_per_second"])
        XCTAssertGreaterThan(values["roomd_bytes_out_total"] ?? 0, 0)
    }

    func testUnknownEndpoint_is404WithCodeAndMessage() throws {
        let server = try startServer()
        assertErrorBody(try server.http("GET", "/v1/nothing"), status: 404)
    }

    func testAdminKick_sendsKicked1002055_andAnswersTheCount() throws {
        let server = try startServer()
        let (target, login) = try server.join("r1", user: "u1")
        let (watcher, _) = try server.join("r1", user: "u2")
        let reply = try server.http("POST", "/v1/admin/rooms/r1/kick", token: admin,
                                    body: #"{"user":"u1","reason":"spamming"}"#)
        XCTAssertEqual(reply.status, 200, reply.text)
        XCTAssertEqual(reply.json, ["kicked": 1])
        let kicked = try target.waitFor("kicked", room: "r1")
        XCTAssertEqual(kicked.code, 1_002_055)
        XCTAssertEqual(kicked.string("reason"), "spamming")
        let delete = try watcher.waitFor("userUpdate", room: "r1") { $0.string("type") == "delete" }
        XCTAssertEqual(delete.array("users").first?.int("memberId"), login.int("memberId"))
        // The ended session cannot resume; nobody is left to kick.
        let back = try server.connect()
        XCTAssertEqual(try back.login("r1", token: makeToken(user: "u1"), user: "u1",
                                      resume: (try XCTUnwrap(login.string("session")), 1)).code, 1_002_055)
        XCTAssertEqual(try server.http("POST", "/v1/admin/rooms/r1/kick", token: admin, body: #"{"user":"u1"}"#).json,
                       ["kicked": 0])
        XCTAssertEqual(try server.http("POST", "/v1/admin/rooms/r1/kick", token: admin, body: #"{"user":"nobody"}"#).json,
                       ["kicked": 0])
        XCTAssertEqual(try server.http("POST", "/v1/admin/rooms/nowhere/kick", token: admin, body: #"{"user":"u1"}"#).json,
                       ["kicked": 0])
    }

    func testAdminKick_reachesADetachedSessionToo() throws {
        let server = try startServer()
        let (target, login) = try server.join("r1", user: "u1")
        try target.close()
        _ = try target.waitForClose()
        let reply = try server.http("POST", "/v1/admin/rooms/r1/kick", token: admin, body: #"{"user":"u1"}"#)
        XCTAssertEqual(reply.json, ["kicked": 1])
        let back = try server.connect()
        XCTAssertEqual(try back.login("r1", token: makeToken(user: "u1"), user: "u1",
                                      resume: (try XCTUnwrap(login.string("session")), 1)).code, 1_002_055)
    }

    func testAdminKick_authorization() throws {
        let server = try startServer()
        let path = "/v1/admin/rooms/r1/kick"
        let body = #"{"user":"u1"}"#
        assertErrorBody(try server.http("POST", path, body: body), status: 401)
        assertErrorBody(try server.http("POST", path, token: "not-a-token", body: body), status: 401)
        assertErrorBody(try server.http("POST", path, token: makeToken(user: "ops", role: .admin, secret: "nope"), body: body),
                        status: 401)
        assertErrorBody(try server.http("POST", path, token: makeToken(user: "w", role: .writer), body: body), status: 403)
        assertErrorBody(try server.http("POST", path, token: makeToken(user: "ops", room: "r2", role: .admin), body: body),
                        status: 403)
        XCTAssertEqual(try server.http("POST", path, token: makeToken(user: "ops", room: "r1", role: .admin), body: body).status,
                       200, "an admin token for that room")
        assertErrorBody(try server.http("POST", path, token: admin, body: "{not json"), status: 400)
    }

    func testAdminRooms_listsRoomsWithMemberCountAndSeq() throws {
        let server = try startServer()
        let (a, _) = try server.join("lobby", user: "u1")
        _ = try server.join("lobby", user: "u2")
        _ = try server.join("annex", user: "u3")
        try a.ok("setState", room: "lobby", ["patch": ["globalState": ["x": 1]]])
        try a.ok("logout", room: "lobby")
        let reply = try server.http("GET", "/v1/admin/rooms", token: admin)
        XCTAssertEqual(reply.status, 200)
        XCTAssertTrue(reply.headers["content-type"]?.contains("json") ?? false)
        XCTAssertEqual(reply.json, [["room": "annex", "members": 1, "seq": 1], ["room": "lobby", "members": 1, "seq": 4]])
        assertErrorBody(try server.http("GET", "/v1/admin/rooms"), status: 401)
        assertErrorBody(try server.http("GET", "/v1/admin/rooms", token: makeToken(user: "u1")), status: 403)
        assertErrorBody(try server.http("GET", "/v1/admin/rooms", token: makeToken(user: "ops", room: "lobby", role: .admin)),
                        status: 403, line: #line)
    }
}
