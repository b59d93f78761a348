import Foundation
import RoomKit
import RoomKitProtocol
import RoomKitTestSupport
import XCTest

/// Sessions through a slow, chopped-up link: latency, writes sliced into
/// small pieces and a bandwidth cap (the proxy's shaping faults), then a cut
/// while those faults hold.
final class DegradedNetworkTests: XCTestCase {
    private func magixPayloads(_ events: EventRecorder, _ name: String) -> [Int64] {
        events.all.compactMap { event -> Int64? in
            if case .magix(let magix) = event, magix.event == name { return magix.payload.int64Value }
            return nil
        }
    }

    func testLatencySlicingAndBandwidthCap_sessionsWorkInOrderWithoutReconnecting_thenACutResumesThroughThem() async throws {
        // A 1 s ping interval: the client calls a link dead after 2 s of silence.
        let harness = try EngineHarness(timing: .init(heartbeatInterval: .seconds(1), heartbeatTimeout: .seconds(5)))
        harness.proxy.setFaults(.init(latency: .milliseconds(40), sliceBytes: 64, bytesPerSecond: 48_000))
        let events = EventRecorder()
        let host = try harness.host(recorder: events)
        let other = try harness.host(viaProxy: false)
        let room = try await host.loginRoom("slow", user: harness.user("a"), token: harness.token("a"))
        let otherRoom = try await other.loginRoom("slow", user: harness.user("b"), token: harness.token("b"))

        // A 20 kB state write goes up through the shaped link; others see it whole.
        let big = JSON.string(String(repeating: "0123456789", count: 2_000))
        try await room.setGlobalState(["big": big])
        await eventually(10, "the big state reaches the other member") { otherRoom.globalState["big"] == big }
        // Events come down through it in order, each once.
        for i in 0..<40 {
            try await otherRoom.dispatchMagixEvent("n", payload: .int(Int64(i)))
        }
        await eventually(10, "40 events through the shaped link") { self.magixPayloads(events, "n").count == 40 }
        XCTAssertEqual(magixPayloads(events, "n"), (0..<40).map(Int64.init))
        XCTAssertEqual(events.reasons("slow"), ["LOGINING 0", "LOGINED 0"], "a slow link is not a dead one")
        XCTAssertGreaterThan(harness.proxy.stats.writes, harness.proxy.stats.bytesForwarded / 64 - 1,
                             "the proxy really sliced the traffic")

        // A cut while the faults hold: resume and recovery work through them.
        harness.proxy.setMode(.down)
        harness.proxy.cut()
        await eventually(5, "RECONNECTING") { events.reasons("slow").last == "RECONNECTING 1002051" }
        for i in 40..<60 {
            try await otherRoom.dispatchMagixEvent("n", payload: .int(Int64(i)))
        }
        harness.proxy.setMode(.pass)
        await eventually(10, "RECONNECTED") { events.reasons("slow").last == "RECONNECTED 0" }
        await eventually(10, "missed events recovered") { self.magixPayloads(events, "n").count == 60 }
        XCTAssertEqual(magixPayloads(events, "n"), (0..<60).map(Int64.init), "recovered exactly once, in order")
        XCTAssertEqual(room.globalState["big"], big)
        try await harness.close()
    }
}
