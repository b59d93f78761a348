import Foundation
import Logging
import RoomKit
@testable import RoomKitBot
import RoomKitLoop
import RoomKitProtocol
import RoomKitTestSupport
import XCTest

/// Issue #28 §3: the Activity charts draw from the bot's own history
/// (`GET /v1/bot/activity`, docs/DASHBOARD.md), not from a page's polling.
final class BotActivityTests: XCTestCase {
    private let controlToken = "activity-token-0123"

    private func get(_ port: Int, _ path: String) throws -> (Int, JSON) {
        let text = httpRequest(port: port, "GET", path, token: controlToken)
        let status = Int(text.split(separator: " ").dropFirst().first ?? "") ?? 0
        let body = text.components(separatedBy: "\r\n\r\n").dropFirst().joined(separator: "\r\n\r\n")
        return (status, try JSON.parse(body))
    }

    func testActivity_keepsTheBotsOwnSamples_withEventsAndDispatchQuantiles() async throws {
        let harness = try BotHarness()
        defer { try? harness.close() }
        // A room plugin, so that room events have a dispatch latency.
        let library = try compilePlugin("picky", source: RoomPluginCallsTests.picky, in: harness.directory)
        let (runner, port) = try await harness.startRunner(plugins: [
            ["name": "picky", "library": .string(library), "abi": 1, "hooks": ["room", "magix"], "isolation": "inline"],
        ], rooms: ["lobby"], controlToken: controlToken)

        let (status, first) = try get(port, "/v1/bot/activity")
        XCTAssertEqual(status, 200)
        XCTAssertEqual(first["intervalMs"]?.intValue, 2000)
        XCTAssertEqual(first["capacity"]?.intValue, 300)

        // Events for a few intervals: magix through the plugin.
        var busy: JSON?
        await eventually(20, "a sample with events and a dispatch latency") {
            for index in 0..<20 {
                _ = httpRequest(port: port, "POST", "/v1/rooms/lobby/magix", token: self.controlToken, body: #"{"event":"tick\#(index)"}"#)
            }
            let samples = (try? self.get(port, "/v1/bot/activity").1["samples"]?.arrayValue) ?? []
            busy = samples.first { ($0["eventsPerSecond"]?.doubleValue ?? 0) > 0 && ($0["dispatchCount"]?.intValue ?? 0) > 0 }
            return busy != nil
        }
        let sample = try XCTUnwrap(busy)
        let p50 = try XCTUnwrap(sample["dispatchP50Ms"]?.doubleValue)
        let p99 = try XCTUnwrap(sample["dispatchP99Ms"]?.doubleValue)
        XCTAssertGreaterThan(p50, 0)
        XCTAssertGreaterThanOrEqual(p99, p50)
        let ts = try XCTUnwrap(sample["ts"]?.intValue)
        XCTAssertLessThanOrEqual(ts, Int(Date().timeIntervalSince1970 * 1000))

        // `since` keeps only the newer samples; a bad one is refused by name.
        let all = try get(port, "/v1/bot/activity").1["samples"]?.arrayValue ?? []
        let newer = try get(port, "/v1/bot/activity?since=\(ts)").1["samples"]?.arrayValue ?? []
        XCTAssertEqual(newer.map { $0["ts"]?.intValue ?? 0 }, all.compactMap { $0["ts"]?.intValue }.filter { $0 > ts })
        let (bad, error) = try get(port, "/v1/bot/activity?since=soon")
        XCTAssertEqual(bad, 400)
        XCTAssertTrue(error["message"]?.stringValue?.contains("since") == true, "\(error)")
        await runner.stop()
    }

    /// A room plugin that sleeps 30 ms on every magix event in lobby.
    static let slow = """
        #include "roomkit_plugin.h"
        #include <string.h>
        #include <unistd.h>
        static void on_event(void *self, int32_t kind, const char *room, const char *payload) {
            (void)self; (void)payload;
            if (kind == ROOMKIT_ROOM_MAGIX && strcmp(room, "lobby") == 0) usleep(30000);
        }
        static roomkit_plugin descriptor = {
            .struct_size = sizeof(roomkit_plugin), .abi_major = ROOMKIT_PLUGIN_ABI_MAJOR, .abi_minor = ROOMKIT_PLUGIN_ABI_MINOR,
            .on_room_event = on_event,
        };
        const roomkit_plugin *roomkit_plugin_entry(uint16_t major, uint16_t minor) { (void)major; (void)minor; return &descriptor; }
        """

    /// The sum of the samples of `family` in Prometheus text whose line contains `label` (nil: none).
    private func metric(_ text: String, _ family: String, _ label: String = "") -> Double? {
        let values = text.split(separator: "\n").filter { $0.hasPrefix(family + " ") || ($0.hasPrefix(family + "{") && $0.contains(label)) }
            .compactMap { Double($0.split(separator: " ").last ?? "") }
        return values.isEmpty ? nil : values.reduce(0, +)
    }

    func testEventDispatch_isOneSamplePerEvent_untilTheLastPluginIsDone() async throws {
        let harness = try BotHarness()
        defer { try? harness.close() }
        let fast = try compilePlugin("fast", source: RoomPluginCallsTests.picky, in: harness.directory)
        let slow = try compilePlugin("slow", source: Self.slow, in: harness.directory)
        let (runner, port) = try await harness.startRunner(plugins: [
            ["name": "fast", "library": .string(fast), "abi": 1, "hooks": ["room", "magix"], "isolation": "inline"],
            ["name": "slow", "library": .string(slow), "abi": 1, "hooks": ["room", "magix"], "isolation": "inline"],
        ], rooms: ["lobby"], controlToken: controlToken)
        // Five magix events from another member: the slow plugin takes 30 ms on each.
        let watcher = try Watcher(url: harness.serverURL)
        let room = try await watcher.host.loginRoom("lobby", user: LoginUser(id: "watcher"), token: harness.token("watcher"))
        for index in 0..<5 { _ = try await room.dispatchMagixEvent("tick", payload: .int(Int64(index))) }

        var text = ""
        await eventually(15, "every event counted once, when both plugins are done") {
            text = String(httpRequest(port: port, "GET", "/metrics", token: self.controlToken).split(separator: "\r\n\r\n").last ?? "")
            let events = self.metric(text, "roomkit_event_dispatch_seconds_count") ?? 0
            let perFast = self.metric(text, "roomkit_plugin_dispatch_seconds_count", #"plugin="fast""#) ?? -1
            let perSlow = self.metric(text, "roomkit_plugin_dispatch_seconds_count", #"plugin="slow""#) ?? -1
            return events >= 5 && events == perFast && events == perSlow
        }
        // The magix events waited for the slow plugin: none is under 25 ms,
        // although the fast plugin had finished each one before.
        let events = try XCTUnwrap(metric(text, "roomkit_event_dispatch_seconds_count"))
        let under = try XCTUnwrap(metric(text, "roomkit_event_dispatch_seconds_bucket", #"le="0.025""#))
        XCTAssertGreaterThanOrEqual(events - under, 5, text)
        try await watcher.close()
        await runner.stop()
    }

    func testRing_keepsTheLastSamplesInOrder_andQuantilesComeFromTheIntervalsBuckets() throws {
        let loop = try EventLoop(name: "activity")
        defer { try? loop.shutdown() }
        let activity = BotActivity(bounds: [.milliseconds(1), .milliseconds(10), .milliseconds(100)], interval: .seconds(3600), capacity: 4)
        try loop.runAndWait { try activity.start(loop: loop) }
        // Interval 1: 100 samples under 1 ms. Interval 2: 100 samples between 10 and 100 ms.
        for _ in 0..<100 { activity.dispatch.record(nanoseconds: 500_000) }
        try loop.runAndWait { activity.sample() }
        for _ in 0..<100 { activity.dispatch.record(nanoseconds: 50_000_000) }
        for _ in 0..<7 { activity.countEvent() }
        try loop.runAndWait { activity.sample() }
        let two = try loop.runAndWait { activity.samples() }
        XCTAssertEqual(two.map(\.dispatchCount), [100, 100])
        XCTAssertEqual(try XCTUnwrap(two[0].p99Ms), 0.99, accuracy: 1e-9, "within the first bucket, interpolated")
        // The second interval's own buckets: not pulled down by the first's.
        XCTAssertEqual(try XCTUnwrap(two[1].p50Ms), 55, accuracy: 1e-9)
        XCTAssertGreaterThan(two[1].eventsPerSecond, 0)
        // Past capacity the oldest go, and the order stays oldest first.
        for _ in 0..<5 { try loop.runAndWait { activity.sample() } }
        let ring = try loop.runAndWait { activity.samples() }
        XCTAssertEqual(ring.count, 4)
        XCTAssertEqual(ring.map(\.ts), ring.map(\.ts).sorted())
        XCTAssertTrue(ring.allSatisfy { $0.dispatchCount == 0 && $0.p99Ms == nil })
        try loop.runAndWait { activity.stop() }
        // Off the loop, the ring's state traps (LoopBound); not exercised here.
    }

    func testQuantile_overflowBucket_isTheHighestBound() {
        let tap = DispatchTap(bounds: [.milliseconds(1), .milliseconds(2)])
        XCTAssertNil(tap.quantile(0.5, of: [0, 0, 0]))
        XCTAssertEqual(tap.quantile(0.99, of: [0, 0, 5]), 0.002)
        XCTAssertEqual(try XCTUnwrap(tap.quantile(0.5, of: [0, 4, 0])), 0.0015, accuracy: 1e-12)
    }
}
