import XCTest

@testable import RoomKitProtocol

final class SceneTreeTests: XCTestCase {
    private func names(_ scenes: [Scene]) -> [String] { scenes.map(\.name) }

    private func assertInvalid(
        _ body: () throws(ProtocolError) -> Void, file: StaticString = #filePath, line: UInt = #line
    ) {
        do {
            try body()
            XCTFail("expected invalidArgument", file: file, line: line)
        } catch {
            XCTAssertEqual(error.code, .invalidArgument, error.message, file: file, line: line)
        }
    }

    /// `/init`, plus `/deck/p1..p3`.
    private func deckTree() throws -> SceneTree {
        var tree = SceneTree()
        try tree.putScenes(dir: "/deck", scenes: [Scene(name: "p1"), Scene(name: "p2"), Scene(name: "p3")], index: nil)
        return tree
    }

    func testNewTree_matchesInitialSceneState() {
        XCTAssertEqual(SceneTree().sceneState, RoomState.initial.sceneState)
        XCTAssertEqual(SceneTree().currentScene, Scene(name: "init"))
    }

    func testPutScenes_withoutIndex_appends() throws {
        var tree = SceneTree()
        try tree.putScenes(dir: "/", scenes: [Scene(name: "a"), Scene(name: "b")], index: nil)
        XCTAssertEqual(names(tree.scenes(in: "/")), ["init", "a", "b"])
        XCTAssertEqual(tree.sceneState.index, 0)
    }

    func testPutScenes_withIndex_insertsThereAndShiftsCurrentIndex() throws {
        var tree = SceneTree()
        try tree.putScenes(dir: "/", scenes: [Scene(name: "a"), Scene(name: "b")], index: 0)
        XCTAssertEqual(names(tree.scenes(in: "/")), ["a", "b", "init"])
        XCTAssertEqual(tree.sceneState.scenePath, "/init")
        XCTAssertEqual(tree.sceneState.index, 2)
        try tree.putScenes(dir: "/", scenes: [Scene(name: "z")], index: 99)
        XCTAssertEqual(names(tree.scenes(in: "/")), ["a", "b", "init", "z"])
    }

    func testPutScenes_whenNameExists_replacesInPlace() throws {
        var tree = try deckTree()
        let page = PPT(src: "https://x/2.png", width: 4, height: 3)
        try tree.putScenes(dir: "/deck", scenes: [Scene(name: "p2", ppt: page), Scene(name: "p4")], index: 0)
        XCTAssertEqual(names(tree.scenes(in: "/deck")), ["p4", "p1", "p2", "p3"])
        XCTAssertEqual(tree.scenes(in: "/deck")[2].ppt, page)
    }

    func testPutScenes_whenArgumentsInvalid_throwsAndLeavesTreeUnchanged() throws {
        var tree = try deckTree()
        let before = tree
        assertInvalid { () throws(ProtocolError) in try tree.putScenes(dir: "deck", scenes: [Scene(name: "a")], index: nil) }
        assertInvalid { () throws(ProtocolError) in try tree.putScenes(dir: "/deck", scenes: [], index: nil) }
        assertInvalid { () throws(ProtocolError) in try tree.putScenes(dir: "/deck", scenes: [Scene(name: "a/b")], index: nil) }
        assertInvalid { () throws(ProtocolError) in try tree.putScenes(dir: "/deck", scenes: [Scene(name: "x"), Scene(name: "x")], index: nil) }
        assertInvalid { () throws(ProtocolError) in try tree.putScenes(dir: "/deck", scenes: [Scene(name: "x")], index: -1) }
        XCTAssertEqual(tree, before)
    }

    func testPutScenes_whenPathWouldBeBothSceneAndDirectory_throws() throws {
        var tree = try deckTree()
        // Into a scene's path, or below it.
        assertInvalid { () throws(ProtocolError) in try tree.putScenes(dir: "/init", scenes: [Scene(name: "x")], index: nil) }
        assertInvalid { () throws(ProtocolError) in try tree.putScenes(dir: "/deck/p1/sub", scenes: [Scene(name: "x")], index: nil) }
        // A scene named like an existing directory.
        assertInvalid { () throws(ProtocolError) in try tree.putScenes(dir: "/", scenes: [Scene(name: "deck")], index: nil) }
    }

    func testSetScenePath_toScene_updatesSceneState() throws {
        var tree = try deckTree()
        try tree.setScenePath("/deck/p2")
        XCTAssertEqual(tree.sceneState.scenePath, "/deck/p2")
        XCTAssertEqual(names(tree.sceneState.scenes), ["p1", "p2", "p3"])
        XCTAssertEqual(tree.sceneState.index, 1)
    }

    func testSetScenePath_toDirectory_selectsItsFirstScene() throws {
        var tree = try deckTree()
        try tree.setScenePath("/deck")
        XCTAssertEqual(tree.scenePath, "/deck/p1")
    }

    func testSetScenePath_whenUnknown_throwsInvalidArgument() throws {
        var tree = try deckTree()
        assertInvalid { () throws(ProtocolError) in try tree.setScenePath("/deck/p9") }
        assertInvalid { () throws(ProtocolError) in try tree.setScenePath("/nowhere") }
        assertInvalid { () throws(ProtocolError) in try tree.setScenePath("not a path") }
        XCTAssertEqual(tree.scenePath, "/init")
    }

    func testRemoveScenes_scenePath_removesThatScene() throws {
        var tree = try deckTree()
        try tree.removeScenes(path: "/deck/p2")
        XCTAssertEqual(names(tree.scenes(in: "/deck")), ["p1", "p3"])
        XCTAssertEqual(tree.scenePath, "/init")
    }

    func testRemoveScenes_whenCurrentSceneRemoved_fallsBackToFirstOfSameDirectory() throws {
        var tree = try deckTree()
        try tree.setScenePath("/deck/p2")
        try tree.removeScenes(path: "/deck/p2")
        XCTAssertEqual(tree.scenePath, "/deck/p1")
        XCTAssertEqual(tree.sceneState.index, 0)
    }

    func testRemoveScenes_directory_removesSubtreeAndFallsBackToAncestor() throws {
        var tree = try deckTree()
        try tree.putScenes(dir: "/deck/sub", scenes: [Scene(name: "s1")], index: nil)
        try tree.putScenes(dir: "/deckle", scenes: [Scene(name: "q")], index: nil)
        try tree.setScenePath("/deck/sub/s1")
        try tree.removeScenes(path: "/deck")
        XCTAssertEqual(tree.scenes(in: "/deck"), [])
        XCTAssertEqual(tree.scenes(in: "/deck/sub"), [])
        XCTAssertEqual(names(tree.scenes(in: "/deckle")), ["q"])
        XCTAssertEqual(tree.scenePath, "/init")
    }

    func testRemoveScenes_whenNoAncestorHasScenes_picksFirstDirectoryBySortOrder() throws {
        var tree = try deckTree()
        try tree.putScenes(dir: "/b", scenes: [Scene(name: "x")], index: nil)
        try tree.removeScenes(path: "/init")
        try tree.setScenePath("/deck/p3")
        try tree.removeScenes(path: "/deck")
        XCTAssertEqual(tree.scenePath, "/b/x")
    }

    func testRemoveScenes_whenTreeBecomesEmpty_recreatesInit() throws {
        var tree = try deckTree()
        try tree.setScenePath("/deck/p1")
        try tree.removeScenes(path: "/")
        XCTAssertEqual(tree, SceneTree())
        try tree.removeScenes(path: "/init")
        XCTAssertEqual(tree.sceneState, RoomState.initial.sceneState)
    }

    func testRemoveScenes_whenUnknown_throwsInvalidArgument() throws {
        var tree = try deckTree()
        assertInvalid { () throws(ProtocolError) in try tree.removeScenes(path: "/nope") }
        assertInvalid { () throws(ProtocolError) in try tree.removeScenes(path: "/de") }
        assertInvalid { () throws(ProtocolError) in try tree.removeScenes(path: "bad") }
    }

    func testInsertImage_appendsToCurrentSceneAndRejectsDuplicateUUID() throws {
        var tree = try deckTree()
        try tree.setScenePath("/deck/p3")
        let first = Image(uuid: "i1", url: "https://x/1.png", x: 0, y: 0, width: 1, height: 1)
        let second = Image(uuid: "i2", url: "https://x/2.png", x: 5, y: 5, width: 1, height: 1)
        try tree.insertImage(first)
        try tree.insertImage(second)
        XCTAssertEqual(tree.currentScene.images, [first, second])
        XCTAssertEqual(tree.sceneState.scenes[2].images.count, 2)
        XCTAssertEqual(tree.scenes(in: "/")[0].images, [])
        assertInvalid { () throws(ProtocolError) in try tree.insertImage(first) }
    }

    func testInitFromSceneState_holdsThatDirectory() throws {
        let state = SceneState(scenePath: "/d/b", scenes: [Scene(name: "a"), Scene(name: "b")], index: 1)
        let tree = try SceneTree(sceneState: state)
        XCTAssertEqual(tree.sceneState, state)
        XCTAssertThrowsError(try SceneTree(sceneState: SceneState(scenePath: "/d/c", scenes: [Scene(name: "a")], index: 0)))
    }

    func testJSON_roundTripsAndRejectsBrokenInvariants() throws {
        var tree = try deckTree()
        try tree.setScenePath("/deck/p2")
        XCTAssertEqual(try SceneTree(json: tree.json), tree)
        let conflicting: JSON = ["scenePath": "/a", "directories": ["/": [["name": "a"]], "/a": [["name": "b"]]]]
        XCTAssertThrowsError(try SceneTree(json: conflicting))
        let unknownCurrent: JSON = ["scenePath": "/z", "directories": ["/": [["name": "a"]]]]
        XCTAssertThrowsError(try SceneTree(json: unknownCurrent))
        let emptyDirectory: JSON = ["scenePath": "/a", "directories": ["/": [["name": "a"]], "/x": []]]
        XCTAssertThrowsError(try SceneTree(json: emptyDirectory))
    }
}
