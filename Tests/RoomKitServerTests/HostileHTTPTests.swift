import Foundation
import RoomKitProtocol
import RoomKitTestSupport
import XCTest

/// Issue #27 §1, §2 and §6 against roomd's own request handling: numbers at
/// Int64's edges in a recording query and in a token's `exp` (login, resume,
/// renewToken), the rooms `.` and `..` over HTTP, and kick's answer for an
/// invalid room ID. Each of these trapped roomd or answered wrongly before.
final class HostileHTTPTests: ServerTestCase {
    private let admin = makeToken(user: "ops", role: .admin)

    func testRecording_atInt64Edges_is400With1009006_andTheServerStaysUp() throws {
        let server = try startServer()
        _ = try server.join("lobby", user: "u1")
        let reader = makeToken(user: "r", role: .reader)
        for query in ["to=9223372036854775807", "from=-9223372036854775808", "from=0&to=9223372036854775807",
                      "sliceEnd=9223372036854775807", "sliceStart=9223372036854775807&sliceEnd=9223372036854775807",
                      "from=-1", "to=253402300800000", "sliceStart=-9223372036854775808"] {
            let reply = try server.http("GET", "/v1/rooms/lobby/recording?\(query)", token: reader)
            XCTAssertEqual(reply.status, 400, "\(query): \(reply.text)")
            XCTAssertEqual(reply.json?.int("code"), 1_009_006, query)
            let names = query.split(separator: "&").map { String($0.split(separator: "=")[0]) }
            let message = reply.json?.string("message") ?? ""
            XCTAssertTrue(names.contains { message.hasPrefix("\($0): must be in 0...253402300799999") }, "\(query): \(reply.text)")
        }
        XCTAssertEqual(try server.http("GET", "/v1/rooms/lobby/recording?to=253402300799999", token: reader).status, 200)
        XCTAssertEqual(try server.http("GET", "/healthz").text, "ok")
    }

    /// `roomd token --ttl 9300000000000000` minted such tokens; `exp * 1000`
    /// trapped roomd on login, resume and renewToken.
    func testTokenWithHugeExp_isRefused1002033_onLoginResumeAndRenew() throws {
        let server = try startServer()
        let huge = makeToken(user: "u1", exp: 9_300_000_000_000_000)
        let client = try server.connect()
        XCTAssertEqual(try client.login("r1", token: huge, user: "u1").code, 1_002_033)
        let login = try client.login("r1", token: makeToken(user: "u1"), user: "u1")
        XCTAssertEqual(login["ok"], true)
        XCTAssertEqual(try client.failure("renewToken", room: "r1", ["token": .string(huge)]), 1_002_033)
        try client.close()
        _ = try client.waitForClose()
        let back = try server.connect()
        let resume = try back.login("r1", token: huge, user: "u1", resume: (try XCTUnwrap(login.string("session")), 1))
        XCTAssertEqual(resume.code, 1_002_033)
        XCTAssertEqual(try back.login("r1", token: makeToken(user: "u1", exp: .max), user: "u1").code, 1_002_033)
        XCTAssertEqual(try server.http("GET", "/healthz").text, "ok")
    }

    /// Wire fields at the edges (`id`, `resume.seq`, `fence`, `index`): a
    /// reply (ok, or a request error 1009001/1009006/…) and a server that
    /// keeps answering; never a trap.
    func testWireNumbers_atTheEdges_getARequestErrorOrAreAccepted() throws {
        let server = try startServer()
        let (first, _) = try server.join("r1", user: "w")
        try first.ok("putScenes", room: "r1", ["dir": "/d", "scenes": [["name": "a"]]])
        let (resumed, login) = try server.join("r1", user: "u1")
        let session = try XCTUnwrap(login.string("session"))
        try resumed.close()
        _ = try resumed.waitForClose()
        let edges: [JSON] = [.int(.min), .int(.min + 1), -1, 0, 1, .int(9_300_000_000_000_000), .int(.max - 1), .int(.max),
                             1e19, 1e300, -1e300, 0.5]
        let client = try server.connect()
        for number in edges {
            for fields in [
                RawClient.loginFields(token: makeToken(user: "u1"), user: "u1").merging(["resume": ["session": .string(session), "seq": number]]) { $1 },
                RawClient.loginFields(token: makeToken(user: "u2"), user: "u2").merging(["fence": number]) { $1 },
            ] {
                let reply = try client.request("login", room: "r1", fields)
                if reply["ok"] != true { XCTAssertNotNil(reply.code, "\(number): \(reply)") }
            }
            let put = try first.request("putScenes", room: "r1", ["dir": "/d", "scenes": [["name": "b"]], "index": number])
            if put["ok"] != true { XCTAssertTrue([1_009_001, 1_009_006].contains(put.code ?? 0), "index \(number): \(put)") }
            try first.send(["op": "setState", "id": number, "room": "r1", "patch": ["globalState": ["n": 1]]])
            XCTAssertNotNil(try first.ok("setState", room: "r1", ["patch": ["globalState": ["n": 2]]]).int("seq"), "\(number)")
        }
        XCTAssertEqual(try server.http("GET", "/healthz").text, "ok")
    }

    /// `.` and `..` are valid room IDs, but libwebsockets normalises them out
    /// of a path: the query-parameter forms reach them (docs/PROTOCOL.md).
    func testDotRooms_areReachableThroughTheRoomQueryParameter() throws {
        let server = try startServer()
        for room in [".", ".."] {
            let (member, _) = try server.join(room, user: "u1")
            try member.ok("setState", room: room, ["patch": ["globalState": ["n": 1]]])
            let reader = makeToken(user: "r", room: room, role: .reader)
            let encoded = room.replacingOccurrences(of: ".", with: "%2E")
            let recording = try server.http("GET", "/v1/rooms/recording?room=\(encoded)", token: reader)
            XCTAssertEqual(recording.status, 200, "\(room): \(recording.text)")
            let header = try JSON.parse(Array(recording.text.split(separator: "\n").first.map(String.init)?.utf8 ?? "".utf8))
            XCTAssertEqual(header["room"], .string(room))
            XCTAssertEqual(try server.http("GET", "/v1/rooms/recording?room=\(room)", token: reader).status, 200)
            let kick = try server.http("POST", "/v1/admin/rooms/kick?room=\(room)", token: admin, body: #"{"user":"u1"}"#)
            XCTAssertEqual(kick.status, 200, kick.text)
            XCTAssertEqual(kick.json, ["kicked": 1])
            XCTAssertEqual(try member.waitFor("kicked", room: room).code, 1_002_055)
        }
        let missing = try server.http("GET", "/v1/rooms/recording", token: makeToken(user: "r", role: .reader))
        XCTAssertEqual(missing.status, 400, missing.text)
        XCTAssertEqual(missing.json?.string("message"), "the room query parameter is required")
    }

    /// A bad percent-escape is refused by libwebsockets' URI parser before
    /// roomd sees the request: it answered an HTML 403; now the documented
    /// JSON error, 400 1009001 (docs/PROTOCOL.md).
    func testBadPercentEscape_getsTheJSONError() throws {
        let server = try startServer()
        for path in ["/v1/rooms/lobby/recording?from=%zz", "/v1/rooms/%/recording", "/v1/admin/rooms/%g1/kick"] {
            let text = rawExchange(port: server.port, "GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            XCTAssertTrue(text.hasPrefix("HTTP/1.1 400") || text.hasPrefix("HTTP/1.0 400"), "\(path): \(text)")
            XCTAssertTrue(text.lowercased().contains("content-type: application/json"), text)
            let body = text.components(separatedBy: "\r\n\r\n").dropFirst().joined()
            let json = try JSON.parse(Array(body.utf8))
            XCTAssertEqual(json["code"], 1_009_001, body)
            XCTAssertTrue(json["message"]?.stringValue?.hasPrefix("malformed request URI") ?? false, body)
        }
        XCTAssertEqual(try server.http("GET", "/healthz").text, "ok")
    }

    /// PROTOCOL.md: an invalid room ID is 404 on kick as on recording
    /// (kick answered 200 {"kicked":0}).
    func testKick_ofAnInvalidRoomID_is404LikeRecording() throws {
        let server = try startServer()
        for path in ["/v1/admin/rooms/a*b/kick", "/v1/admin/rooms/kick?room=a%20b"] {
            let reply = try server.http("POST", path, token: admin, body: #"{"user":"u1"}"#)
            XCTAssertEqual(reply.status, 404, "\(path): \(reply.text)")
            XCTAssertEqual(reply.json?.int("code"), 1_009_006)
        }
        let recording = try server.http("GET", "/v1/rooms/a*b/recording", token: admin)
        XCTAssertEqual(recording.status, 404)
        XCTAssertEqual(recording.json?.int("code"), 1_009_006)
    }
}
