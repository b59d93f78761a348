import Foundation
import RoomKit
import RoomKitLoop
import RoomKitProtocol
import RoomKitTestSupport
import XCTest

/// A loop that did not run (busy, or stopped) did not read either: the
/// stall is not silence of the server (issue #26: a bot busy with logins
/// dropped its own live connection, "no message from the server for 11847 ms").
final class ConnectionStallTests: XCTestCase {
    private func readyMachine() -> ConnectionMachine {
        var m = ConnectionMachine(livenessOverride: 1000)
        XCTAssertEqual(m.wanted(), .connect)
        XCTAssertEqual(m.opened(now: 0), .sendHello)
        XCTAssertEqual(m.helloAnswered(interval: 400, timeout: 90_000, now: 0), .becameReady)
        return m
    }

    func testLoopStalled_isCreditedToTheSilenceClock() {
        var m = readyMachine()
        m.loopStalled(for: 5000, now: 5000)
        XCTAssertEqual(m.state, .ready(lastMessageAt: 5000, lastPingAt: 0))
        XCTAssertEqual(m.tick(now: 5000, random: 0), .sendPing, "no drop: the stall was not silence")
    }

    func testSilenceAfterAStall_isStillDetected() {
        var m = readyMachine()
        m.loopStalled(for: 5000, now: 5000)
        _ = m.tick(now: 5000, random: 0)
        XCTAssertEqual(m.tick(now: 6000, random: 0),
                       .drop(.init(abort: true, why: "no message from the server for 1000 ms", lost: true)))
    }

    func testWithoutTheCredit_theSameGapIsADrop() {
        var m = readyMachine()
        XCTAssertEqual(m.tick(now: 5000, random: 0),
                       .drop(.init(abort: true, why: "no message from the server for 5000 ms", lost: true)))
    }

    /// End to end: a real roomd, a host whose silence limit is 500 ms, and
    /// its loop blocked for 2 s (as a big batch of logins once blocked it).
    func testHost_whoseLoopIsBlockedLongerThanTheSilenceLimit_keepsItsConnection() async throws {
        let fixture = try RoomdFixture(name: "stall", secret: "stall-secret") { $0.heartbeatInterval = .milliseconds(200) }
        let host = try fixture.host(logLevel: .error) { $0.livenessTimeout = .milliseconds(500) }
        let events = LockedValue<[RoomEvent]>([])
        host.addObserver { event in events.withLock { $0.append(event) } }
        try await host.loginRoom("stall-room", user: LoginUser(id: "u1"), token: fixture.token("u1"))
        host.loop.execute { usleep(2_000_000) }
        try await Task.sleep(for: .milliseconds(2600))
        let lost = events.withLock { $0 }.filter {
            if case .roomStateChanged(_, .reconnecting, _, _) = $0 { return true }
            if case .disconnectWithError = $0 { return true }
            return false
        }
        XCTAssertEqual(lost.count, 0, "the stalled loop must not drop its own live connection: \(lost)")
        XCTAssertEqual(host.room("stall-room")?.reason, .logined)
        try await fixture.close()
    }
}
