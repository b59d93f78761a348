import Foundation
import RoomKit
import RoomKitProtocol
import RoomKitTestSupport
import XCTest

/// ABI 1.1 storage as an operator's bot uses it: the real `roombot`, a C
/// plugin in its own process (the default isolation) counting in `kv_*`,
/// across a clean restart and a kill -9. The counts live in the bot's one
/// durable store, `bot.state.sqlite`, beside its sessions.
final class PluginStorageProcessTests: XCTestCase {
    /// On magix `bump`: reads `n`, adds one, writes it back, answers `count` {"n", "rc"}.
    static let counter = #"""
        #include "roomkit_plugin.h"
        #include "roomkit_json.h"
        #include <stdio.h>
        #include <stdlib.h>
        #include <string.h>

        static const roomkit_host_api *host;

        static int on_load(void *self, const roomkit_host_api *api, const char *config) {
            (void)self; (void)config; host = api;
            return ROOMKIT_HAS_MEMBER(api, kv_set) ? 0 : 1;
        }
        static void on_event(void *self, int32_t kind, const char *room, const char *payload) {
            (void)self;
            char event[16];
            if (kind != ROOMKIT_ROOM_MAGIX || roomkit_json_string(payload, "event", event, sizeof event) < 0) return;
            if (strcmp(event, "bump") != 0) return;
            char *old = host->kv_get(host->context, "n");
            long long n = old ? atoll(old) : 0;
            if (old) host->free_string(host->context, old);
            char value[32], out[64];
            snprintf(value, sizeof value, "%lld", n + 1);
            int rc = host->kv_set(host->context, "n", value);
            snprintf(out, sizeof out, "{\"n\":%lld,\"rc\":%d}", n + 1, rc);
            host->dispatch_magix(host->context, room, "count", out, NULL);
        }
        ROOMKIT_DECLARE_PLUGIN(.on_load = on_load, .on_room_event = on_event)
        """#

    func testCounts_surviveARestartAndAKill9_inTheBotsOneStore() async throws {
        let harness = try BotHarness()
        let library = try compilePlugin("counter", source: Self.counter, in: harness.directory)
        let manifest = try harness.writeConfig(["manifestVersion": 1, "plugins": [[
            "name": "counter", "library": .string(library), "abi": 1, "hooks": ["room"], "rooms": ["*"],
        ]]], name: "plugins.json")
        var config = harness.standardConfig(rooms: ["lobby"], control: nil).objectValue!
        config["manifest"] = .string(manifest)
        let path = try harness.writeConfig(.object(config))
        let watcher = try Watcher(url: harness.serverURL)
        let room = try await watcher.host.loginRoom("lobby", user: LoginUser(id: "watcher"), token: harness.token("watcher"))

        func counts() -> [JSON] {
            watcher.events.all.compactMap { if case .magix(let e) = $0, e.event == "count" { return e.payload }; return nil }
        }
        func bump(expecting n: Int64) async throws {
            let before = counts().count
            _ = try await room.dispatchMagixEvent("bump", payload: .null)
            await eventually(10, "count \(n)") { counts().count > before }
            XCTAssertEqual(counts().last, ["n": .int(n), "rc": 0])
        }
        func botIsIn() async {
            await eventually(10, "the bot is in the room") { room.roomMembers.contains { $0.userId == "bot-1" } }
        }

        var bot = try ChildProcess("roombot", ["run", "--config", path, "--log-level", "error"])
        await botIsIn()
        try await bump(expecting: 1)
        try await bump(expecting: 2)
        bot.signal(SIGTERM)
        XCTAssertEqual(bot.finish().0, 0)

        bot = try ChildProcess("roombot", ["run", "--config", path, "--log-level", "error"])
        await botIsIn()
        try await bump(expecting: 3)
        bot.signal(SIGKILL)
        _ = bot.finish()

        bot = try ChildProcess("roombot", ["run", "--config", path, "--log-level", "error"])
        await botIsIn()
        try await bump(expecting: 4)
        XCTAssertEqual(counts().count, 4, "one answer per bump")
        bot.signal(SIGTERM)
        XCTAssertEqual(bot.finish().0, 0)

        // One store: no second database file beside it.
        let files = try FileManager.default.contentsOfDirectory(atPath: harness.directory)
        XCTAssertTrue(files.contains("bot.state.sqlite"), "\(files)")
        XCTAssertEqual(files.filter { $0.hasSuffix(".sqlite") }, ["bot.state.sqlite"], "\(files)")
        try await watcher.close()
        try harness.close()
    }
}
