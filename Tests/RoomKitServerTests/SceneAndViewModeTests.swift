import Foundation
import RoomKitProtocol
import XCTest

/// PROTOCOL.md §5 scene operations and `setViewMode`: each is a `state`
/// event whose patch carries the new `sceneState` / `broadcastState`.
final class SceneAndViewModeTests: ServerTestCase {
    // Numbers as the server sends them back: coordinates are doubles (10 and 10.0 are the same JSON number).
    private let image: JSON = ["uuid": "img-1", "url": "https://cdn.example/a.png", "x": 10.0, "y": 20.5,
                               "width": 100.0, "height": 50.0]

    private func scene(_ name: String, ppt: JSON = nil, images: [JSON] = []) -> JSON {
        ["name": .string(name), "ppt": ppt, "images": .array(images)]
    }

    func testPutScenes_intoCurrentDirectory_pushesStateWithSceneState() throws {
        let server = try startServer()
        let (a, la) = try server.join("r1", user: "u1")
        let (b, _) = try server.join("r1", user: "u2")
        let ppt: JSON = ["src": "https://cdn.example/p1.png", "width": 1024.0, "height": 768.0]
        let reply = try a.ok("putScenes", room: "r1", ["dir": "/", "scenes": [["name": "p1", "ppt": ppt], ["name": "p0"]],
                                                       "index": 0])
        let push = try b.waitFor("state", room: "r1")
        XCTAssertEqual(push.int("seq"), reply.int("seq"))
        XCTAssertEqual(push.int("from"), la.int("memberId"))
        XCTAssertEqual(push["patch"], ["sceneState": ["scenePath": "/init", "index": 2,
                                                      "scenes": [scene("p1", ppt: ppt), scene("p0"), scene("init")]]])
        try a.expectNothing("state", for: 0.1)
    }

    func testSetScenePath_toDirectoryOrScene_andUnknownPathReplies1009006() throws {
        let server = try startServer()
        let (a, _) = try server.join("r1", user: "u1")
        let (b, _) = try server.join("r1", user: "u2")
        try a.ok("putScenes", room: "r1", ["dir": "/deck", "scenes": [["name": "s1"], ["name": "s2"]]])
        let unchanged = try b.waitFor("state", room: "r1")
        XCTAssertEqual(unchanged["patch"]?["sceneState"]?["scenePath"], "/init", "putScenes elsewhere keeps the current scene")
        try a.ok("setScenePath", room: "r1", ["path": "/deck"])
        XCTAssertEqual(try b.waitFor("state", room: "r1")["patch"],
                       ["sceneState": ["scenePath": "/deck/s1", "index": 0, "scenes": [scene("s1"), scene("s2")]]])
        try a.ok("setScenePath", room: "r1", ["path": "/deck/s2"])
        XCTAssertEqual(try b.waitFor("state", room: "r1")["patch"]?["sceneState"]?["index"], 1)
        XCTAssertEqual(try a.failure("setScenePath", room: "r1", ["path": "/deck/s3"]), 1_009_006)
        XCTAssertEqual(try a.failure("setScenePath", room: "r1", ["path": "/nowhere"]), 1_009_006)
        try b.expectNothing("state", for: 0.1)
        let (_, late) = try server.join("r1", user: "u3")
        XCTAssertEqual(late["state"]?["sceneState"]?["scenePath"], "/deck/s2")
    }

    func testRemoveScenes_ofTheCurrentScene_fallsBackAndPushesState() throws {
        let server = try startServer()
        let (a, _) = try server.join("r1", user: "u1")
        let (b, _) = try server.join("r1", user: "u2")
        try a.ok("putScenes", room: "r1", ["dir": "/deck", "scenes": [["name": "s1"], ["name": "s2"]]])
        try a.ok("setScenePath", room: "r1", ["path": "/deck/s2"])
        _ = try b.waitFor("state", room: "r1")
        _ = try b.waitFor("state", room: "r1")
        let reply = try a.ok("removeScenes", room: "r1", ["path": "/deck/s2"])
        let push = try b.waitFor("state", room: "r1")
        XCTAssertEqual(push.int("seq"), reply.int("seq"))
        XCTAssertEqual(push["patch"], ["sceneState": ["scenePath": "/deck/s1", "index": 0, "scenes": [scene("s1")]]])
        try a.ok("removeScenes", room: "r1", ["path": "/deck"])
        XCTAssertEqual(try b.waitFor("state", room: "r1")["patch"],
                       ["sceneState": ["scenePath": "/init", "index": 0, "scenes": [scene("init")]]])
        XCTAssertEqual(try a.failure("removeScenes", room: "r1", ["path": "/deck"]), 1_009_006)
    }

    func testInsertImage_appendsToTheCurrentScene() throws {
        let server = try startServer()
        let (a, _) = try server.join("r1", user: "u1")
        let (b, _) = try server.join("r1", user: "u2")
        let reply = try a.ok("insertImage", room: "r1", ["image": image])
        let push = try b.waitFor("state", room: "r1")
        XCTAssertEqual(push.int("seq"), reply.int("seq"))
        XCTAssertEqual(push["patch"], ["sceneState": ["scenePath": "/init", "index": 0,
                                                      "scenes": [scene("init", images: [image])]]])
        var second = image.objectValue ?? [:]
        second["uuid"] = "img-2"
        try a.ok("insertImage", room: "r1", ["image": .object(second)])
        XCTAssertEqual(try b.waitFor("state", room: "r1")["patch"]?["sceneState"]?["scenes"]?[0]?["images"],
                       [image, .object(second)])
        XCTAssertEqual(try a.failure("insertImage", room: "r1", ["image": image]), 1_009_006, "a repeated uuid")
    }

    func testSetViewMode_broadcasterRules() throws {
        let server = try startServer()
        let (a, la) = try server.join("r1", user: "u1")
        let (b, lb) = try server.join("r1", user: "u2")
        let (c, _) = try server.join("r1", user: "u3")
        let aId = try XCTUnwrap(la.int("memberId")), bId = try XCTUnwrap(lb.int("memberId"))

        func broadcastState(after client: RawClient, _ mode: String) throws -> (seq: Int64?, JSON?) {
            let reply = try client.ok("setViewMode", room: "r1", ["mode": .string(mode)])
            let push = try c.waitFor("state", room: "r1") { $0.int("seq") == reply.int("seq") }
            XCTAssertEqual(push.int("from"), client === a ? aId : bId)
            return (reply.int("seq"), push["patch"]?["broadcastState"])
        }

        XCTAssertEqual(try broadcastState(after: a, "broadcaster").1, ["mode": "broadcaster", "broadcasterId": .int(aId)])
        // follower/freedom from someone else changes nothing, but is still an event.
        let follower = try broadcastState(after: b, "follower")
        XCTAssertEqual(follower.1, ["mode": "broadcaster", "broadcasterId": .int(aId)])
        XCTAssertEqual(try broadcastState(after: b, "freedom").1, ["mode": "broadcaster", "broadcasterId": .int(aId)])
        // Another member taking over as broadcaster.
        XCTAssertEqual(try broadcastState(after: b, "broadcaster").1, ["mode": "broadcaster", "broadcasterId": .int(bId)])
        // freedom or follower from the current broadcaster ends broadcasting.
        XCTAssertEqual(try broadcastState(after: b, "follower").1, ["mode": "freedom", "broadcasterId": nil])
        XCTAssertEqual(try broadcastState(after: a, "broadcaster").1, ["mode": "broadcaster", "broadcasterId": .int(aId)])
        XCTAssertEqual(try broadcastState(after: a, "freedom").1, ["mode": "freedom", "broadcasterId": nil])
        let (_, late) = try server.join("r1", user: "u4")
        XCTAssertEqual(late["state"]?["broadcastState"], ["mode": "freedom", "broadcasterId": nil])
        XCTAssertEqual(follower.seq, 5, "three logins, one broadcaster change, then the follower event")
    }
}
