import Foundation
import RoomKitProtocol
import XCTest

/// PROTOCOL.md §2–§3: the envelope rules and the project codes 1009001–1009007, 1002002.
final class EnvelopeErrorTests: ServerTestCase {
    func testTextThatIsNotJSON_getsErrorPush1009001() throws {
        let server = try startServer()
        let client = try server.connect()
        try client.sendText("{not json")
        let error = try client.waitFor("error")
        XCTAssertEqual(error.code, 1_009_001)
        XCTAssertNotNil(error.string("message"))
        try client.sendText("[1,2]")
        XCTAssertEqual(try client.waitFor("error").code, 1_009_001)
        try client.sendText("42")
        XCTAssertEqual(try client.waitFor("error").code, 1_009_001)
        XCTAssertTrue(try client.isOpen())
    }

    func testBinaryFrame_getsErrorPush1009001_andIsNotExecuted() throws {
        // §1: one message = one text frame. Found while building
        // HostileClientTests: a binary frame holding a request used to be
        // executed like text.
        let server = try startServer()
        let (reader, _) = try server.join("r1", user: "u2")
        let socket = try WireSocket(port: server.port)
        socket.sendText(#"{"op":"hello","id":1}"#)
        XCTAssertTrue(socket.readText()?.contains(#""ok":true"#) ?? false)
        socket.sendText(#"{"op":"login","id":2,"room":"r1","token":"\#(makeToken(user: "u1"))","user":{"id":"u1"}}"#)
        XCTAssertTrue(socket.readText()?.contains(#""session""#) ?? false)
        socket.sendBinary(Array(#"{"op":"magix","id":3,"room":"r1","event":"e","payload":1}"#.utf8))
        let error = try XCTUnwrap(socket.readText().flatMap { try? JSON.parse($0) })
        XCTAssertEqual(error.op, "error")
        XCTAssertEqual(error.code, 1_009_001)
        XCTAssertNil(error["id"], "a binary frame is not read, so it has no id to reply to")
        try reader.expectNothing("magix", for: 0.2)
        socket.sendText(#"{"op":"ping","t":4}"#)
        XCTAssertTrue(socket.readText()?.contains(#""op":"pong""#) ?? false, "the connection stays usable")
    }

    func testBinaryFrameBeforeHello_closes1002() throws {
        let server = try startServer()
        let socket = try WireSocket(port: server.port)
        socket.sendBinary(Array(#"{"op":"hello","id":1}"#.utf8))
        let (code, texts, _) = socket.readUntilClose()
        XCTAssertEqual(code, 1002)
        XCTAssertEqual(texts, [])
    }

    func testFieldOfWrongType_replies1009001() throws {
        let server = try startServer()
        let (client, _) = try server.join("r1", user: "u1")
        XCTAssertEqual(try client.failure("setState", room: "r1", ["patch": "not an object"]), 1_009_001)
        XCTAssertEqual(try client.failure("setMemberState", room: "r1", ["memberState": [1]]), 1_009_001)
        XCTAssertEqual(try client.failure("magix", room: "r1", ["event": 5, "payload": 1]), 1_009_001)
        XCTAssertEqual(try client.failure("setWritable", room: "r1", ["writable": "yes"]), 1_009_001)
        XCTAssertEqual(try client.failure("setViewMode", room: "r1", [:]), 1_009_001, "missing field")
        XCTAssertEqual(try client.failure("login", room: "r2", ["token": 1, "user": ["id": "u1"]]), 1_009_001)
        try client.send(["op": "setState", "id": 99, "room": 7, "patch": [:]])
        XCTAssertEqual(try client.reply(to: 99).code, 1_009_001, "room of the wrong type")
    }

    func testOpOfWrongTypeWithId_replies1009001() throws {
        let server = try startServer()
        let client = try server.connect()
        try client.send(["op": 12, "id": 77])
        let reply = try client.reply(to: 77)
        XCTAssertEqual(reply["ok"], false)
        XCTAssertEqual(reply.code, 1_009_001)
    }

    func testRequestOpWithoutId_getsErrorPush1009001() throws {
        let server = try startServer()
        let (client, _) = try server.join("r1", user: "u1")
        try client.send(["op": "setState", "room": "r1", "patch": ["globalState": ["a": 1]]])
        let error = try client.waitFor("error")
        XCTAssertEqual(error.code, 1_009_001)
        XCTAssertEqual(error.string("room"), "r1", "the error names the room when it is valid")
        // Nothing was applied.
        let (_, login) = try server.join("r1", user: "u2")
        XCTAssertEqual(login["state"]?["globalState"], [:])
    }

    func testUnknownOpWithId_replies1009002() throws {
        let server = try startServer()
        let client = try server.connect()
        XCTAssertEqual(try client.failure("teleport", room: "r1", ["to": "mars"]), 1_009_002)
        XCTAssertTrue(try client.isOpen())
    }

    func testUnknownOpWithoutId_getsErrorPush1009002() throws {
        let server = try startServer()
        let client = try server.connect()
        try client.send(["op": "teleport", "room": "r1"])
        let error = try client.waitFor("error")
        XCTAssertEqual(error.code, 1_009_002)
        XCTAssertNil(error["id"])
    }

    func testUnknownFields_areIgnored() throws {
        let server = try startServer()
        let client = try server.connect()
        var fields = RawClient.loginFields(token: makeToken(user: "u1"), user: "u1")
        fields["futureField"] = ["nested": true]
        let login = try client.ok("login", room: "r1", fields)
        XCTAssertEqual(login.int("memberId"), 1)
        let reply = try client.ok("setState", room: "r1", ["patch": ["globalState": ["k": 1]], "extra": 5])
        XCTAssertNotNil(reply.int("seq"))
    }

    func testInvalidRoomID_replies1009006() throws {
        let server = try startServer()
        let client = try server.connect()
        let token = makeToken(user: "u1")
        for room in ["", "has space", "slash/room", "ünïcode", String(repeating: "r", count: 129)] {
            let reply = try client.login(room, token: token, user: "u1")
            XCTAssertEqual(reply.code, 1_009_006, "room '\(room)'")
        }
        let longest = String(repeating: "r", count: 128)
        XCTAssertEqual(try client.login(longest, token: token, user: "u1")["ok"], true, "128 chars are allowed")
        XCTAssertEqual(try client.login("A-z_0.9:x", token: token, user: "u1")["ok"], true)
    }

    func testInvalidValues_reply1009006() throws {
        let server = try startServer()
        let (client, _) = try server.join("r1", user: "u1")
        let cases: [(String, [String: JSON])] = [
            ("setState", ["patch": ["colour": "red"]]),
            ("setState", ["patch": ["globalState": 5]]),
            ("setState", ["patch": ["broadcastState": ["mode": "chaos", "broadcasterId": nil]]]),
            ("setViewMode", ["mode": "sideways"]),
            ("setScenePath", ["path": "no-leading-slash"]),
            ("setScenePath", ["path": "/does-not-exist"]),
            ("removeScenes", ["path": "/nothing/here"]),
            ("putScenes", ["dir": "/d", "scenes": []]),
            ("putScenes", ["dir": "/d", "scenes": [["name": "a"], ["name": "a"]]]),
            ("putScenes", ["dir": "/d", "scenes": [["name": "a"]], "index": -1]),
            ("magix", ["event": "", "payload": 1]),
            ("magix", ["event": .string(String(repeating: "e", count: 129)), "payload": 1]),
            ("setExtraInfo", ["key": "k", "value": .string(String(repeating: "v", count: 4097))]),
            ("setExtraInfo", ["key": .string(String(repeating: "k", count: 129)), "value": "v"]),
            ("unpublishStream", ["streamID": "never-published"]),
        ]
        for (op, fields) in cases {
            XCTAssertEqual(try client.failure(op, room: "r1", fields), 1_009_006, "\(op) \(fields)")
        }
        // None of them changed the room: the next event is seq 2 (after u1's add).
        XCTAssertEqual(try client.ok("setState", room: "r1", ["patch": ["globalState": [:]]]).int("seq"), 2)
    }

    func testNonPositiveId_getsErrorPush1009006() throws {
        let server = try startServer()
        let client = try server.connect()
        try client.send(["op": "logout", "id": 0, "room": "r1"])
        XCTAssertEqual(try client.waitFor("error").code, 1_009_006)
        try client.send(["op": "logout", "id": -3, "room": "r1"])
        XCTAssertEqual(try client.waitFor("error").code, 1_009_006)
    }

    func testRoomOp_whenNotLoggedIn_replies1009005() throws {
        let server = try startServer()
        let (client, _) = try server.join("r1", user: "u1")
        let ops: [(String, [String: JSON])] = [
            ("setState", ["patch": ["globalState": ["a": 1]]]),
            ("setMemberState", ["memberState": ["a": 1]]),
            ("magix", ["event": "e", "payload": 1]),
            ("putScenes", ["dir": "/d", "scenes": [["name": "a"]]]),
            ("setScenePath", ["path": "/init"]),
            ("removeScenes", ["path": "/init"]),
            ("insertImage", ["image": ["uuid": "i", "url": "https://x/i.png", "x": 0, "y": 0, "width": 1, "height": 1]]),
            ("setViewMode", ["mode": "broadcaster"]),
            ("publishStream", ["stream": ["id": "s1"]]),
            ("unpublishStream", ["streamID": "s1"]),
            ("setExtraInfo", ["key": "k", "value": "v"]),
            ("renewToken", ["token": .string(makeToken(user: "u1"))]),
            ("setWritable", ["writable": true]),
        ]
        for (op, fields) in ops {
            XCTAssertEqual(try client.failure(op, room: "r2", fields), 1_009_005, op)
        }
    }

    func testLogout_whenNotLoggedIn_replies1002002() throws {
        let server = try startServer()
        let client = try server.connect()
        XCTAssertEqual(try client.failure("logout", room: "r1"), 1_002_002)
        // Also after a logout: the second one fails.
        XCTAssertEqual(try client.login("r1", token: makeToken(user: "u1"), user: "u1")["ok"], true)
        try client.ok("logout", room: "r1")
        XCTAssertEqual(try client.failure("logout", room: "r1"), 1_002_002)
    }

    func testLogin_twiceOnOneConnection_replies1009007() throws {
        let server = try startServer()
        let (client, first) = try server.join("r1", user: "u1")
        let again = try client.login("r1", token: makeToken(user: "u1"), user: "u1")
        XCTAssertEqual(again.code, 1_009_007)
        // Even as another user, and even as a resume of the same session.
        XCTAssertEqual(try client.login("r1", token: makeToken(user: "u2"), user: "u2").code, 1_009_007)
        let resume = try client.login("r1", token: makeToken(user: "u1"), user: "u1",
                                      resume: (try XCTUnwrap(first.string("session")), 1))
        XCTAssertEqual(resume.code, 1_009_007)
        // The first session is untouched.
        XCTAssertNotNil(try client.ok("setState", room: "r1", ["patch": ["globalState": ["a": 1]]]).int("seq"))
    }
}
