import Foundation
import RoomKitProtocol
import XCTest

/// PROTOCOL.md §6 "Duplicate user": newest wins, with `kicked` 1002050.
final class DuplicateLoginTests: ServerTestCase {
    func testFreshLoginElsewhere_kicksTheOldSession1002050_newestWins() throws {
        let server = try startServer()
        let (old, oldLogin) = try server.join("r1", user: "u1")
        let (watcher, _) = try server.join("r1", user: "u2")
        try old.waitFor("userUpdate", room: "r1")
        let (new, newLogin) = try server.join("r1", user: "u1")
        let kicked = try old.waitFor("kicked", room: "r1")
        XCTAssertEqual(kicked.code, 1_002_050)
        XCTAssertNotNil(kicked.string("reason"))
        XCTAssertNil(kicked["seq"])
        XCTAssertNotEqual(newLogin.string("session"), oldLogin.string("session"))
        XCTAssertNotEqual(newLogin.int("memberId"), oldLogin.int("memberId"))
        XCTAssertEqual(newLogin.array("members").compactMap { $0.string("userId") }.sorted(), ["u1", "u2"],
                       "the old member is gone from the new session's snapshot")
        let delete = try watcher.waitFor("userUpdate", room: "r1") { $0.string("type") == "delete" }
        let add = try watcher.waitFor("userUpdate", room: "r1") { $0.string("type") == "add" }
        XCTAssertEqual(delete.array("users").first?.int("memberId"), oldLogin.int("memberId"))
        XCTAssertEqual(add.array("users").first?.int("memberId"), newLogin.int("memberId"))
        XCTAssertLessThan(delete.int("seq") ?? 0, add.int("seq") ?? 0)
        // The old connection stays open but is no longer in the room.
        XCTAssertTrue(try old.isOpen())
        XCTAssertEqual(try old.failure("setState", room: "r1", ["patch": ["globalState": ["a": 1]]]), 1_009_005)
        XCTAssertNotNil(try new.ok("setState", room: "r1", ["patch": ["globalState": ["a": 1]]]).int("seq"))
        try old.expectNothing(for: 0.1)
    }

    func testResumeOfKickedSession_isRefused1002050() throws {
        let server = try startServer()
        let (old, oldLogin) = try server.join("r1", user: "u1")
        _ = try server.join("r1", user: "u1")
        try old.waitFor("kicked", room: "r1")
        let session = try XCTUnwrap(oldLogin.string("session"))
        let refused = try old.login("r1", token: makeToken(user: "u1"), user: "u1", resume: (session, 1))
        XCTAssertEqual(refused["ok"], false)
        XCTAssertEqual(refused.code, 1_002_050)
        let elsewhere = try server.connect()
        XCTAssertEqual(try elsewhere.login("r1", token: makeToken(user: "u1"), user: "u1", resume: (session, 1)).code,
                       1_002_050)
    }

    func testFreshLogin_endsADetachedSessionOfTheSameUserToo() throws {
        let server = try startServer()
        let (old, oldLogin) = try server.join("r1", user: "u1")
        let (watcher, _) = try server.join("r1", user: "u2")
        try old.close()
        _ = try old.waitForClose()
        try watcher.expectNothing(for: 0.1)
        let (_, newLogin) = try server.join("r1", user: "u1")
        let delete = try watcher.waitFor("userUpdate", room: "r1") { $0.string("type") == "delete" }
        XCTAssertEqual(delete.array("users").first?.int("memberId"), oldLogin.int("memberId"))
        let add = try watcher.waitFor("userUpdate", room: "r1") { $0.string("type") == "add" }
        XCTAssertEqual(add.array("users").first?.int("memberId"), newLogin.int("memberId"))
        let back = try server.connect()
        let refused = try back.login("r1", token: makeToken(user: "u1"), user: "u1",
                                     resume: (try XCTUnwrap(oldLogin.string("session")), 1))
        XCTAssertEqual(refused.code, 1_002_050)
    }

    func testDuplicateKick_isPerRoom() throws {
        let server = try startServer()
        let old = try server.connect()
        XCTAssertEqual(try old.login("a", token: makeToken(user: "u1"), user: "u1")["ok"], true)
        XCTAssertEqual(try old.login("b", token: makeToken(user: "u1"), user: "u1")["ok"], true)
        _ = try server.join("a", user: "u1")
        XCTAssertEqual(try old.waitFor("kicked", room: "a").code, 1_002_050)
        XCTAssertNotNil(try old.ok("setState", room: "b", ["patch": ["globalState": ["b": true]]]).int("seq"))
        try old.expectNothing("kicked", for: 0.1)
    }

    func testResume_isNotADuplicateLogin_andKicksNobody() throws {
        let server = try startServer()
        let (first, firstLogin) = try server.join("r1", user: "u1")
        try first.close()
        _ = try first.waitForClose()
        let back = try server.connect()
        let resumed = try back.login("r1", token: makeToken(user: "u1"), user: "u1",
                                     resume: (try XCTUnwrap(firstLogin.string("session")), 1))
        XCTAssertEqual(resumed["recovered"], true)
        try back.expectNothing("kicked", for: 0.1)
    }
}
