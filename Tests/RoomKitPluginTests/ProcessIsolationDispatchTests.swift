import Foundation
import RoomKit
import RoomKitPluginHost
import RoomKitProtocol
import RoomKitTestSupport
import XCTest

/// The URL chain and host functions through a process-isolated plugin give
/// what the inline host gives.
final class ProcessIsolationDispatchTests: XCTestCase {
    private let urls = ["http://img/cat.png", "https://already/secure.png", "http://", "ftp://x/y", "http://a/b?c=d&e=%20", "ünïcode://x"]

    private func rewrite(_ isolation: String) async throws -> ([String], PluginReport?) {
        let harness = try PluginHarness()
        let (_, errors) = try harness.botHost(manifest: manifest([
            pluginEntry("url-rewrite", library: try shippedPlugin("url-rewrite"), hooks: ["urlInterrupter"],
                        config: ["from": "http://", "to": "https://cdn.example/"], isolation: isolation),
        ]))
        XCTAssertEqual(errors, [])
        var results: [String] = []
        for url in urls { results.append(await harness.manager.urlInterrupter(url)) }
        let report = harness.manager.reports.first
        try await harness.close()
        return (results, report)
    }

    func testURLInterrupter_inProcessMode_returnsWhatInlineReturns_forTheShippedURLRewrite() async throws {
        let (inline, inlineReport) = try await rewrite("inline")
        let (process, processReport) = try await rewrite("process")
        XCTAssertEqual(process, inline)
        XCTAssertEqual(inline.first, "https://cdn.example/img/cat.png", "the plugin did rewrite")
        XCTAssertEqual(inlineReport?.isolation, .inline)
        XCTAssertNil(inlineReport?.process)
        XCTAssertEqual(processReport?.isolation, .process)
        XCTAssertEqual(processReport?.calls, urls.count)
        XCTAssertEqual(processReport?.failures, inlineReport?.failures)
    }

    func testHangingURLInterrupter_inProcessMode_passesTheURLThroughWithinTimeout_countsAFailure_andIsKilled() async throws {
        let harness = try PluginHarness()
        let hanging = try compilePlugin("hanging", source: TestPlugins.hanging, in: harness.directory)
        _ = try harness.botHost(manifest: manifest([
            pluginEntry("hanging", library: hanging, hooks: ["urlInterrupter"], timeoutMs: 50,
                        supervision: ["hangFactor": 4, "restartBackoffMs": 10]),
        ]))
        let started = Date()
        let url = await harness.manager.urlInterrupter("http://keep/me")
        XCTAssertEqual(url, "http://keep/me", "a timed-out step leaves its input unchanged")
        XCTAssertLessThan(Date().timeIntervalSince(started), 1)
        XCTAssertEqual(harness.manager.reports.first?.failures, 1)
        // The hook is still sleeping in the process: timeoutMs × hangFactor later it is killed and restarted.
        await eventually(5, "killed and restarted") { harness.manager.reports.first?.process?.restarts == 1 }
        XCTAssertTrue(harness.statuses.all.contains { $0.hasPrefix("hanging crashed: hung: a call ran longer than 0.2 seconds") },
                      "\(harness.statuses.all)")
        XCTAssertTrue(harness.statuses.all.contains { $0.contains("in urlInterrupter") }, "\(harness.statuses.all)")
        XCTAssertEqual(harness.manager.reports.first?.status, .loaded)
        try await harness.close()
    }

    /// URL steps in flight at once each get their own ANSWER: no thread waits
    /// for one, and the reader hands each to its request.
    func testConcurrentURLSteps_inProcessMode_eachGetTheirOwnRewrite() async throws {
        let harness = try PluginHarness()
        _ = try harness.botHost(manifest: manifest([
            pluginEntry("url-rewrite", library: try shippedPlugin("url-rewrite"), hooks: ["urlInterrupter"],
                        config: ["from": "http://", "to": "https://cdn.example/"], isolation: "process"),
        ]))
        let manager = try XCTUnwrap(harness.manager)
        let results = await withTaskGroup(of: (Int, String).self) { group -> [Int: String] in
            for index in 0..<64 { group.addTask { (index, await manager.urlInterrupter("http://img/\(index).png")) } }
            var results: [Int: String] = [:]
            for await (index, url) in group { results[index] = url }
            return results
        }
        XCTAssertEqual(results.count, 64)
        for index in 0..<64 { XCTAssertEqual(results[index], "https://cdn.example/img/\(index).png") }
        XCTAssertEqual(harness.manager.reports.first?.calls, 64)
        XCTAssertEqual(harness.manager.reports.first?.failures, 0)
        try await harness.close()
    }

    /// A process that dies during a URL step ends the step at once (not at
    /// its timeout): the URL passes through, one failure is counted, and the
    /// plugin restarts.
    func testURLInterrupterThatCrashes_inProcessMode_passesTheURLThroughAtOnce_andRestarts() async throws {
        let harness = try PluginHarness()
        let crashing = try compilePlugin("crashing-url", source: TestPlugins.plugin(hooks: ".url_interrupter = crash,", body: """
            static char *crash(void *self, const char *url) { (void)self; (void)url; abort(); }
            """), in: harness.directory)
        _ = try harness.botHost(manifest: manifest([
            pluginEntry("crashing-url", library: crashing, hooks: ["urlInterrupter"], timeoutMs: 20_000,
                        supervision: ["restartBackoffMs": 10]),
        ]))
        let started = Date()
        let url = await harness.manager.urlInterrupter("http://keep/me")
        XCTAssertEqual(url, "http://keep/me")
        XCTAssertLessThan(Date().timeIntervalSince(started), 5, "ended by the exit, not by the 20 s timeout")
        XCTAssertEqual(harness.manager.reports.first?.failures, 1)
        await eventually(5, "restarted") { harness.manager.reports.first?.process?.restarts == 1 }
        XCTAssertTrue(harness.statuses.all.contains { $0.hasPrefix("crashing-url crashed") }, "\(harness.statuses.all)")
        try await harness.close()
    }

    /// Every proxied host function: room state, set state, dispatch (with a
    /// bad argument refused synchronously, as inline), a timer, log.
    static let prober = TestPlugins.plugin(hooks: ".on_room_event = probe,", body: """
        #include <stdio.h>
        static char room_copy[128];
        static void tick(void *user, uint64_t id) {
            (void)user; (void)id;
            host->dispatch_magix(host->context, room_copy, "tick", "\\"from a timer\\"", NULL);
        }
        static void probe(void *self, int32_t kind, const char *room, const char *payload) {
            (void)self;
            if (kind != ROOMKIT_ROOM_MAGIX || !strstr(payload, "\\"probe\\"")) return;
            snprintf(room_copy, sizeof room_copy, "%s", room);
            char *state = host->room_state_json(host->context, room);
            int has_members = state && strstr(state, "\\"members\\"") != NULL;
            host->free_string(host->context, state);
            char *unknown = host->room_state_json(host->context, "no-such-room");
            int bad = host->dispatch_magix(host->context, room, "x", "not json", NULL);
            int set = host->set_global_state(host->context, room, "{\\"probed\\":true}");
            char report[256];
            snprintf(report, sizeof report, "{\\"members\\":%d,\\"unknown\\":%d,\\"bad\\":%d,\\"set\\":%d}",
                     has_members, unknown == NULL, bad, set);
            host->log(host->context, ROOMKIT_LOG_INFO, "probed");
            host->dispatch_magix(host->context, room, "report", report, NULL);
            host->set_timer(host->context, 20, 0, tick, NULL);
        }
        """)

    func testHostFunctions_areProxiedFromTheProcess_withInlineResults() async throws {
        let harness = try PluginHarness()
        let prober = try compilePlugin("prober", source: Self.prober, in: harness.directory)
        let (bot, errors) = try harness.botHost(manifest: manifest([pluginEntry("prober", library: prober, hooks: ["magix"])]))
        XCTAssertEqual(errors, [])
        let member = try harness.host()
        try await bot.loginRoom("lobby", user: LoginUser(id: "bot"), token: harness.token("bot"))
        let room = try await member.loginRoom("lobby", user: LoginUser(id: "h"), token: harness.token("h"))
        let reports = MagixInbox(), ticks = MagixInbox()
        let l1 = room.addMagixEventListener("report") { reports.add($0) }
        let l2 = room.addMagixEventListener("tick") { ticks.add($0) }
        try await room.dispatchMagixEvent("command", payload: "probe")
        await eventually(5, "report and tick") { reports.all.count == 1 && ticks.all.count == 1 }
        XCTAssertEqual(reports.all.first?.payload, ["members": 1, "unknown": 1, "bad": -1, "set": 0])
        XCTAssertEqual(ticks.all.first?.payload, "from a timer")
        await eventually(5, "state set") { room.state.globalState["probed"] == true }
        try await Task.sleep(for: .milliseconds(100))
        XCTAssertEqual(reports.all.count, 1, "exactly one report")
        XCTAssertEqual(ticks.all.count, 1, "a one-shot timer fires once")
        l1.cancel(); l2.cancel()
        try await harness.close()
    }

    /// A plugin's timer numbers are outside input too: `set_timer` with
    /// UINT64_MAX trapped the bot (inline) in `Int(delay)`. Now it is clamped
    /// (10^12 ms) and a short timer set next still fires; the bot stays up.
    /// In a process, roomkit-plugin-host's own timers clamp the same way:
    /// there UINT64_MAX ms wrapped round to "due now", and its period fired
    /// in a busy loop that starved the short timer.
    static let hugeTimer = TestPlugins.plugin(hooks: ".on_room_event = probe,", body: """
        #include <stdio.h>
        static char room_copy[128];
        static int never_fired;
        static void tick(void *user, uint64_t id) {
            (void)user; (void)id;
            char text[64];
            snprintf(text, sizeof text, "\\"after the huge ones: %d\\"", never_fired);
            host->dispatch_magix(host->context, room_copy, "tick", text, NULL);
        }
        static void never(void *user, uint64_t id) { (void)user; (void)id; never_fired++; }
        static void probe(void *self, int32_t kind, const char *room, const char *payload) {
            (void)self;
            if (kind != ROOMKIT_ROOM_MAGIX || !strstr(payload, "\\"probe\\"")) return;
            snprintf(room_copy, sizeof room_copy, "%s", room);
            host->set_timer(host->context, UINT64_MAX, 0, never, NULL);
            host->set_timer(host->context, 1, UINT64_MAX, never, NULL);
            host->set_timer(host->context, (uint64_t)INT64_MAX + 1, (uint64_t)INT64_MAX, never, NULL);
            host->set_timer(host->context, 20, 0, tick, NULL);
        }
        """)

    func testSetTimer_withUInt64Max_isClamped_andTheBotStaysUp() async throws {
        for isolation in ["inline", "process"] {
            let harness = try PluginHarness()
            let plugin = try compilePlugin("hugetimer", source: Self.hugeTimer, in: harness.directory)
            let (bot, errors) = try harness.botHost(manifest: manifest([
                pluginEntry("huge", library: plugin, hooks: ["magix"], isolation: isolation)]))
            XCTAssertEqual(errors, [])
            let member = try harness.host()
            try await bot.loginRoom("lobby", user: LoginUser(id: "bot"), token: harness.token("bot"))
            let room = try await member.loginRoom("lobby", user: LoginUser(id: "h"), token: harness.token("h"))
            let ticks = MagixInbox()
            let listener = room.addMagixEventListener("tick") { ticks.add($0) }
            try await room.dispatchMagixEvent("command", payload: "probe")
            await eventually(5, "\(isolation): the short timer fired") { ticks.all.count == 1 }
            // Of the huge ones only the 1 ms timer fired, once (its period is the clamp's 31 years).
            XCTAssertEqual(ticks.all.first?.payload, "after the huge ones: 1", "\(isolation): a huge delay or period fired")
            XCTAssertEqual(harness.manager.reports.first?.status, .loaded, isolation)
            listener.cancel()
            try await harness.close()
        }
    }
}
