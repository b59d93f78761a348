import Foundation
import RoomKit
import RoomKitBot
@testable import RoomKitPluginHost
import RoomKitProtocol
import RoomKitTestSupport
import XCTest

/// Issue #28 §4: a quarantined plugin is retried by itself after a backoff
/// (a half-open retry), and one that keeps failing stays out with growing
/// intervals.
final class QuarantineRecoveryTests: XCTestCase {
    /// A URL interrupter that fails while the file FLAG exists.
    private static func flaky(flag: String) -> String {
        """
        #include "roomkit_plugin.h"
        #include <unistd.h>
        static const roomkit_host_api *api;
        static int load(void *self, const roomkit_host_api *host, const char *config) {
            (void)self; (void)config; api = host; return 0;
        }
        static char *rewrite(void *self, const char *url) {
            (void)self;
            if (access("\(flag)", F_OK) == 0) return 0;
            return api->alloc_string(api->context, url);
        }
        static roomkit_plugin descriptor = {
            .struct_size = sizeof(roomkit_plugin), .abi_major = ROOMKIT_PLUGIN_ABI_MAJOR, .abi_minor = ROOMKIT_PLUGIN_ABI_MINOR,
            .on_load = load, .url_interrupter = rewrite,
        };
        const roomkit_plugin *roomkit_plugin_entry(uint16_t major, uint16_t minor) { (void)major; (void)minor; return &descriptor; }
        """
    }

    private func start(_ harness: BotHarness, retryMs: Int, capMs: Int, flag: String) async throws -> (BotRunner, Int) {
        let library = try compilePlugin("flaky", source: Self.flaky(flag: flag), in: harness.directory)
        let manifest = try harness.writeConfig(["manifestVersion": 1, "plugins": [
            ["name": "flaky", "library": .string(library), "abi": 1, "hooks": ["urlInterrupter"], "isolation": "inline",
             "quarantineRetryMs": .int(Int64(retryMs)), "quarantineRetryCapMs": .int(Int64(capMs))],
        ]], name: "plugins.json")
        guard case .object(var config) = harness.standardConfig(rooms: ["lobby"]) else { throw XCTSkip("config") }
        config["manifest"] = .string(manifest)
        let runner = try BotRunner(config: try BotConfig(path: try harness.writeConfig(.object(config))), logger: .init(label: "t"))
        try await runner.start()
        let port = try XCTUnwrap(runner.controlPort)
        await eventually(10, "ready") { http(port, "GET", "/readyz").0 == 200 }
        return (runner, port)
    }

    private func status(_ runner: BotRunner) -> PluginStatus? {
        runner.plugins.reports.first { $0.name == "flaky" }?.status
    }

    /// Failed calls until the plugin is quarantined (three in a row do it;
    /// a reloaded instance joins the URL chain just after it shows as loaded,
    /// so the first calls may pass it by). At most 50 calls.
    private func failUntilQuarantined(_ port: Int, _ runner: BotRunner) {
        for index in 0..<50 where status(runner) != .quarantined {
            _ = http(port, "POST", "/v1/rooms/lobby/images",
                     #"{"uuid":"i\#(index)-\#(UUID().uuidString)","url":"http://a/\#(index)","x":0,"y":0,"width":1,"height":1}"#)
        }
    }

    func testQuarantinedPlugin_isRetriedAfterItsBackoff_andServesAgainOnceItWorks() async throws {
        let harness = try BotHarness()
        defer { try? harness.close() }
        let flag = harness.directory + "/fail"
        XCTAssertTrue(FileManager.default.createFile(atPath: flag, contents: nil))
        let (runner, port) = try await start(harness, retryMs: 300, capMs: 60_000, flag: flag)
        failUntilQuarantined(port, runner)
        await eventually(30, "quarantined") { self.status(runner) == .quarantined }
        try FileManager.default.removeItem(atPath: flag)
        // No operator action: the half-open retry reloads it.
        await eventually(30, "retried and running") { self.status(runner) == .loaded }
        let (code, body) = http(port, "POST", "/v1/rooms/lobby/images",
                                #"{"uuid":"ok","url":"http://b/","x":0,"y":0,"width":1,"height":1}"#)
        XCTAssertEqual(code, 200, body)
        XCTAssertEqual(try JSON.parse(body)["url"], "http://b/")
        XCTAssertEqual(runner.plugins.reports.first { $0.name == "flaky" }?.failures, 0, "a new instance serves the calls")
        await runner.stop()
    }

    func testPluginThatKeepsFailing_staysOut_withGrowingIntervals() async throws {
        let harness = try BotHarness()
        defer { try? harness.close() }
        let flag = harness.directory + "/fail"
        XCTAssertTrue(FileManager.default.createFile(atPath: flag, contents: nil))
        let (runner, port) = try await start(harness, retryMs: 200, capMs: 60_000, flag: flag)
        var intervals: [Int] = []
        for round in 0..<3 {
            failUntilQuarantined(port, runner)
            await eventually(30, "quarantined \(round)") { self.status(runner) == .quarantined }
            intervals.append(runner.plugins.recoveryDelay("flaky") ?? -1)
            // Wait for the retry: a new instance, still failing.
            await eventually(30, "retried \(round)") { self.status(runner) == .loaded }
        }
        XCTAssertEqual(intervals, [200, 400, 800], "each quarantine after a retry doubles the wait")
        failUntilQuarantined(port, runner)
        await eventually(30, "quarantined again") { self.status(runner) == .quarantined }
        await runner.stop()
    }

    func testRecoveryDelay_doublesUpToTheCap() {
        XCTAssertEqual((0..<6).map { QuarantineRecovery.delay(attempt: $0, first: 1000, cap: 5000) }, [1000, 2000, 4000, 5000, 5000, 5000])
        XCTAssertEqual(QuarantineRecovery.delay(attempt: 1_000, first: 1, cap: 86_400_000), 86_400_000, "no overflow")
    }
}
