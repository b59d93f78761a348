import Foundation
import RoomKitProtocol
import RoomKitTokens
import XCTest

/// PROTOCOL.md §5–§6: login, logout, tokens and roles.
final class LoginTests: ServerTestCase {
    func testLogin_firstMemberOfNewRoom_getsFreshSnapshot() throws {
        let server = try startServer()
        let client = try server.connect()
        let before = nowMilliseconds()
        let reply = try client.login("lobby", token: makeToken(user: "u1", room: "lobby", ttl: 600), user: "u1",
                                     name: "Ada", payload: ["avatar": "a.png"])
        XCTAssertEqual(reply["ok"], true)
        XCTAssertTrue(reply.string("session")?.hasPrefix("s-") ?? false)
        XCTAssertEqual(reply.int("memberId"), 1)
        XCTAssertEqual(reply.int("seq"), 1, "the login's own userUpdate add is event 1")
        XCTAssertEqual(reply["recovered"], false)
        XCTAssertEqual(reply["writable"], true)
        let expiresAt = try XCTUnwrap(reply.int("expiresAt"))
        XCTAssertTrue(abs(expiresAt - (before + 600_000)) < 2000, "expiresAt is the token's exp in ms")
        XCTAssertEqual(expiresAt % 1000, 0)
        XCTAssertEqual(reply["state"], [
            "globalState": [:],
            "sceneState": ["scenePath": "/init", "scenes": [["name": "init", "ppt": nil, "images": []]], "index": 0],
            "broadcastState": ["mode": "freedom", "broadcasterId": nil],
        ])
        XCTAssertEqual(reply["members"], [["memberId": 1, "userId": "u1", "name": "Ada",
                                           "payload": ["avatar": "a.png"], "memberState": [:]]])
        XCTAssertEqual(reply["streams"], [])
        XCTAssertEqual(reply["extraInfo"], [:])
        XCTAssertEqual(try client.expectNothing(for: 0.1), [], "its own userUpdate add is not pushed to it")
    }

    func testLogin_secondMember_seesFirstAndFirstGetsUserUpdateAdd() throws {
        let server = try startServer()
        let (first, _) = try server.join("r1", user: "u1")
        let (_, reply) = try server.join("r1", user: "u2", name: "Bob")
        XCTAssertEqual(reply.int("memberId"), 2)
        XCTAssertEqual(reply.int("seq"), 2)
        XCTAssertEqual(reply.array("members").compactMap { $0.string("userId") }, ["u1", "u2"])
        let add = try first.waitFor("userUpdate", room: "r1")
        XCTAssertEqual(add.string("type"), "add")
        XCTAssertEqual(add.int("seq"), 2)
        XCTAssertEqual(add["users"], [["memberId": 2, "userId": "u2", "name": "Bob", "memberState": [:]]])
    }

    func testLogin_withBadTokens_replies1002033() throws {
        let server = try startServer()
        let client = try server.connect()
        let now = Int64(Date().timeIntervalSince1970)
        let signer = TokenSigner(secret: testSecret)
        let cases: [(String, String)] = [
            ("garbage", "not.a.jwt"),
            ("wrong secret", makeToken(user: "u1", secret: "other-secret")),
            ("expired", makeToken(user: "u1", exp: now - 5)),
            ("other room", makeToken(user: "u1", room: "elsewhere")),
            ("other user", makeToken(user: "u2")),
            ("not yet valid", signer.sign(TokenClaims(sub: "u1", room: "*", role: .writer, exp: now + 600, iat: now,
                                                      nbf: now + 300))),
        ]
        for (what, token) in cases {
            let reply = try client.login("r1", token: token, user: "u1")
            XCTAssertEqual(reply.code, 1_002_033, what)
        }
        // The right token still works on the same connection afterwards.
        XCTAssertEqual(try client.login("r1", token: makeToken(user: "u1", room: "r1"), user: "u1")["ok"], true)
    }

    func testLogin_withATokenVerifiedBefore_isRefusedOnceItExpired() throws {
        let server = try startServer()
        let now = Int64(Date().timeIntervalSince1970)
        let token = makeToken(user: "u1", exp: now + 2)
        XCTAssertEqual(try server.connect().login("r1", token: token, user: "u1")["ok"], true)
        XCTAssertEqual(try server.connect().login("r2", token: token, user: "u1")["ok"], true, "the same token again (kept verified)")
        while Int64(Date().timeIntervalSince1970) < now + 2 { usleep(50_000) }
        let reply = try server.connect().login("r3", token: token, user: "u1")
        XCTAssertEqual(reply.code, 1_002_033, "expired: refused although its signature was verified before")
    }

    func testLogin_withReaderTokenAskingWritable_succeedsReadOnly() throws {
        let server = try startServer()
        let client = try server.connect()
        let reply = try client.login("r1", token: makeToken(user: "u1", role: .reader), user: "u1", writable: true)
        XCTAssertEqual(reply["ok"], true)
        XCTAssertEqual(reply["writable"], false)
    }

    func testReader_writing_replies1009003_forEveryWriteOp() throws {
        let server = try startServer()
        let (reader, _) = try server.join("r1", user: "reader", role: .reader)
        let (watcher, _) = try server.join("r1", user: "watcher")
        let writeOps: [(String, [String: JSON])] = [
            ("setState", ["patch": ["globalState": ["a": 1]]]),
            ("magix", ["event": "e", "payload": 1]),
            ("putScenes", ["dir": "/d", "scenes": [["name": "a"]]]),
            ("setScenePath", ["path": "/init"]),
            ("removeScenes", ["path": "/init"]),
            ("insertImage", ["image": ["uuid": "i", "url": "https://x/i.png", "x": 0, "y": 0, "width": 1, "height": 1]]),
            ("setViewMode", ["mode": "broadcaster"]),
        ]
        for (op, fields) in writeOps {
            XCTAssertEqual(try reader.failure(op, room: "r1", fields), 1_009_003, op)
        }
        try watcher.expectNothing(for: 0.1)
        // What is not a room change stays open to readers.
        XCTAssertNotNil(try reader.ok("setMemberState", room: "r1", ["memberState": ["cursor": 1]]).int("seq"))
        XCTAssertNotNil(try reader.ok("setExtraInfo", room: "r1", ["key": "k", "value": "v"]).int("seq"))
        XCTAssertNotNil(try reader.ok("publishStream", room: "r1", ["stream": ["id": "cam"]]).int("seq"))
    }

    func testReader_setWritableTrue_replies1009003() throws {
        let server = try startServer()
        let (reader, _) = try server.join("r1", user: "u1", role: .reader)
        XCTAssertEqual(try reader.failure("setWritable", room: "r1", ["writable": true]), 1_009_003)
        XCTAssertEqual(try reader.ok("setWritable", room: "r1", ["writable": false])["writable"], false)
    }

    func testWriter_loginWritableFalse_isReadOnlyUntilSetWritableTrue() throws {
        let server = try startServer()
        let client = try server.connect()
        let login = try client.login("r1", token: makeToken(user: "u1"), user: "u1", writable: false)
        XCTAssertEqual(login["writable"], false)
        XCTAssertEqual(try client.failure("setState", room: "r1", ["patch": ["globalState": ["a": 1]]]), 1_009_003)
        XCTAssertEqual(try client.ok("setWritable", room: "r1", ["writable": true])["writable"], true)
        XCTAssertEqual(try client.ok("setState", room: "r1", ["patch": ["globalState": ["a": 1]]]).int("seq"), 2)
        XCTAssertEqual(try client.ok("setWritable", room: "r1", ["writable": false])["writable"], false)
        XCTAssertEqual(try client.failure("magix", room: "r1", ["event": "e", "payload": 1]), 1_009_003)
    }

    func testLogout_repliesOkWithSeq_andOthersGetUserUpdateDelete() throws {
        let server = try startServer()
        let (leaver, login) = try server.join("r1", user: "u1")
        let (stayer, _) = try server.join("r1", user: "u2")
        try leaver.waitFor("userUpdate", room: "r1")
        let reply = try leaver.ok("logout", room: "r1")
        XCTAssertEqual(reply.int("seq"), 3, "the delete is event 3")
        let delete = try stayer.waitFor("userUpdate", room: "r1") { $0.string("type") == "delete" }
        XCTAssertEqual(delete.int("seq"), 3)
        XCTAssertEqual(delete.array("users").first?.int("memberId"), login.int("memberId"))
        try leaver.expectNothing(for: 0.1)
        // A logged-out session is gone: its resume is a fresh login.
        let again = try leaver.login("r1", token: makeToken(user: "u1"), user: "u1",
                                     resume: (try XCTUnwrap(login.string("session")), 3))
        XCTAssertEqual(again["ok"], true)
        XCTAssertNotEqual(again.string("session"), login.string("session"))
        XCTAssertEqual(again.int("memberId"), 3)
        XCTAssertEqual(again["recovered"], false)
        XCTAssertNotNil(again["state"])
    }

    func testOneConnection_carriesRoomsWithDifferentUsers() throws {
        let server = try startServer()
        let client = try server.connect()
        XCTAssertEqual(try client.login("a", token: makeToken(user: "alice", room: "a"), user: "alice")["ok"], true)
        XCTAssertEqual(try client.login("b", token: makeToken(user: "bob", room: "b"), user: "bob")["ok"], true)
        let (other, _) = try server.join("b", user: "carol")
        try client.ok("setState", room: "a", ["patch": ["globalState": ["room": "a"]]])
        try client.ok("magix", room: "b", ["event": "hi", "payload": "from bob"])
        let magix = try other.waitFor("magix", room: "b")
        XCTAssertEqual(magix.int("from"), 1, "bob is member 1 of room b")
        XCTAssertEqual(magix["payload"], "from bob")
        try other.expectNothing(for: 0.1)
        try client.ok("logout", room: "a")
        XCTAssertNotNil(try client.ok("setState", room: "b", ["patch": ["globalState": ["still": true]]]).int("seq"))
    }
}
