import Foundation
import Logging
import RoomKit
@testable import RoomKitBot
@testable import RoomKitPluginHost
import RoomKitProtocol
import RoomKitTestSupport
import XCTest

/// Issue #28 §3: the room detail view's plugin calls and errors
/// (`GET /v1/rooms/{id}`'s `pluginCalls`, docs/DASHBOARD.md), against a
/// running bot on a real roomd with a plugin that fails in one room only.
final class RoomPluginCallsTests: XCTestCase {
    private let controlToken = "room-calls-token-0123"

    /// A room and magix plugin that overruns its 100 ms `timeoutMs` on a
    /// magix event named `fail.me` in room `slow`, and answers at once otherwise.
    static let picky = """
        #include "roomkit_plugin.h"
        #include <string.h>
        #include <unistd.h>
        static void on_event(void *self, int32_t kind, const char *room, const char *payload) {
            (void)self; (void)kind;
            if (strcmp(room, "slow") == 0 && payload && strstr(payload, "fail.me")) usleep(400000);
        }
        static roomkit_plugin descriptor = {
            .struct_size = sizeof(roomkit_plugin), .abi_major = ROOMKIT_PLUGIN_ABI_MAJOR, .abi_minor = ROOMKIT_PLUGIN_ABI_MINOR,
            .on_room_event = on_event,
        };
        const roomkit_plugin *roomkit_plugin_entry(uint16_t major, uint16_t minor) { (void)major; (void)minor; return &descriptor; }
        """

    private func startBot(_ harness: BotHarness) async throws -> (BotRunner, Int) {
        let library = try compilePlugin("picky", source: Self.picky, in: harness.directory)
        let (runner, port) = try await harness.startRunner(plugins: [
            ["name": "picky", "library": .string(library), "abi": 1, "hooks": ["room", "magix"], "isolation": "inline",
             "timeoutMs": 100],
        ], rooms: ["lobby", "slow"], controlToken: controlToken)
        await eventually(15, "ready") { httpRequest(port: port, "GET", "/readyz", token: self.controlToken).contains(" 200 ") }
        return (runner, port)
    }

    private func calls(_ port: Int, _ room: String) -> [JSON] {
        let text = httpRequest(port: port, "GET", "/v1/rooms/\(room)", token: controlToken)
        let body = text.components(separatedBy: "\r\n\r\n").dropFirst().joined(separator: "\r\n\r\n")
        return (try? JSON.parse(body))?["pluginCalls"]?.arrayValue ?? []
    }

    func testRoomDetail_countsEachPluginsCallsAndFailures_perRoom_andForgetsARoomAtLogout() async throws {
        let harness = try BotHarness()
        defer { try? harness.close() }
        let (runner, port) = try await startBot(harness)

        // Both rooms' login events reached the plugin: calls, no failure.
        await eventually(10, "lobby counted") { (self.calls(port, "lobby").first?["calls"]?.intValue ?? 0) > 0 }
        let lobby = calls(port, "lobby")
        XCTAssertEqual(lobby.count, 1, "\(lobby)")
        XCTAssertEqual(lobby.first?["plugin"]?.stringValue, "picky")
        XCTAssertEqual(lobby.first?["hook"]?.stringValue, "on_room_event")
        XCTAssertEqual(lobby.first?["failures"]?.intValue, 0)
        XCTAssertEqual(lobby.first?["lastError"], .null)
        XCTAssertEqual(lobby.first?["lastErrorAt"], .null)

        // One magix event from another member overruns the plugin's
        // timeoutMs in `slow` only (a member's own magix is not sent back to it).
        let watcher = try Watcher(url: harness.serverURL)
        let handle = try await watcher.host.loginRoom("slow", user: LoginUser(id: "watcher"), token: harness.token("watcher"))
        let before = Int(Date().timeIntervalSince1970 * 1000)
        _ = try await handle.dispatchMagixEvent("fail.me", payload: .null)
        await eventually(10, "slow's failure counted") { self.calls(port, "slow").first?["failures"]?.intValue == 1 }
        let slow = try XCTUnwrap(calls(port, "slow").first)
        XCTAssertEqual(slow["plugin"]?.stringValue, "picky")
        XCTAssertEqual(slow["hook"]?.stringValue, "on_room_event")
        XCTAssertGreaterThanOrEqual(slow["calls"]?.intValue ?? 0, 2, "its login events and the magix")
        XCTAssertEqual(slow["lastError"]?.stringValue?.contains("took longer than"), true, "\(slow)")
        XCTAssertGreaterThanOrEqual(slow["lastErrorAt"]?.intValue ?? 0, before)
        XCTAssertEqual(calls(port, "lobby").first?["failures"]?.intValue, 0, "lobby is not charged for slow's failure")
        XCTAssertEqual(runner.plugins.reports.first { $0.name == "picky" }?.status, .loaded, "one failure does not quarantine")

        // slow's session ends: its entry goes (after the LOGOUT event's own call).
        let out = httpRequest(port: port, "POST", "/v1/rooms/slow/logout", token: controlToken, body: "{}")
        XCTAssertTrue(out.contains(" 200 "), out)
        await eventually(10, "slow forgotten") { self.calls(port, "slow").isEmpty }
        // Let anything still queued for it run; it must not bring the entry back.
        try await Task.sleep(for: .milliseconds(300))
        XCTAssertEqual(calls(port, "slow").count, 0)
        XCTAssertEqual(calls(port, "lobby").count, 1)
        try await watcher.close()
        await runner.stop()
    }

    func testProcessPlugin_crashOnOneRoomsEvent_isThatRoomsFailure_andTheSecondIsPoison() async throws {
        // The built roombot with a process plugin that segfaults on the magix "boom" in lobby.
        let scenario = try await IsolationScenario(
            bad: { IsolationPlugins.source(record: $0, trigger: IsolationPlugins.onBoom, misbehave: IsolationPlugins.segfault) },
            supervision: [:])
        try await scenario.send([.int(1), .string("boom"), .int(2)])
        try await scenario.send([.int(3)], in: "hall")
        func row(_ room: String) -> JSON? {
            (try? JSON.parse(http(scenario.port, "GET", "/v1/rooms/\(room)").1))?["pluginCalls"]?.arrayValue?
                .first { $0["plugin"]?.stringValue == "bad" }
        }
        await eventually(15, "lobby's crashes counted") { row("lobby")?["failures"]?.intValue == 2 }
        let lobby = try XCTUnwrap(row("lobby"))
        XCTAssertEqual(lobby["hook"]?.stringValue, "on_room_event")
        XCTAssertEqual(lobby["lastError"]?.stringValue?.hasPrefix("poison: skipped magix in room lobby"), true, "\(lobby)")
        await eventually(10, "hall's event reached the plugin") { (row("hall")?["calls"]?.intValue ?? 0) > 0 }
        XCTAssertEqual(row("hall")?["failures"]?.intValue, 0, "hall is not charged for lobby's crashes")
        try await scenario.finish()
    }

    func testProcessPlugin_roomCallIsCountedAtTheChildsDone_notAtHandOver() async throws {
        // The built roombot with a process plugin that holds the magix "boom"
        // in lobby until a file appears (well inside its timeoutMs).
        let scenario = try await IsolationScenario(
            bad: { record in
                IsolationPlugins.source(record: record, trigger: IsolationPlugins.onBoom,
                                        misbehave: "while (access(\"\(record).release\", F_OK) != 0) usleep(5000);")
            },
            supervision: ["timeoutMs": 20_000])
        let release = scenario.badRecord + ".release"
        func row() -> JSON? {
            (try? JSON.parse(http(scenario.port, "GET", "/v1/rooms/lobby").1))?["pluginCalls"]?.arrayValue?
                .first { $0["plugin"]?.stringValue == "bad" }
        }
        func pending() -> Int? { (try? scenario.plugin("bad"))?["process"]?["pending"]?.intValue }
        try await scenario.send([.int(1)])
        await eventually(15, "the first magix finished") { IsolationScenario.recorded(scenario.badRecord) == [.int(1)] && pending() == 0 }
        let before = try XCTUnwrap(row()?["calls"]?.intValue)

        // Handed over and held in the child: not a call of lobby yet.
        try await scenario.send([.string("boom")])
        await eventually(10, "boom handed to the child") { pending() == 1 }
        try await Task.sleep(for: .milliseconds(200))
        XCTAssertEqual(row()?["calls"]?.intValue, before, "a call the child has not finished is not counted")

        // Its DONE counts it, as an inline call counts when it returns.
        XCTAssertTrue(FileManager.default.createFile(atPath: release, contents: Data()))
        await eventually(10, "boom counted at DONE") { row()?["calls"]?.intValue == before + 1 }
        XCTAssertEqual(pending(), 0)
        XCTAssertEqual(row()?["failures"]?.intValue, 0)
        try await scenario.finish()
    }

    func testRoomTally_keepsRoomsWithCallsOnly_andCutsALongError() {
        let tally = PluginRoomTally()
        XCTAssertEqual(tally.roomCount, 0)
        tally.count("a", .roomEvent)
        tally.count("a", .roomEvent, failure: "first")
        tally.count("a", .roomEvent, call: false, failure: String(repeating: "x", count: 1000))
        tally.count("b", .playerEvent)
        var runs = PluginRoomTally.Runs()
        for room in ["b", "c", "c", "b", "c"] { runs.add(room) }  // runs: b, c×2, b, c
        tally.count(runs, .roomEvent)
        tally.count(PluginRoomTally.Runs(), .roomEvent)  // an empty batch adds nothing
        XCTAssertEqual(tally.roomCount, 3)
        XCTAssertEqual(tally.counts(of: "b")[.roomEvent]?.calls, 2)
        XCTAssertEqual(tally.counts(of: "c")[.roomEvent]?.calls, 3)
        XCTAssertEqual(tally.counts(of: "b")[.playerEvent]?.calls, 1)
        let a = tally.counts(of: "a")[.roomEvent]
        XCTAssertEqual(a?.calls, 2)
        XCTAssertEqual(a?.failures, 2)
        XCTAssertEqual(a?.lastError?.count, PluginRoomTally.maxErrorLength + 1)
        tally.forget("a")
        XCTAssertEqual(tally.roomCount, 2)
        XCTAssertTrue(tally.counts(of: "a").isEmpty)
    }
}
