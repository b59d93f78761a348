import XCTest

@testable import RoomKitProtocol

final class RoomStateTests: XCTestCase {
    private func assertCode<T>(
        _ code: ErrorCode, _ body: () throws(ProtocolError) -> T,
        file: StaticString = #filePath, line: UInt = #line
    ) {
        do {
            _ = try body()
            XCTFail("expected \(code)", file: file, line: line)
        } catch {
            XCTAssertEqual(error.code, code, error.message, file: file, line: line)
        }
    }

    // MARK: Model decoding

    func testInitial_isOneInitSceneInFreedomMode() {
        let expected = parsed(
            #"{"globalState":{},"sceneState":{"scenePath":"/init","scenes":[{"name":"init","ppt":null,"images":[]}],"index":0},"broadcastState":{"mode":"freedom","broadcasterId":null}}"#
        )
        XCTAssertEqual(RoomState.initial.json, expected)
    }

    func testRoomState_jsonRoundTrips() throws {
        let state = RoomState(
            globalState: ["k": [1, "v"]],
            sceneState: SceneState(
                scenePath: "/deck/p2",
                scenes: [
                    Scene(name: "p1", ppt: PPT(src: "https://x/1.png", width: 800, height: 600)),
                    Scene(name: "p2", images: [Image(uuid: "i1", url: "https://x/i.png", x: 1, y: -2.5, width: 10, height: 20)]),
                ],
                index: 1),
            broadcastState: BroadcastState(mode: .broadcaster, broadcasterId: 12))
        XCTAssertEqual(try RoomState(json: state.json), state)
        XCTAssertEqual(try RoomState(json: JSON.parse(state.json.serialized())), state)
    }

    func testImage_whenFieldMissingOrWrongType_throwsMalformed() {
        assertCode(.malformed) { () throws(ProtocolError) in try Image(json: ["uuid": "a", "url": "u", "x": 1, "y": 2, "width": 3]) }
        assertCode(.malformed) { () throws(ProtocolError) in try Image(json: ["uuid": "a", "url": "u", "x": "1", "y": 2, "width": 3, "height": 4]) }
        assertCode(.malformed) { () throws(ProtocolError) in try Image(json: "image") }
    }

    func testImage_whenValueInvalid_throwsInvalidArgument() {
        assertCode(.invalidArgument) { () throws(ProtocolError) in try Image(json: ["uuid": "", "url": "u", "x": 1, "y": 2, "width": 3, "height": 4]) }
        assertCode(.invalidArgument) { () throws(ProtocolError) in try Image(json: ["uuid": "a", "url": "u", "x": 1, "y": 2, "width": -3, "height": 4]) }
        assertCode(.invalidArgument) { () throws(ProtocolError) in try Image(json: ["uuid": "a", "url": "", "x": 1, "y": 2, "width": 3, "height": 4]) }
    }

    func testScene_defaultsMissingPptAndImages() throws {
        XCTAssertEqual(try Scene(json: ["name": "a"]), Scene(name: "a"))
        XCTAssertEqual(try Scene(json: ["name": "a", "ppt": nil]), Scene(name: "a"))
        assertCode(.invalidArgument) { () throws(ProtocolError) in try Scene(json: ["name": "a/b"]) }
        assertCode(.invalidArgument) { () throws(ProtocolError) in try Scene(json: ["name": ""]) }
        assertCode(.malformed) { () throws(ProtocolError) in try Scene(json: ["name": "a", "images": [:]]) }
        assertCode(.malformed) { () throws(ProtocolError) in try Scene(json: ["name": "a", "ppt": "x"]) }
    }

    func testSceneState_whenInconsistent_throwsInvalidArgument() {
        let scenes: JSON = [["name": "a"], ["name": "b"]]
        assertCode(.invalidArgument) { () throws(ProtocolError) in try SceneState(json: ["scenePath": "/a", "scenes": scenes, "index": 1]) }
        assertCode(.invalidArgument) { () throws(ProtocolError) in try SceneState(json: ["scenePath": "/a", "scenes": scenes, "index": 2]) }
        assertCode(.invalidArgument) { () throws(ProtocolError) in try SceneState(json: ["scenePath": "a", "scenes": scenes, "index": 0]) }
        assertCode(.invalidArgument) { () throws(ProtocolError) in try SceneState(json: ["scenePath": "/a", "scenes": [], "index": 0]) }
        assertCode(.invalidArgument) { () throws(ProtocolError) in try SceneState(json: ["scenePath": "/a", "scenes": [["name": "a"], ["name": "a"]], "index": 0]) }
        assertCode(.invalidArgument) { () throws(ProtocolError) in try SceneState(json: ["scenePath": "/a", "scenes": scenes, "index": 0.5]) }
        assertCode(.malformed) { () throws(ProtocolError) in try SceneState(json: ["scenePath": "/a", "scenes": scenes, "index": "0"]) }
        XCTAssertNoThrow(try SceneState(json: ["scenePath": "/d/b", "scenes": scenes, "index": 1]))
    }

    func testBroadcastState_validatesModeAndBroadcaster() throws {
        XCTAssertEqual(try BroadcastState(json: ["mode": "follower"]), BroadcastState(mode: .follower))
        XCTAssertEqual(try BroadcastState(json: ["mode": "broadcaster", "broadcasterId": 3]), BroadcastState(mode: .broadcaster, broadcasterId: 3))
        assertCode(.invalidArgument) { () throws(ProtocolError) in try BroadcastState(json: ["mode": "solo"]) }
        assertCode(.invalidArgument) { () throws(ProtocolError) in try BroadcastState(json: ["mode": "freedom", "broadcasterId": 0]) }
        assertCode(.malformed) { () throws(ProtocolError) in try BroadcastState(json: ["mode": 1]) }
    }

    func testMemberAndStream_roundTripAndOmitNilFields() throws {
        let member = Member(memberId: 12, userId: "u1", name: "Ann", payload: ["avatar": "a.png"], memberState: ["tool": "pen"])
        XCTAssertEqual(try Member(json: member.json), member)
        let bare = Member(memberId: 1, userId: "u")
        XCTAssertEqual(bare.json, ["memberId": 1, "userId": "u", "memberState": [:]])
        XCTAssertEqual(try Member(json: ["memberId": 1, "userId": "u"]), bare)
        let stream = MediaStream(id: "s1", userId: "u1", extraInfo: "720p")
        XCTAssertEqual(try MediaStream(json: stream.json), stream)
        XCTAssertEqual(MediaStream(id: "s", userId: "u").json, ["id": "s", "userId": "u"])
        assertCode(.invalidArgument) { () throws(ProtocolError) in try Member(json: ["memberId": 0, "userId": "u"]) }
        assertCode(.invalidArgument) { () throws(ProtocolError) in try MediaStream(json: ["id": "", "userId": "u"]) }
    }

    func testSnapshot_replyAndRecordingFormsRoundTrip() throws {
        let snapshot = RoomSnapshot(
            state: .initial, members: [Member(memberId: 1, userId: "u")], streams: [MediaStream(id: "s", userId: "u")],
            extraInfo: ["k": "v"])
        XCTAssertEqual(try RoomSnapshot(replyFields: snapshot.replyFields), snapshot)
        XCTAssertEqual(try RoomSnapshot(recordingJSON: snapshot.recordingJSON), snapshot)
        XCTAssertEqual(snapshot.recordingJSON["sceneState"], RoomState.initial.sceneState.json)
        XCTAssertEqual(snapshot.recordingJSON["extraInfo"], ["k": "v"])
    }

    // MARK: Merge rules

    func testApplyingPatch_globalState_mergesOneLevelAndNullDeletes() throws {
        var state = RoomState.initial
        state.globalState = ["keep": 1, "replace": ["deep": 1, "other": 2], "remove": true]
        let (next, changed) = try state.applying(patch: ["globalState": ["replace": ["deep": 2], "remove": nil, "add": "x"]])
        XCTAssertEqual(next.globalState, ["keep": 1, "replace": ["deep": 2], "add": "x"])
        XCTAssertEqual(changed, ["globalState"])
        XCTAssertEqual(next.sceneState, state.sceneState)
    }

    func testApplyingPatch_sceneAndBroadcastState_replaceWhole() throws {
        let scenes: JSON = ["scenePath": "/d/b", "scenes": [["name": "a"], ["name": "b"]], "index": 1]
        let broadcast: JSON = ["mode": "broadcaster", "broadcasterId": 4]
        let (next, changed) = try RoomState.initial.applying(patch: ["sceneState": scenes, "broadcastState": broadcast])
        XCTAssertEqual(next.sceneState.json, try SceneState(json: scenes).json)
        XCTAssertEqual(next.broadcastState, BroadcastState(mode: .broadcaster, broadcasterId: 4))
        XCTAssertEqual(changed, ["sceneState", "broadcastState"])
    }

    func testApplyingPatch_whenNothingChanges_reportsNoKeys() throws {
        let (next, changed) = try RoomState.initial.applying(
            patch: ["globalState": ["missing": nil], "broadcastState": ["mode": "freedom"]])
        XCTAssertEqual(next, RoomState.initial)
        XCTAssertEqual(changed, [])
        XCTAssertEqual(try RoomState.initial.applying(patch: [:]).changedKeys, [])
    }

    func testApplyingPatch_whenKeyUnknown_throwsInvalidArgument() {
        assertCode(.invalidArgument) { () throws(ProtocolError) in try RoomState.initial.applying(patch: ["zoomScale": 2]) }
        assertCode(.invalidArgument) { () throws(ProtocolError) in try RoomState.initial.applying(patch: ["globalState": [:], "phase": "x"]) }
    }

    func testApplyingPatch_whenGlobalStateNotObject_throwsInvalidArgument() {
        for value: JSON in [1, "x", [1], nil, true] {
            assertCode(.invalidArgument) { () throws(ProtocolError) in try RoomState.initial.applying(patch: ["globalState": value]) }
        }
    }

    func testApplyingPatch_whenSceneOrBroadcastStateBad_throwsInvalidArgumentEvenForTypeErrors() {
        assertCode(.invalidArgument) { () throws(ProtocolError) in try RoomState.initial.applying(patch: ["sceneState": "x"]) }
        assertCode(.invalidArgument) { () throws(ProtocolError) in try RoomState.initial.applying(patch: ["sceneState": ["scenePath": 1]]) }
        assertCode(.invalidArgument) { () throws(ProtocolError) in try RoomState.initial.applying(patch: ["broadcastState": ["mode": "x"]]) }
        assertCode(.invalidArgument) { () throws(ProtocolError) in try RoomState.initial.applying(patch: ["broadcastState": nil]) }
    }

    func testApplyingViewMode_followsTheBroadcasterRules() {
        let free = BroadcastState(mode: .freedom)
        let live = free.applyingViewMode(.broadcaster, by: 7)
        XCTAssertEqual(live, BroadcastState(mode: .broadcaster, broadcasterId: 7))
        XCTAssertEqual(live.applyingViewMode(.broadcaster, by: 9), BroadcastState(mode: .broadcaster, broadcasterId: 9))
        XCTAssertEqual(live.applyingViewMode(.follower, by: 9), live)
        XCTAssertEqual(live.applyingViewMode(.freedom, by: 9), live)
        XCTAssertEqual(live.applyingViewMode(.follower, by: 7), free)
        XCTAssertEqual(live.applyingViewMode(.freedom, by: 7), free)
        XCTAssertEqual(free.applyingViewMode(.follower, by: 7), free)
    }

    func testMergeMemberState_replacesKeysAndNullDeletes() {
        let merged = RoomState.mergeMemberState(["a": 1, "b": ["x": 1], "c": 3], ["b": ["y": 2], "c": nil, "d": false])
        XCTAssertEqual(merged, ["a": 1, "b": ["y": 2], "d": false])
        XCTAssertEqual(RoomState.mergeMemberState([:], ["gone": nil]), [:])
    }
}
