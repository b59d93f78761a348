import Foundation
import RoomKitProtocol
import RoomKitTestSupport
import XCTest

/// Drain and the room set at run time, with real processes.
final class FleetOperationsTests: XCTestCase {
    private var fleet: FleetHarness!

    override func tearDown() {
        fleet?.close()
        fleet = nil
    }

    func testSigterm_drainsEveryShardToTheOthers_invisibly_andExits0() throws {
        fleet = try FleetHarness(hosts: 3, rooms: 150, drainTimeout: 20)
        try fleet.startAll()
        let (seconds, picture) = fleet.waitExactlyOnce(timeout: 30)
        XCTAssertNotNil(seconds, fleet.problems(picture))
        let leaving = fleet.hosts[0]
        let process = try XCTUnwrap(leaving.process)
        let watched = Array((leaving.heldRooms() ?? []).sorted().prefix(10))
        XCTAssertGreaterThan(watched.count, 0)
        let observer = try Observer(url: "ws://127.0.0.1:\(fleet.roomd.port)/v1/rooms", secret: FleetHarness.secret)
        defer { observer.close() }
        try observer.join(watched)
        usleep(600_000)  // one renew tick: the cursors are in Redis
        let started = Date()
        leaving.signal(SIGTERM)
        while process.isRunning, Date().timeIntervalSince(started) < 25 { usleep(50_000) }
        XCTAssertFalse(process.isRunning, "the draining host did not exit")
        XCTAssertEqual(process.terminationStatus, 0, leaving.log.suffix(2000).description)
        XCTAssertTrue(leaving.log.contains("fleet: draining"))
        XCTAssertFalse(leaving.log.contains("drain timed out"), "it handed every shard over before its timeout")
        let (after, picture2) = fleet.waitExactlyOnce(timeout: 20)
        XCTAssertNotNil(after, "after the drain: \(fleet.problems(picture2))")
        XCTAssertEqual(Set(picture2.values.map { $0[0] }).count, 2)
        let status = try XCTUnwrap(fleet.hosts[1].fleet())
        XCTAssertEqual(status["hosts"]?.arrayValue?.count, 2, "the drained host left the host list")
        XCTAssertEqual(status["unhomed"]?.int64Value, 0)
        // The next owners resumed the drained host's sessions: nobody saw the bot leave.
        XCTAssertEqual(observer.botUpdates(), 0, "userUpdate of the bot seen by the observer")
        XCTAssertEqual(fleet.sum("roombot_fleet_handover_resumes_total"), Double(picture.values.filter { $0 == [0] }.count))
    }

    func testRoomsAddedAndRemovedAtRunTime_areJoinedAndLeftByTheirOwner() throws {
        fleet = try FleetHarness(hosts: 3, rooms: 30)
        try fleet.startAll()
        XCTAssertNotNil(fleet.waitExactlyOnce(timeout: 30).seconds)
        let added = (0..<40).map { "late-\($0)" }
        let body = JSON.object(["rooms": .array(added.map(JSON.string))]).jsonString
        let (status, answer) = http(fleet.hosts[0].controlPort, "POST", "/v1/fleet/rooms", body)
        XCTAssertEqual(status, 200, answer)
        XCTAssertEqual(try JSON.parse(Array(answer.utf8))["added"]?.int64Value, 40)
        // Adding again changes nothing.
        let (_, again) = http(fleet.hosts[1].controlPort, "POST", "/v1/fleet/rooms", body)
        XCTAssertEqual(try JSON.parse(Array(again.utf8))["added"]?.int64Value, 0)
        let (seconds, picture) = fleet.waitExactlyOnce(fleet.rooms + added, timeout: 10)
        XCTAssertNotNil(seconds, fleet.problems(picture, fleet.rooms + added))
        let removed = added[7]
        let owner = try XCTUnwrap(picture[removed]?.first)
        XCTAssertEqual(http(fleet.hosts[2].controlPort, "DELETE", "/v1/fleet/rooms/\(removed)").0, 200)
        XCTAssertEqual(http(fleet.hosts[2].controlPort, "DELETE", "/v1/fleet/rooms/\(removed)").0, 404)
        let remaining = fleet.rooms + added.filter { $0 != removed }
        let (left, after) = fleet.waitExactlyOnce(remaining, timeout: 10)
        XCTAssertNotNil(left, "owner \(owner) still in \(removed)? \(fleet.problems(after, remaining))")
        XCTAssertEqual(try XCTUnwrap(fleet.hosts[0].fleet())["rooms"]?.int64Value, Int64(remaining.count))
        XCTAssertEqual(http(fleet.hosts[0].controlPort, "POST", "/v1/fleet/rooms", "{\"rooms\":[\"bad room\"]}").0, 400)
    }
}
