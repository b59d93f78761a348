import Foundation
import RoomKitTestSupport
import XCTest

/// A host cut from Redis or from roomd (through a FaultProxy), with real
/// processes: its rooms move to the others within the bound, and it never
/// holds a room another host holds.
final class FleetPartitionTests: XCTestCase {
    private var fleet: FleetHarness!
    private var proxy: FaultProxy?

    override func tearDown() {
        fleet?.close()
        fleet = nil
        proxy?.stop()
        proxy = nil
    }

    private func start(proxying redis: Bool) throws -> FaultProxy {
        var made: FaultProxy?
        fleet = try FleetHarness(hosts: 3, rooms: 150) { host, redisPort, roomdPort in
            guard host == 0 else { return (redisPort, roomdPort) }
            let proxy = FaultProxy(targetPort: redis ? redisPort : roomdPort)
            made = proxy
            return redis ? (proxy.port, roomdPort) : (redisPort, proxy.port)
        }
        let proxy = try XCTUnwrap(made)
        self.proxy = proxy
        try fleet.startAll()
        let (seconds, picture) = fleet.waitExactlyOnce(timeout: 30)
        XCTAssertNotNil(seconds, fleet.problems(picture))
        XCTAssertGreaterThan(fleet.hosts[0].heldRooms()?.count ?? 0, 0)
        return proxy
    }

    /// Polls until every room is held once by a host other than host 0;
    /// returns the seconds it took, and the most rooms ever held twice at
    /// one instant (`FleetHarness.heldTwice`).
    private func waitMovedOff(timeout: TimeInterval) -> (Double?, Int) {
        let started = Date()
        var doubled = 0
        while Date().timeIntervalSince(started) < timeout {
            doubled = max(doubled, fleet.heldTwice().count)
            let picture = fleet.holders()
            if picture.count == fleet.rooms.count, picture.values.allSatisfy({ $0 != [0] && $0.count == 1 }) {
                return (Date().timeIntervalSince(started), doubled)
            }
            usleep(100_000)
        }
        return (nil, doubled)
    }

    func testHostCutFromRedis_butReachingRoomd_letsItsRoomsGoWithinTheBound() throws {
        let proxy = try start(proxying: true)
        proxy.setMode(.blackhole)
        let (seconds, doubled) = waitMovedOff(timeout: 20)
        XCTAssertNotNil(seconds, "host 0's rooms did not move: \(fleet.problems(fleet.holders()))")
        XCTAssertEqual(doubled, 0, "rooms held by two hosts at once")
        // The cut host logged out on its own clock (it could not hear Redis).
        XCTAssertTrue(fleet.hosts[0].log.contains("lease expired on the local clock"))
        print("FLEET cut from Redis: rooms moved off in \(String(format: "%.1f", seconds ?? -1)) s")
        proxy.setMode(.pass)
        proxy.cut()
        let (back, picture) = fleet.waitExactlyOnce(timeout: 20)
        XCTAssertNotNil(back, "after the cut healed: \(fleet.problems(picture))")
    }

    func testHostReachingRedis_butNotRoomd_givesItsShardsUp() throws {
        let proxy = try start(proxying: false)
        proxy.setMode(.blackhole)
        proxy.cut()
        let (seconds, doubled) = waitMovedOff(timeout: 20)
        XCTAssertNotNil(seconds, "host 0's rooms did not move: \(fleet.problems(fleet.holders()))")
        XCTAssertEqual(doubled, 0, "rooms held by two hosts at once")
        print("FLEET cut from roomd: rooms moved off in \(String(format: "%.1f", seconds ?? -1)) s")
        let status = try XCTUnwrap(fleet.hosts[1].fleet())
        XCTAssertEqual(status["unhomed"]?.int64Value, 0)
        proxy.setMode(.pass)
        let (back, picture) = fleet.waitExactlyOnce(timeout: 30)
        XCTAssertNotNil(back, "after the cut healed: \(fleet.problems(picture))")
    }
}
