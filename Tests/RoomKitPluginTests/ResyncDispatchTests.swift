import Foundation
import RoomKit
import RoomKitProtocol
import RoomKitTestSupport
import XCTest

/// ABI 1.1 adds ROOMKIT_ROOM_RESYNC; 1.0 plugins keep loading and never see it.
final class ResyncDispatchTests: XCTestCase {
    func testResync_reachesA1_1Plugin_withItsSeqs_andNeverA1_0Plugin_whichStillLoadsAndHearsTheRest() async throws {
        let harness = try PluginHarness()
        let dir = harness.directory
        let newer = dir + "/newer.lines", older = dir + "/older.lines"
        let v11 = try compilePlugin("probe11", source: ProbePlugin.source(output: newer), in: dir)
        let v10 = try compilePlugin("probe10", source: ProbePlugin.source(output: older, minor: "0"), in: dir)
        // A stored session the server never had: the login goes fresh, and continuity is lost.
        let store = InMemorySessionStore()
        let user = LoginUser(id: "bot")
        store.save(SessionStoreChanges(updated: [SessionCursor(
            room: "lobby", session: "s-unknown", memberId: 99, seq: 7, user: user, writable: true,
            snapshot: RoomSnapshot(state: .initial))]))
        let (bot, errors) = try harness.botHost(manifest: manifest([
            pluginEntry("probe-11", library: v11, hooks: ["room"]),
            pluginEntry("probe-10", library: v10, hooks: ["room"]),
        ])) { $0.sessionStore = store }
        XCTAssertEqual(errors, [], "a 1.0 plugin loads in a 1.1 host")
        let room = try await bot.loginRoom("lobby", user: user, token: harness.token("bot"))

        await eventually(3, "the 1.1 plugin hears resync") { ProbePlugin.lines(newer).contains { $0.kind == 13 } }
        let resync = ProbePlugin.lines(newer).filter { $0.kind == 13 }
        XCTAssertEqual(resync.count, 1)
        let payload = try JSON.parse(Array(resync[0].payload.utf8))
        XCTAssertEqual(payload["reason"], "sessionExpired")
        XCTAssertEqual(payload["lastAppliedSeq"], 7)
        XCTAssertEqual(payload["resumedAtSeq"]?.int64Value, room.content.seq)
        XCTAssertEqual(resync[0].room, "lobby")

        await eventually(3, "the 1.0 plugin hears LOGINED") { ProbePlugin.lines(older).contains { $0.payload.contains("LOGINED") } }
        try await Task.sleep(for: .milliseconds(200))
        XCTAssertEqual(ProbePlugin.lines(older).filter { $0.kind == 13 }.count, 0, "a 1.0 plugin never sees a kind it does not know")
        XCTAssertEqual(ProbePlugin.lines(older).count, ProbePlugin.lines(newer).count - 1, "everything else reaches both")
        try await harness.close()
    }
}
