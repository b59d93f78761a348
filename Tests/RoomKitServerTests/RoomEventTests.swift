import Foundation
import RoomKitProtocol
import XCTest

/// PROTOCOL.md §2, §5, §7, §8: room events, their fan-out and merge rules.
final class RoomEventTests: ServerTestCase {
    /// Three members of r1 (u1, u2, u3); every add has been seen and taken.
    private func threeMembers(_ server: ServerHarness) throws -> [(client: RawClient, memberId: Int64)] {
        let (a, la) = try server.join("r1", user: "u1")
        let (b, lb) = try server.join("r1", user: "u2")
        let (c, lc) = try server.join("r1", user: "u3")
        try a.waitFor("userUpdate", room: "r1") { $0.int("seq") == 3 }
        _ = try a.drain()
        _ = try b.waitFor("userUpdate", room: "r1") { $0.int("seq") == 3 }
        return [(a, la.int("memberId") ?? 0), (b, lb.int("memberId") ?? 0), (c, lc.int("memberId") ?? 0)]
    }

    func testSetState_othersGetStatePush_senderGetsOnlyItsReply() throws {
        let server = try startServer()
        let members = try threeMembers(server)
        let patch: JSON = ["globalState": ["slide": 3, "title": "intro"]]
        let seq = try members[0].client.ok("setState", room: "r1", ["patch": patch]).int("seq")
        XCTAssertEqual(seq, 4)
        for other in members.dropFirst() {
            let push = try other.client.waitFor("state", room: "r1")
            XCTAssertEqual(push.int("seq"), seq)
            XCTAssertEqual(push.int("from"), members[0].memberId)
            XCTAssertEqual(push["patch"], patch)
        }
        try members[0].client.expectNothing(for: 0.1)
    }

    func testEveryMember_seesTheSameSeqForTheSameEvent() throws {
        let server = try startServer()
        let members = try threeMembers(server)
        var sent: [Int64: Int] = [:]  // seq -> sender index
        for round in 0..<4 {
            for (index, member) in members.enumerated() {
                let reply = try member.client.ok("magix", room: "r1",
                                                 ["event": "e", "payload": ["round": .int(Int64(round)), "by": .int(Int64(index))]])
                sent[try XCTUnwrap(reply.int("seq"))] = index
            }
        }
        XCTAssertEqual(sent.keys.sorted(), Array(4...15), "seq increases by 1 per event")
        for (index, member) in members.enumerated() {
            let expected = sent.filter { $0.value != index }.keys.sorted()
            var seen: [Int64] = []
            for _ in expected {
                let push = try member.client.waitFor("magix", room: "r1")
                let seq = try XCTUnwrap(push.int("seq"))
                XCTAssertEqual(push["payload"]?["by"]?.intValue, sent[seq], "seq \(seq) is the same event for everyone")
                XCTAssertEqual(push.int("from"), members[sent[seq] ?? 0].memberId)
                seen.append(seq)
            }
            XCTAssertEqual(seen, expected, "member \(index) sees the others' events in seq order, not its own")
        }
    }

    func testGlobalState_mergesOneLevelDeep_nullDeletesAKey() throws {
        let server = try startServer()
        let (a, _) = try server.join("r1", user: "u1")
        try a.ok("setState", room: "r1", ["patch": ["globalState": ["a": 1, "b": ["x": 1, "y": 1], "c": "keep"]]])
        try a.ok("setState", room: "r1", ["patch": ["globalState": ["a": nil, "b": ["z": 2], "d": [1, 2]]]])
        let (_, late) = try server.join("r1", user: "u2")
        XCTAssertEqual(late["state"]?["globalState"], ["b": ["z": 2], "c": "keep", "d": [1, 2]])
    }

    func testSetState_sceneAndBroadcastStateReplaceWhole() throws {
        let server = try startServer()
        let (a, login) = try server.join("r1", user: "u1")
        let memberId = try XCTUnwrap(login.int("memberId"))
        let sceneState: JSON = ["scenePath": "/deck/p2", "index": 1,
                                "scenes": [["name": "p1", "ppt": nil, "images": []], ["name": "p2", "ppt": nil, "images": []]]]
        let broadcast: JSON = ["mode": "broadcaster", "broadcasterId": .int(memberId)]
        try a.ok("setState", room: "r1", ["patch": ["sceneState": sceneState, "broadcastState": broadcast]])
        let (_, late) = try server.join("r1", user: "u2")
        XCTAssertEqual(late["state"]?["sceneState"], sceneState)
        XCTAssertEqual(late["state"]?["broadcastState"], broadcast)
        XCTAssertEqual(late["state"]?["globalState"], [:])
    }

    func testMemberState_mergesWithNullDelete_pushCarriesTheWholeObject() throws {
        let server = try startServer()
        let (a, la) = try server.join("r1", user: "u1")
        let (b, _) = try server.join("r1", user: "u2")
        let memberId = try XCTUnwrap(la.int("memberId"))
        let first = try a.ok("setMemberState", room: "r1", ["memberState": ["tool": "pen", "colour": "red"]])
        let push1 = try b.waitFor("memberState", room: "r1")
        XCTAssertEqual(push1.int("seq"), first.int("seq"))
        XCTAssertEqual(push1.int("memberId"), memberId)
        XCTAssertEqual(push1["memberState"], ["tool": "pen", "colour": "red"])
        try a.ok("setMemberState", room: "r1", ["memberState": ["colour": nil, "size": 3]])
        XCTAssertEqual(try b.waitFor("memberState", room: "r1")["memberState"], ["tool": "pen", "size": 3])
        let (_, late) = try server.join("r1", user: "u3")
        let member = late.array("members").first { $0.int("memberId") == memberId }
        XCTAssertEqual(member?["memberState"], ["tool": "pen", "size": 3])
        try a.expectNothing("memberState", for: 0.1)
    }

    func testMagix_withTo_reachesOnlyTheAddressees() throws {
        let server = try startServer()
        let members = try threeMembers(server)
        let (d, _) = try server.join("r1", user: "u4")
        for member in members { try member.client.waitFor("userUpdate", room: "r1") { $0.int("seq") == 4 } }
        let reply = try members[0].client.ok("magix", room: "r1",
                                             ["event": "whisper", "payload": ["secret": 42], "to": ["u2", "u4", "u1"]])
        let seq = try XCTUnwrap(reply.int("seq"))
        for addressee in [members[1].client, d] {
            let push = try addressee.waitFor("magix", room: "r1")
            XCTAssertEqual(push.int("seq"), seq)
            XCTAssertEqual(push.string("event"), "whisper")
            XCTAssertEqual(push["payload"], ["secret": 42])
            XCTAssertEqual(push.int("from"), members[0].memberId)
        }
        try members[2].client.expectNothing(for: 0.15)
        try members[0].client.expectNothing(for: 0, line: #line)  // its own event, even when addressed to itself
        // Without `to`, every other member gets it; u3's next seq shows a gap, not a loss.
        let broadcast = try members[1].client.ok("magix", room: "r1", ["event": "all", "payload": nil])
        let push = try members[2].client.waitFor("magix", room: "r1")
        XCTAssertEqual(push.int("seq"), broadcast.int("seq"))
        XCTAssertEqual(push.int("seq"), seq + 1)
        XCTAssertEqual(push["payload"], JSON.null)
        try members[0].client.waitFor("magix", room: "r1") { $0.int("seq") == seq + 1 }
    }

    func testExtraInfo_othersGetPush_andLateJoinersSeeIt() throws {
        let server = try startServer()
        let (a, la) = try server.join("r1", user: "u1")
        let (b, _) = try server.join("r1", user: "u2")
        let reply = try a.ok("setExtraInfo", room: "r1", ["key": "topic", "value": "geometry"])
        let push = try b.waitFor("extraInfo", room: "r1")
        XCTAssertEqual(push.int("seq"), reply.int("seq"))
        XCTAssertEqual(push.int("from"), la.int("memberId"))
        XCTAssertEqual(push.string("key"), "topic")
        XCTAssertEqual(push.string("value"), "geometry")
        try a.ok("setExtraInfo", room: "r1", ["key": "topic", "value": "algebra"])
        try a.ok("setExtraInfo", room: "r1", ["key": "level", "value": ""])
        let (_, late) = try server.join("r1", user: "u3")
        XCTAssertEqual(late["extraInfo"], ["topic": "algebra", "level": ""])
        try a.expectNothing("extraInfo", for: 0.1)
    }

    func testStreams_publishAndUnpublish_withOwnershipRules() throws {
        let server = try startServer()
        let (a, _) = try server.join("r1", user: "u1")
        let (b, _) = try server.join("r1", user: "u2")
        let published = try a.ok("publishStream", room: "r1", ["stream": ["id": "cam", "extraInfo": "720p"]])
        let add = try b.waitFor("streamUpdate", room: "r1")
        XCTAssertEqual(add.int("seq"), published.int("seq"))
        XCTAssertEqual(add.string("type"), "add")
        XCTAssertEqual(add["streams"], [["id": "cam", "userId": "u1", "extraInfo": "720p"]])
        XCTAssertEqual(try b.failure("publishStream", room: "r1", ["stream": ["id": "cam"]]), 1_009_006,
                       "a stream ID owned by another user")
        XCTAssertEqual(try b.failure("unpublishStream", room: "r1", ["streamID": "cam"]), 1_009_006,
                       "unpublishing a stream you do not own")
        // Republishing your own stream updates it.
        try a.ok("publishStream", room: "r1", ["stream": ["id": "cam", "extraInfo": "1080p"]])
        XCTAssertEqual(try b.waitFor("streamUpdate", room: "r1")["streams"]?[0]?["extraInfo"], "1080p")
        let (_, late) = try server.join("r1", user: "u3")
        XCTAssertEqual(late["streams"], [["id": "cam", "userId": "u1", "extraInfo": "1080p"]])
        let removed = try a.ok("unpublishStream", room: "r1", ["streamID": "cam"])
        let delete = try b.waitFor("streamUpdate", room: "r1") { $0.string("type") == "delete" }
        XCTAssertEqual(delete.int("seq"), removed.int("seq"))
        XCTAssertEqual(delete.array("streams").first?.string("id"), "cam")
        try a.expectNothing("streamUpdate", for: 0.1)
    }

    func testStreams_areRemovedWhenTheUsersLastSessionLogsOut() throws {
        let server = try startServer()
        let (a, la) = try server.join("r1", user: "u1")
        let (b, _) = try server.join("r1", user: "u2")
        try a.ok("publishStream", room: "r1", ["stream": ["id": "cam"]])
        try a.ok("publishStream", room: "r1", ["stream": ["id": "mic"]])
        try b.waitFor("streamUpdate", room: "r1")
        try b.waitFor("streamUpdate", room: "r1")
        try b.ok("publishStream", room: "r1", ["stream": ["id": "screen"]])
        let logout = try a.ok("logout", room: "r1")
        let delete = try b.waitFor("userUpdate", room: "r1") { $0.string("type") == "delete" }
        XCTAssertEqual(delete.array("users").first?.int("memberId"), la.int("memberId"))
        let streams = try b.waitFor("streamUpdate", room: "r1") { $0.string("type") == "delete" }
        XCTAssertEqual(streams.array("streams").compactMap { $0.string("id") }.sorted(), ["cam", "mic"])
        XCTAssertEqual(streams.int("seq"), logout.int("seq"), "the logout reply's seq covers both events")
        let (_, late) = try server.join("r1", user: "u3")
        XCTAssertEqual(late.array("streams").compactMap { $0.string("id") }, ["screen"])
    }
}
