import Foundation
import RoomKit
import RoomKitProtocol
import RoomKitTestSupport
import XCTest

final class RoomStateTests: XCTestCase {
    func testOwnChanges_neverFireRoomStateChanged_whileOthersSeeThePartialDiff() async throws {
        let harness = try EngineHarness()
        let events = EventRecorder()
        let otherEvents = EventRecorder()
        let host = try harness.host(recorder: events)
        let other = try harness.host(viaProxy: false, recorder: otherEvents)
        let room = try await host.loginRoom("lobby", user: harness.user("a"), token: harness.token("a"))
        let otherRoom = try await other.loginRoom("lobby", user: harness.user("b"), token: harness.token("b"))
        let seq = try await room.setGlobalState(["topic": "hello", "count": 1])
        XCTAssertEqual(room.globalState["topic"], "hello", "own change is in the cache at once")
        XCTAssertGreaterThan(seq, 0)
        await eventually(3, "other sees the change") { otherRoom.globalState["topic"] == "hello" }
        let diffs = otherEvents.all.compactMap { event -> RoomStateDiff? in
            if case .roomStateModified("lobby", room.memberId, let diff) = event { return diff }
            return nil
        }
        XCTAssertEqual(diffs.last?.keys, ["globalState"])
        XCTAssertEqual(diffs.last?.globalState?["count"], 1)
        try await Task.sleep(for: .milliseconds(200))
        XCTAssertEqual(events.count { if case .roomStateModified(_, room.memberId, _) = $0 { return true }; return false }, 0)

        // Merge rules: a null deletes, other keys stay.
        try await otherRoom.setGlobalState(["count": nil, "more": true])
        await eventually(3) { room.globalState["more"] == true }
        XCTAssertNil(room.globalState["count"])
        XCTAssertEqual(room.globalState["topic"], "hello")
        let fetched = try await room.getGlobalState()
        XCTAssertEqual(fetched, room.globalState)
        try await harness.close()
    }

    func testCustomGlobalState_thatDoesNotDecode_raisesCatchErrorWithTheSendersMemberId_andTheSessionGoesOn() async throws {
        struct Board: Decodable { let title: String }
        let harness = try EngineHarness()
        let events = EventRecorder()
        let host = try harness.host(recorder: events)
        host.registerGlobalStateType(Board.self)
        let other = try harness.host(viaProxy: false)
        let room = try await host.loginRoom("lobby", user: harness.user("a"), token: harness.token("a"))
        let otherRoom = try await other.loginRoom("lobby", user: harness.user("b"), token: harness.token("b"))
        try await otherRoom.setGlobalState(["title": 42])
        await eventually(3, "catchErrorWhenAppendFrame") {
            events.count { if case .catchErrorWhenAppendFrame("lobby", otherRoom.memberId!, _) = $0 { return true }; return false } == 1
        }
        try await otherRoom.setGlobalState(["title": "fixed"])
        await eventually(3) { room.globalState["title"] == "fixed" }
        XCTAssertEqual(try room.globalState(as: Board.self).title, "fixed")
        XCTAssertEqual(room.phase, .connected)
        try await harness.close()
    }

    func testMagix_withTo_reachesOnlyTheAddressees_andListenersByName() async throws {
        let harness = try EngineHarness()
        let hosts = try (0..<3).map { _ in try harness.host(viaProxy: false) }
        var rooms: [Room] = []
        for (index, name) in ["a", "b", "c"].enumerated() {
            rooms.append(try await hosts[index].loginRoom("lobby", user: harness.user(name), token: harness.token(name)))
        }
        final class Inbox: @unchecked Sendable { // guarded by lock
            let lock = NSLock(); var got: [String] = []
            func add(_ s: String) { lock.lock(); got.append(s); lock.unlock() }
            var all: [String] { lock.lock(); defer { lock.unlock() }; return got }
        }
        let inboxB = Inbox(), inboxC = Inbox()
        let listenerB = rooms[1].addMagixEventListener("note") { inboxB.add($0.payload.stringValue ?? "") }
        let listenerC = rooms[2].addMagixEventListener("note") { inboxC.add($0.payload.stringValue ?? "") }
        try await rooms[0].dispatchMagixEvent("note", payload: "for c", to: ["c"])
        try await rooms[0].dispatchMagixEvent("note", payload: "for all")
        await eventually(3) { inboxC.all.count == 2 && inboxB.all.count == 1 }
        XCTAssertEqual(inboxC.all, ["for c", "for all"])
        XCTAssertEqual(inboxB.all, ["for all"])
        listenerB.cancel()
        listenerC.cancel()
        try await harness.close()
    }

    func testURLInterrupter_rewritesImageAndSceneURLsBeforeTheyAreSent() async throws {
        final class Rewriter: CommonCallbacks {
            func urlInterrupter(_ url: String) async -> String {
                url.replacingOccurrences(of: "http://", with: "https://cdn.example/")
            }
        }
        let harness = try EngineHarness()
        let host = try harness.host()
        let rewriter = Rewriter()
        host.commonCallbacks = rewriter
        let other = try harness.host(viaProxy: false)
        let room = try await host.loginRoom("lobby", user: harness.user("a"), token: harness.token("a"))
        let otherRoom = try await other.loginRoom("lobby", user: harness.user("b"), token: harness.token("b"))
        let (_, url) = try await room.insertImage(Image(uuid: "i1", url: "http://img/1.png", x: 0, y: 0, width: 10, height: 10))
        XCTAssertEqual(url, "https://cdn.example/img/1.png")
        await eventually(3) { otherRoom.sceneState.scenes.first?.images.first?.url == "https://cdn.example/img/1.png" }
        XCTAssertEqual(room.sceneState.scenes.first?.images.first?.url, "https://cdn.example/img/1.png", "own cache from the reply")
        try await room.putScenes(dir: "/deck", scenes: [Scene(name: "p1", ppt: PPT(src: "http://ppt/1.png", width: 4, height: 3))])
        try await room.setScenePath("/deck/p1")
        await eventually(3) { otherRoom.sceneState.scenePath == "/deck/p1" }
        XCTAssertEqual(otherRoom.sceneState.scenes.first?.ppt?.src, "https://cdn.example/ppt/1.png")
        XCTAssertEqual(room.sceneState.scenePath, "/deck/p1")
        try await harness.close()
    }

    func testMembersStreamsExtraInfoAndViewMode_areCachedAndReported() async throws {
        let harness = try EngineHarness()
        let events = EventRecorder()
        let host = try harness.host(recorder: events)
        let other = try harness.host(viaProxy: false)
        let room = try await host.loginRoom("lobby", user: harness.user("a"), token: harness.token("a"))
        let otherRoom = try await other.loginRoom("lobby", user: harness.user("b"), token: harness.token("b"))
        try await otherRoom.publishStream("cam-b", extraInfo: "720p")
        try await otherRoom.setExtraInfo(key: "topic", value: "standup")
        try await otherRoom.setMemberState(["tool": "pen"])
        try await otherRoom.setViewMode(.broadcaster)
        await eventually(3) { room.broadcastState.broadcasterId == otherRoom.memberId }
        XCTAssertEqual(room.streams.map(\.id), ["cam-b"])
        XCTAssertEqual(room.extraInfo["topic"], "standup")
        XCTAssertEqual(room.roomMembers.first { $0.userId == "b" }?.memberState["tool"], "pen")
        XCTAssertEqual(otherRoom.broadcastState.mode, .broadcaster, "own cache from the reply's patch")
        XCTAssertTrue(events.all.contains { if case .streamUpdate("lobby", .add, let s) = $0 { return s.map(\.id) == ["cam-b"] }; return false })
        XCTAssertTrue(events.all.contains(.extraInfoUpdate(room: "lobby", key: "topic", value: "standup")))
        let state = try await room.getRoomState()
        XCTAssertEqual(state.members.count, 2)
        let phase = try await room.getRoomPhase()
        XCTAssertEqual(phase, .connected)
        room.setZoomScale(1.5)
        let zoom = try await room.getZoomScale()
        XCTAssertEqual(zoom, 1.5)
        try await harness.close()
    }
}
