import Foundation
import RoomKitProtocol
import RoomKitTestSupport
import XCTest

/// Issue #27 §6: the last host of a fleet has nobody to hand its rooms to;
/// its SIGTERM must not wait the whole `drainTimeout` for a take-over that
/// cannot come.
final class FleetLastHostTests: XCTestCase {
    private var fleet: FleetHarness!

    override func tearDown() {
        fleet?.close()
        fleet = nil
    }

    func testSigtermOfTheOnlyHost_exitsWithoutWaitingForTheDrainTimeout() throws {
        fleet = try FleetHarness(hosts: 1, rooms: 20, drainTimeout: 120)
        try fleet.startAll()
        let (seconds, picture) = fleet.waitExactlyOnce(timeout: 30)
        XCTAssertNotNil(seconds, fleet.problems(picture))
        let host = fleet.hosts[0]
        let process = try XCTUnwrap(host.process)
        host.signal(SIGTERM)
        // Far below the 120 s drain timeout: the old code waited all of it.
        let deadline = Date().addingTimeInterval(40)
        while process.isRunning, Date() < deadline { usleep(50_000) }
        guard !process.isRunning else {
            host.kill9()  // terminationStatus traps while it runs
            return XCTFail("the last host waited for its drain timeout")
        }
        XCTAssertEqual(process.terminationStatus, 0, String(host.log.suffix(2000)))
        XCTAssertTrue(host.log.contains("no other live host can take the rooms"), String(host.log.suffix(2000)))
        XCTAssertFalse(host.log.contains("drain timed out"))
    }
}
