import Foundation
import RoomKit
@testable import RoomKitPluginHost
import RoomKitProtocol
import RoomKitTestSupport
import XCTest

/// A process plugin given a backlog far larger than one write (the loop ran
/// ahead of the plugin's queue, so the runtime drains many turns as one
/// batch): the journal encodes and writes it a slice at a time
/// (`PluginProcess.deliverSlice`), and the child still gets every record
/// once, in order, with nothing dropped.
final class ProcessBacklogTests: XCTestCase {
    /// Aborts (a crash, counted in the report) on the first event out of order.
    static let ordered = TestPlugins.plugin(hooks: ".on_player_event = player,", body: """
        static long expected;
        static void player(void *self, int32_t kind, const char *room, const char *payload) {
            (void)self; (void)kind; (void)room;
            if (strtol(payload, NULL, 10) != expected) abort();
            expected++;
        }
        """)

    func testABacklogOfManySlices_reachesTheChild_once_inOrder_nothingDropped() async throws {
        let harness = try PluginHarness()
        let library = try compilePlugin("ordered", source: Self.ordered, in: harness.directory)
        let (_, errors) = try harness.botHost(manifest: manifest([
            pluginEntry("ordered", library: library, hooks: ["player"], timeoutMs: 5_000, isolation: "process",
                        supervision: ["queueLimit": 1_000_000]),
        ]))
        XCTAssertEqual(errors, [])
        let manager = harness.manager!
        let events = PluginProcess.deliverSlice * 7 + 13
        // One loop callback: one turn, one batch for the plugin's queue, 8 slices.
        _ = harness.clientLoop.execute {
            for index in 0..<events { manager.dispatchPlayerEvent(kind: 4, room: "lobby", text: "\(index)") }
        }
        await eventually(20, "every event finished") {
            guard let report = manager.reports.first, let process = report.process else { return false }
            return report.calls >= events && process.pending == 0
        }
        let report = try XCTUnwrap(manager.reports.first)
        XCTAssertEqual(report.calls, events, "each event once")
        XCTAssertEqual(report.failures, 0)
        XCTAssertEqual(report.process?.crashes, 0, "no event out of order (the plugin aborts on one)")
        XCTAssertEqual(report.process?.dropped, 0)
        try await harness.close()
    }
}
