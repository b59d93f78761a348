import Foundation
import RoomKit
import RoomKitProtocol
import RoomKitTestSupport
import XCTest

/// A plugin that floods the bot's log or its room actions is cut off by its
/// own rate limits (logPerSecond, actionsPerSecond/actionBurst), inline and
/// in a process, and the operator's control API still gets through.
final class PluginFloodTests: XCTestCase {
    static func source(record: String) -> String {
        """
        #include "roomkit_plugin.h"
        #include <fcntl.h>
        #include <stdio.h>
        #include <string.h>
        #include <unistd.h>
        static const roomkit_host_api *host;
        static int out = -1;
        static int on_load(void *self, const roomkit_host_api *api, const char *config) {
            (void)self; (void)config; host = api;
            out = open("\(record)", O_WRONLY | O_CREAT | O_APPEND, 0644);
            return out < 0;
        }
        static void on_room_event(void *self, int32_t kind, const char *room, const char *payload) {
            (void)self;
            if (kind != ROOMKIT_ROOM_MAGIX) return;
            char line[256];
            int n = 0;
            if (strstr(payload, "\\"flood\\"")) {
                for (int i = 0; i < 200000; i++) host->log(host->context, ROOMKIT_LOG_INFO, "flood-line");
                n = snprintf(line, sizeof line, "{\\"room\\":\\"lobby\\",\\"event\\":\\"chat\\",\\"payload\\":\\"flooded\\"}\\n");
            } else if (strstr(payload, "\\"spam\\"")) {
                int queued = 0, refused = 0;
                for (int i = 0; i < 20000; i++) {
                    int r = host->dispatch_magix(host->context, room, "spam", "{}", NULL);
                    if (r == 0) queued++; else if (r == ROOMKIT_ACTION_BUDGET) refused++;
                }
                n = snprintf(line, sizeof line, "{\\"room\\":\\"lobby\\",\\"event\\":\\"chat\\",\\"payload\\":{\\"queued\\":%d,\\"refused\\":%d}}\\n",
                             queued, refused);
            }
            if (n > 0 && write(out, line, (size_t)n) != n) return;
        }
        ROOMKIT_DECLARE_PLUGIN(.on_load = on_load, .on_room_event = on_room_event)
        """
    }

    private func assertFloodsAreCutOff(isolation: String) async throws {
        let inline = isolation == "inline"
        let scenario = try await IsolationScenario(
            bad: { Self.source(record: $0) },
            supervision: ["isolation": .string(isolation), "timeoutMs": 60_000, "hangFactor": inline ? .null : 1000,
                          "restartBackoffMs": inline ? .null : 10],
            logLevel: "info")
        try await scenario.send(["flood"])
        let record = scenario.badRecord
        await eventually(60, "the flood finished") { IsolationScenario.recorded(record).contains("flooded") }
        let floodLines = scenario.log.components(separatedBy: "flood-line").count - 1
        XCTAssertGreaterThan(floodLines, 0)
        XCTAssertLessThan(floodLines, 20_000, "200,000 log calls must not reach stderr (logPerSecond 100, burst 200)")

        try await scenario.send(["spam"])
        await eventually(60, "the spam finished") { IsolationScenario.recorded(record).count == 2 }
        let counts = IsolationScenario.recorded(record).last
        let queued = counts?["queued"]?.int64Value ?? -1, refused = counts?["refused"]?.int64Value ?? -1
        XCTAssertEqual(queued + refused, 20_000, "every call either queued or refused with ROOMKIT_ACTION_BUDGET: \(String(describing: counts))")
        XCTAssertGreaterThan(refused, 10_000, "the action budget (burst 2000, 1000/s) cut the spam off")
        // The operator's magix goes through the control API while the plugin's actions drain.
        let (status, body) = http(scenario.port, "POST", "/v1/rooms/lobby/magix", #"{"event":"operator","payload":1}"#)
        XCTAssertEqual(status, 200, body)
        let watcher = scenario.watcher
        await eventually(30, "the watcher got the operator's magix") {
            watcher.events.all.contains { if case .magix(let m) = $0 { return m.event == "operator" }; return false }
        }
        let spam = watcher.events.all.filter { if case .magix(let m) = $0 { return m.event == "spam" }; return false }.count
        XCTAssertLessThanOrEqual(Int64(spam), queued, "no refused action reached the room")
        XCTAssertTrue(scenario.log.contains("plugin log lines suppressed (logPerSecond 100)"), "the suppressed lines are counted in the log")
        // ... and in /metrics (issue #28 §1).
        let scrape = http(scenario.port, "GET", "/metrics").1
        let suppressed = scrape.split(separator: "\n").filter { $0.hasPrefix("roomkit_plugin_log_lines_suppressed_total{") }
            .compactMap { $0.split(separator: " ").last.flatMap { Double($0) } }
        XCTAssertGreaterThan(suppressed.max() ?? 0, 0, "roomkit_plugin_log_lines_suppressed_total moved: \(suppressed)")
        XCTAssertTrue(scenario.log.contains("plugin action budget exhausted"), "the refused actions are logged")
        XCTAssertTrue(scenario.bot.process.isRunning)
        try await scenario.finish()
    }

    func testLogAndActionFloods_processPlugin_areCutOff() async throws {
        try await assertFloodsAreCutOff(isolation: "process")
    }

    func testLogAndActionFloods_inlinePlugin_areCutOff() async throws {
        try await assertFloodsAreCutOff(isolation: "inline")
    }
}
