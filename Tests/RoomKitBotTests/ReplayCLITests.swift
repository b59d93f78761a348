import Foundation
import RoomKit
import RoomKitProtocol
import RoomKitTestSupport
import XCTest

final class ReplayCLITests: XCTestCase {
    func testReplay_writesThePlayerEventsInTheEventLogFormat_andExits0AtEnded() async throws {
        let harness = try BotHarness()
        defer { try? harness.close() }
        let watcher = try Watcher(url: harness.serverURL)
        let room = try await watcher.host.loginRoom("recorded", user: LoginUser(id: "w"), token: harness.token("w"))
        for i in 0..<5 {
            try await room.dispatchMagixEvent("chat", payload: .int(Int64(i)))
            try await room.setGlobalState(["count": .int(Int64(i))])
        }
        try await watcher.close()
        let replay = try ChildProcess("roombot", ["replay", "--server", harness.serverURL, "--room", "recorded",
                                                  "--token", harness.token("viewer"), "--speed", "16"])
        let (status, output, errors) = replay.finish(timeout: 30)
        XCTAssertEqual(status, 0, errors)
        let lines = try output.split(separator: "\n").map { try JSON.parse(String($0)) }
        XCTAssertTrue(lines.allSatisfy { $0["ts"]?.int64Value != nil && $0["event"]?.stringValue != nil })
        let phases = lines.filter { $0["event"] == "playerPhase" }.compactMap { $0["phase"]?.stringValue }
        XCTAssertEqual(phases.first, "playing", "\(phases)")
        XCTAssertEqual(phases.last, "ended", "\(phases)")
        XCTAssertEqual(lines.filter { $0["event"] == "loadFirstFrame" }.count, 1)
        let magix = lines.filter { $0["event"] == "magix" }
        XCTAssertEqual(magix.compactMap { $0["payload"]?.int64Value }, [0, 1, 2, 3, 4], "replayed in order")
        XCTAssertTrue(magix.allSatisfy { $0["magixEvent"] == "chat" }, "the custom event's name")
        XCTAssertTrue(lines.contains { $0["event"] == "playerStateChanged" && ($0["keys"]?.arrayValue ?? []).contains("globalState") })
    }

    func testReplay_withABadTokenOrAnUnknownRoom_exits1WithAClearMessage() async throws {
        let harness = try BotHarness()
        defer { try? harness.close() }
        let watcher = try Watcher(url: harness.serverURL)
        _ = try await watcher.host.loginRoom("exists", user: LoginUser(id: "w"), token: harness.token("w"))
        try await watcher.close()
        let badToken = try ChildProcess("roombot", ["replay", "--server", harness.serverURL, "--room", "exists", "--token", "nope"])
        let (status1, _, errors1) = badToken.finish(timeout: 20)
        XCTAssertEqual(status1, 1)
        XCTAssertTrue(errors1.contains("replay of exists failed: the token was refused"), errors1)
        let unknown = try ChildProcess("roombot", ["replay", "--server", harness.serverURL, "--room", "ghost",
                                                   "--token", harness.token("viewer")])
        let (status2, _, errors2) = unknown.finish(timeout: 20)
        XCTAssertEqual(status2, 1)
        XCTAssertTrue(errors2.contains("replay of ghost failed: no such room"), errors2)
    }
}

final class ReplayPluginTests: XCTestCase {
    /// A C plugin with only on_player_event: appends "kind payload" lines to config.file.
    static let playerPlugin = """
        #include "roomkit_plugin.h"
        #include <stdio.h>
        #include <string.h>
        static char path[512];
        static int on_load(void *self, const roomkit_host_api *api, const char *config) {
            (void)self; (void)api;
            const char *at = strstr(config, "\\"file\\":\\"");
            if (!at) return 1;
            at += 8;
            size_t n = 0;
            while (at[n] && at[n] != '"' && n + 1 < sizeof path) { path[n] = at[n]; n++; }
            path[n] = 0;
            return 0;
        }
        static void on_player_event(void *self, int32_t kind, const char *room, const char *payload) {
            (void)self;
            FILE *f = fopen(path, "a");
            if (!f) return;
            fprintf(f, "%d %s %s\\n", kind, room, payload);
            fclose(f);
        }
        static roomkit_plugin descriptor = {
            .struct_size = sizeof(roomkit_plugin), .abi_major = ROOMKIT_PLUGIN_ABI_MAJOR, .abi_minor = ROOMKIT_PLUGIN_ABI_MINOR,
            .on_load = on_load, .on_player_event = on_player_event,
        };
        const roomkit_plugin *roomkit_plugin_entry(uint16_t major, uint16_t minor) { (void)minor; return major == 1 ? &descriptor : NULL; }
        """

    func testReplayWithAManifest_deliversPlayerEventsToThePlayerHook() async throws {
        try await replayDeliversPlayerEvents(isolation: "inline")
    }

    /// The same plugin in its own process: player events take the room
    /// events' route (the turn's batch, PLAYER records in EVENTS frames).
    func testReplayWithAManifest_deliversPlayerEventsToAProcessPlugin() async throws {
        try await replayDeliversPlayerEvents(isolation: "process")
    }

    private func replayDeliversPlayerEvents(isolation: String) async throws {
        let harness = try BotHarness()
        defer { try? harness.close() }
        let watcher = try Watcher(url: harness.serverURL)
        let room = try await watcher.host.loginRoom("played", user: LoginUser(id: "w"), token: harness.token("w"))
        try await room.dispatchMagixEvent("chat", payload: "hello")
        try await watcher.close()

        let library = try compilePlugin("player", source: Self.playerPlugin, in: harness.directory)
        let events = harness.directory + "/player-events.txt"
        let manifest = try harness.writeConfig(["manifestVersion": 1, "plugins": [
            ["name": "recorder", "library": .string(library), "abi": 1, "hooks": ["player"], "config": ["file": .string(events)],
             "isolation": .string(isolation)],
        ]], name: "plugins.json")
        let replay = try ChildProcess("roombot", ["replay", "--server", harness.serverURL, "--room", "played",
                                                  "--token", harness.token("viewer"), "--speed", "16", "--manifest", manifest])
        let (status, _, errors) = replay.finish(timeout: 30)
        XCTAssertEqual(status, 0, errors)
        let lines = try String(contentsOfFile: events, encoding: .utf8).split(separator: "\n").map(String.init)
        XCTAssertTrue(lines.contains { $0.hasPrefix("1 played ") && $0.contains(#""phase":"playing""#) }, "\(lines)")
        XCTAssertTrue(lines.contains { $0.hasPrefix("1 played ") && $0.contains(#""phase":"ended""#) }, "\(lines)")
        XCTAssertTrue(lines.contains { $0.hasPrefix("7 played ") && $0.contains(#""payload":"hello""#) }, "the magix, kind 7")
    }
}
