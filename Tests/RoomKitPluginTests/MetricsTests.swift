import Foundation
import MetricsTestKit
import RoomKit
import RoomKitPluginHost
import RoomKitProtocol
import RoomKitTestSupport
import XCTest

/// A `RoomHost` and its `PluginManager` report through swift-metrics to the
/// factory they are given, so any embedding app (not only roombot) gets
/// sessions by reason, reconnects by reason, connection up, login and
/// resume times, events, dispatch time and per-plugin calls, failures,
/// latency per hook and dispatch latency.
final class MetricsTests: XCTestCase {
    func testHostAndPlugins_reportSessionsEventsAndPluginCalls_toTheGivenFactory() async throws {
        let harness = try PluginHarness()
        let metrics = TestMetrics()
        let host = try harness.host { $0.metricsFactory = metrics }
        let recorder = try compilePlugin("recorder", source: TestPlugins.recorder(), in: harness.directory)
        let manager = PluginManager(host: host, metricsFactory: metrics)
        let path = try harness.writeManifest(manifest([
            pluginEntry("recorder", library: recorder, hooks: ["room"], config: .string(harness.directory + "/r.txt"),
                        isolation: "inline"),
        ]))
        XCTAssertEqual(manager.load(try PluginManifest(path: path)), [])

        try await host.loginRoom("lobby", user: LoginUser(id: "bot"), token: harness.token("bot"))
        try await host.loginRoom("hall", user: LoginUser(id: "bot"), token: harness.token("bot"))
        await eventually(5, "the plugin's calls are counted") {
            metrics.counterTotal(label: "roomkit_plugin_calls_total", dimensions: [("plugin", "recorder")]) >= 4
        }
        // Two rooms, each LOGINING then LOGINED: four state changes, counted once each.
        XCTAssertEqual(metrics.counterTotal(label: "roomkit_events_total", dimensions: [("event", "roomStateChanged")]), 4)
        XCTAssertEqual(try metrics.expectGauge("roomkit_sessions", [("reason", "LOGINED")]).lastValue, 2)
        XCTAssertEqual(try metrics.expectGauge("roomkit_sessions", [("reason", "LOGINING")]).lastValue, 0)
        XCTAssertFalse(try metrics.expectTimer("roomkit_dispatch_seconds").values.isEmpty)
        XCTAssertEqual(metrics.counterTotal(label: "roomkit_reconnects_total", dimensions: [("reason", "aborted")]), 0)
        XCTAssertEqual(try metrics.expectTimer("roomkit_login_seconds").values.count, 2, "one login time per room")
        let server = host.configuration.serverURL
        XCTAssertEqual(try metrics.expectGauge("roomkit_connection_up", [("server", server)]).lastValue, 1)

        host.simulateConnectionLoss()
        await eventually(5, "both rooms reconnected") {
            (try? metrics.expectGauge("roomkit_sessions", [("reason", "RECONNECTED")]).lastValue) == 2
        }
        XCTAssertEqual(metrics.counterTotal(label: "roomkit_reconnects_total", dimensions: [("reason", "aborted")]), 2,
                       "one per room that went RECONNECTING, by how the connection ended")
        XCTAssertEqual(metrics.counterTotal(label: "roomkit_connection_losses_total", dimensions: [("reason", "aborted")]), 1)
        XCTAssertEqual(try metrics.expectTimer("roomkit_resume_seconds").values.count, 2, "one resume time per room")
        XCTAssertEqual(try metrics.expectGauge("roomkit_connection_up", [("server", server)]).lastValue, 1)
        XCTAssertTrue(try metrics.expectGauge("roomkit_connection_up", [("server", server)]).values.contains(0), "down in between")
        XCTAssertEqual(metrics.counterTotal(label: "roomkit_plugin_failures_total", dimensions: [("plugin", "recorder")]), 0)
        XCTAssertFalse(try metrics.expectTimer("roomkit_plugin_call_seconds", [("plugin", "recorder"), ("hook", "on_room_event")])
            .values.isEmpty)
        XCTAssertGreaterThanOrEqual(try metrics.expectTimer("roomkit_plugin_dispatch_seconds", [("plugin", "recorder")]).values.count, 4,
                                    "one dispatch time per room event the plugin took")
        // One run of the URL chain, one sample of its timer.
        _ = await host.interruptURL("https://example.com/a.png", room: "lobby")
        XCTAssertEqual(try metrics.expectTimer("roomkit_url_interrupter_seconds").values.count, 1)

        // A room leaves its gauge for LOGOUT; a second logout moves it on to
        // LOGOUT_FAILED (its record stays, and so does its place).
        try await host.logoutRoom("hall")
        XCTAssertEqual(try metrics.expectGauge("roomkit_sessions", [("reason", "RECONNECTED")]).lastValue, 1)
        XCTAssertEqual(try metrics.expectGauge("roomkit_sessions", [("reason", "LOGOUT")]).lastValue, 1)
        do {
            try await host.logoutRoom("hall")
            XCTFail("a second logout fails")
        } catch {}
        XCTAssertEqual(try metrics.expectGauge("roomkit_sessions", [("reason", "LOGOUT")]).lastValue, 0)
        XCTAssertEqual(try metrics.expectGauge("roomkit_sessions", [("reason", "LOGOUT_FAILED")]).lastValue, 1)
        // A room never logged in to has no place in the gauges.
        do {
            try await host.logoutRoom("nowhere")
            XCTFail("a logout of a room never joined fails")
        } catch {}
        XCTAssertEqual(try metrics.expectGauge("roomkit_sessions", [("reason", "LOGOUT_FAILED")]).lastValue, 1)
        manager.unloadAll()
        try await harness.close()
    }
}
