import Foundation
import RoomKit
import RoomKitProtocol
import RoomKitTestSupport
import XCTest

/// The seed's three reconnect scenarios, through the fault proxy, with a
/// 1.5 s server heartbeat timeout.
final class ReconnectTests: XCTestCase {
    private func isUserUpdate(_ event: RoomEvent, _ type: UpdateType, _ user: String) -> Bool {
        if case .userUpdate(_, type, let users) = event { return users.contains { $0.userId == user } }
        return false
    }

    func testScenario1_blipShorterThanTheHeartbeatTimeout_isInvisibleToOthers_andMissedEventsArriveOnceInOrder() async throws {
        let harness = try EngineHarness()
        let events = EventRecorder()
        let otherEvents = EventRecorder()
        let host = try harness.host(recorder: events)
        let other = try harness.host(viaProxy: false, recorder: otherEvents)
        let room = try await host.loginRoom("lobby", user: harness.user("a"), token: harness.token("a"))
        let otherRoom = try await other.loginRoom("lobby", user: harness.user("b"), token: harness.token("b"))
        await eventually(3) { room.roomMembers.count == 2 }

        harness.proxy.setMode(.down)
        harness.proxy.cut()
        await eventually(3, "RECONNECTING") { events.reasons("lobby").last == "RECONNECTING 1002051" }
        for i in 0..<20 {
            try await otherRoom.dispatchMagixEvent("chat", payload: .int(Int64(i)))
        }
        try await otherRoom.setGlobalState(["during": true])
        harness.proxy.setMode(.pass)
        await eventually(3, "RECONNECTED") { events.reasons("lobby").last == "RECONNECTED 0" }
        await eventually(3, "missed events") {
            events.count { if case .magix(let m) = $0 { return m.event == "chat" }; return false } == 20
        }
        let payloads = events.all.compactMap { event -> Int64? in
            if case .magix(let magix) = event { return magix.payload.int64Value }
            return nil
        }
        XCTAssertEqual(payloads, (0..<20).map(Int64.init), "recovered exactly once, in order")
        XCTAssertEqual(room.globalState["during"], true)
        XCTAssertEqual(events.reasons("lobby"), ["LOGINING 0", "LOGINED 0", "RECONNECTING 1002051", "RECONNECTED 0"])
        XCTAssertTrue(events.all.contains { if case .disconnectWithError("lobby", _) = $0 { return true }; return false })
        XCTAssertEqual(otherEvents.count { isUserUpdate($0, .delete, "a") }, 0, "the blip must stay invisible")
        try await harness.close()
    }

    func testScenario2_outageLongerThanTheHeartbeatTimeout_othersSeeDeleteThenAddOnResume() async throws {
        let harness = try EngineHarness()
        let events = EventRecorder()
        let otherEvents = EventRecorder()
        let host = try harness.host(recorder: events)
        let other = try harness.host(viaProxy: false, recorder: otherEvents)
        try await other.loginRoom("lobby", user: harness.user("b"), token: harness.token("b"))
        let room = try await host.loginRoom("lobby", user: harness.user("a"), token: harness.token("a"))
        let memberId = room.memberId

        harness.proxy.setMode(.down)
        harness.proxy.cut()
        await eventually(5, "others see the delete after the heartbeat timeout") {
            otherEvents.count { self.isUserUpdate($0, .delete, "a") } == 1
        }
        harness.proxy.setMode(.pass)
        await eventually(5, "RECONNECTED") { events.reasons("lobby").last == "RECONNECTED 0" }
        await eventually(3, "others see the add") { otherEvents.count { self.isUserUpdate($0, .add, "a") } == 2 }
        XCTAssertEqual(room.memberId, memberId, "a resume keeps the member ID")
        XCTAssertEqual(other.room("lobby")?.roomMembers.map(\.userId).sorted(), ["a", "b"])
        try await harness.close()
    }

    func testScenario3_outageLongerThanTheReconnectWindow_failsWith1002053AndStopsTrying() async throws {
        let harness = try EngineHarness()
        let events = EventRecorder()
        let host = try harness.host(recorder: events) { $0.reconnectWindow = .seconds(1) }
        try await host.loginRoom("lobby", user: harness.user("a"), token: harness.token("a"))
        harness.proxy.setMode(.down)
        harness.proxy.cut()
        await eventually(4, "RECONNECT_FAILED") { events.reasons("lobby").last == "RECONNECT_FAILED 1002053" }
        harness.proxy.setMode(.pass)
        try await Task.sleep(for: .milliseconds(600))
        XCTAssertEqual(events.reasons("lobby"), ["LOGINING 0", "LOGINED 0", "RECONNECTING 1002051", "RECONNECT_FAILED 1002053"])
        XCTAssertEqual(host.room("lobby")?.phase, .disconnected)
        try await harness.close()
    }

    func testSilentPartition_isDetectedWithoutAnyCloseAndResumed() async throws {
        let harness = try EngineHarness()
        let events = EventRecorder()
        let host = try harness.host(recorder: events)
        try await host.loginRoom("lobby", user: harness.user("a"), token: harness.token("a"))
        harness.proxy.setMode(.blackhole)
        let started = Date()
        // Pings every 200 ms: two intervals of silence mean dead (plus the 20 ms tick).
        await eventually(3, "RECONNECTING on silence") { events.reasons("lobby").last == "RECONNECTING 1002051" }
        XCTAssertLessThan(Date().timeIntervalSince(started), 0.6, "detected within about 2 heartbeat intervals")
        harness.proxy.setMode(.pass)
        harness.proxy.cut()
        await eventually(3, "RECONNECTED") { events.reasons("lobby").last == "RECONNECTED 0" }
        try await harness.close()
    }

    func testLogout_duringReconnectBackoff_stopsTheRetriesAtOnce() async throws {
        let harness = try EngineHarness()
        let events = EventRecorder()
        let host = try harness.host(recorder: events)
        try await host.loginRoom("lobby", user: harness.user("a"), token: harness.token("a"))
        harness.proxy.setMode(.down)
        harness.proxy.cut()
        await eventually(3, "RECONNECTING") { events.reasons("lobby").last == "RECONNECTING 1002051" }
        let started = Date()
        try await host.logoutRoom("lobby")
        XCTAssertLessThan(Date().timeIntervalSince(started), 1)
        XCTAssertEqual(events.reasons("lobby").last, "LOGOUT 0")
        harness.proxy.setMode(.pass)
        try await Task.sleep(for: .milliseconds(500))
        XCTAssertEqual(events.reasons("lobby").last, "LOGOUT 0", "no resume after logout")
        try await harness.close()
    }
}
