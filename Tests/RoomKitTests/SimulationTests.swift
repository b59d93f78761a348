import Foundation
import RoomKit
import RoomKitProtocol
import RoomKitSimulator
import RoomKitTestSupport
import XCTest

/// The simulator as an app author uses it (RoomKitSimulator): a real
/// `RoomHost` on a virtual clock, the app's own delegate attached.
final class SimulationTests: XCTestCase {
    /// A host delegate an app might write: counts members joining and the
    /// reasons it sees, and renews nothing itself.
    final class AppDelegate: RoomHostDelegate, @unchecked Sendable {
        // @unchecked Sendable: guarded by lock.
        private let lock = NSLock()
        private var joined: [String] = []
        private var reasons: [String] = []
        private var warnings: [Int64] = []
        func onRoomUserUpdate(roomID: String, type: UpdateType, users: [Member]) {
            if type == .add { lock.withLock { joined += users.map(\.userId) } }
        }
        func onRoomStateChanged(reason: RoomReason, errorCode: ErrorCode, extendedData: [String: JSON], roomID: String) {
            lock.withLock { reasons.append("\(reason.rawValue) \(errorCode.rawValue)") }
        }
        func onRoomTokenWillExpire(roomID: String, remainingSeconds: Int64) { lock.withLock { warnings.append(remainingSeconds) } }
        var seen: (joined: [String], reasons: [String], warnings: [Int64]) { lock.withLock { (joined, reasons, warnings) } }
    }

    private func scenario(_ steps: [(Int64, Scenario.Kind)]) -> Scenario {
        Scenario(steps: steps.map { Scenario.Step(at: $0.0, kind: $0.1, index: 0) })
    }

    func testAppDelegate_hearsMembersATokenWarningAndAKick_inVirtualTime() async throws {
        let sim = try Simulation(scenario: scenario([
            (0, .login(room: "lobby", writable: true)),
            (100, .join(room: "lobby", user: "alice", name: "Alice")),
            (200, .magix(room: "lobby", from: "bob", event: "hello", payload: "hi", to: nil)),
            (1_000, .tokenWillExpire(room: "lobby", remaining: 30_000)),
            // The host renews by itself (its token provider): no 1002056 at 31 s.
            (1_000, .expect(.init(target: .action(["op": "renewToken", "room": "lobby"]), within: 100, count: 1))),
            (31_000, .expect(.init(target: .event(["event": "roomStateChanged", "reason": "KICK_OUT"]), within: 1_000, count: 0))),
            (40_000, .kick(room: "lobby", code: .kickedByAdmin, reason: "bye")),
            (40_000, .expect(.init(target: .event(["event": "roomStateChanged", "reason": "KICK_OUT", "errorCode": 1_002_055]),
                                   within: 100, count: 1))),
        ]))
        let delegate = AppDelegate()
        sim.host.add(delegate: delegate)
        let failures = try await sim.run()
        XCTAssertEqual(failures.map(\.description), [])
        await eventually(5, "the delegate heard everything") { delegate.seen.reasons.count == 3 }
        XCTAssertEqual(delegate.seen.joined, ["bot-1", "alice", "bob"].filter { $0 != "bot-1" } + [], "others joining")
        XCTAssertEqual(delegate.seen.reasons, ["LOGINING 0", "LOGINED 0", "KICK_OUT 1002055"])
        XCTAssertEqual(delegate.seen.warnings, [30])
        try await sim.close()
    }

    /// The seed's 20-minute rule in well under a second of wall time: an
    /// outage longer than the reconnect window ends in RECONNECT_FAILED 1002053.
    func testOutageLongerThanTheReconnectWindow_endsInReconnectFailed() async throws {
        let sim = try Simulation(scenario: scenario([
            (0, .login(room: "lobby", writable: true)),
            (1_000, .disconnect(duration: 25 * 60_000)),
            (1_000, .expect(.init(target: .event(["event": "roomStateChanged", "reason": "RECONNECTING"]), within: 60_000, count: 1))),
            (1_000, .expect(.init(target: .event(["event": "roomStateChanged", "reason": "RECONNECT_FAILED", "errorCode": 1_002_053]),
                                  within: 21 * 60_000, count: 1))),
            (1_000, .expect(.init(target: .event(["event": "roomStateChanged", "reason": "RECONNECT_FAILED"]),
                                  within: 19 * 60_000, count: 0))),
        ]))
        let failures = try await sim.run()
        XCTAssertEqual(failures.map(\.description), [])
        let failed = sim.log.first { $0.fields["reason"] == "RECONNECT_FAILED" }
        let reconnecting = sim.log.first { $0.fields["reason"] == "RECONNECTING" }
        XCTAssertNotNil(failed)
        if let failed, let reconnecting {
            // The window (20 min) counts from the loss.
            XCTAssertGreaterThanOrEqual(failed.at - reconnecting.at, 20 * 60_000)
            XCTAssertLessThan(failed.at - reconnecting.at, 20 * 60_000 + 1_000)
        }
        try await sim.close()
    }

    /// A short outage within the window: resumed, recovered, nothing missed.
    func testShortOutage_resumesAndReplaysWhatWasMissed() async throws {
        let sim = try Simulation(scenario: scenario([
            (0, .login(room: "lobby", writable: true)),
            (500, .disconnect(duration: 10_000)),
            (2_000, .magix(room: "lobby", from: "alice", event: "while-away", payload: 1, to: nil)),
            (500, .expect(.init(target: .event(["event": "roomStateChanged", "reason": "RECONNECTED"]), within: 60_000, count: 1))),
            (500, .expect(.init(target: .event(["event": "magix", "magixEvent": "while-away"]), within: 60_000, count: 1))),
        ]))
        let failures = try await sim.run()
        XCTAssertEqual(failures.map(\.description), [])
        try await sim.close()
    }
}
