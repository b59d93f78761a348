import Foundation
import RoomKit
import RoomKitProtocol
import RoomKitTestSupport
import XCTest

/// Issue #27 §6: the seed's custom global-state contract holds for the
/// first state the app sees (the login snapshot), not only for pushes.
final class GlobalStateSnapshotTests: XCTestCase {
    func testLogin_whoseSnapshotDoesNotDecodeAsTheCustomType_raisesCatchErrorWithMemberIdZero() async throws {
        struct Board: Decodable { let title: String }
        let harness = try EngineHarness()
        let other = try harness.host(viaProxy: false)
        let otherRoom = try await other.loginRoom("lobby", user: harness.user("b"), token: harness.token("b"))
        try await otherRoom.setGlobalState(["title": 42])

        let events = EventRecorder()
        let host = try harness.host(recorder: events)
        host.registerGlobalStateType(Board.self)
        let room = try await host.loginRoom("lobby", user: harness.user("a"), token: harness.token("a"))
        await eventually(3, "catchErrorWhenAppendFrame for the snapshot") {
            events.count { if case .catchErrorWhenAppendFrame("lobby", 0, let error) = $0 { return error.contains("Board") }; return false } == 1
        }
        XCTAssertEqual(room.phase, .connected, "the session goes on")

        // A snapshot that fits raises nothing.
        let fits = EventRecorder()
        let third = try harness.host(recorder: fits)
        third.registerGlobalStateType(Board.self)
        try await otherRoom.setGlobalState(["title": "fixed"])
        _ = try await third.loginRoom("lobby", user: harness.user("c"), token: harness.token("c"))
        XCTAssertEqual(fits.count { if case .catchErrorWhenAppendFrame = $0 { return true }; return false }, 0)
        try await harness.close()
    }
}
