@testable import RoomKitBot
import RoomKitProtocol
import RoomKitRedis
import XCTest

/// Pure parts of the fleet: the shard function and the `fleet` config.
final class FleetUnitTests: XCTestCase {
    func testShard_isFNV1aOfTheUTF8Bytes_modS() {
        // FNV-1a 32-bit reference values: "" = 0x811c9dc5, "a" = 0xe40c292c, "foobar" = 0xbf9cf968.
        XCTAssertEqual(fleetShard(of: "", shards: Int(UInt32.max)), Int(0x811c_9dc5 % UInt32.max))
        XCTAssertEqual(fleetShard(of: "a", shards: 1 << 30), Int(0xe40c_292c % (1 << 30)))
        XCTAssertEqual(fleetShard(of: "foobar", shards: 4096), Int(0xbf9c_f968 % 4096))
        for room in ["lobby", "room-1", "x:y.z"] {
            XCTAssert((0..<4096).contains(fleetShard(of: room, shards: 4096)))
        }
    }

    func testShard_spreadsRoomsEvenly() {
        var counts = [Int](repeating: 0, count: 64)
        for index in 0..<64_000 { counts[fleetShard(of: "room-\(index)", shards: 64)] += 1 }
        XCTAssertLessThan(counts.max()! - counts.min()!, 300, "\(counts)")
    }

    func testFleetConfig_defaultsAndErrorsNameTheField() throws {
        var problems: [String] = []
        let config = FleetConfig.parse(["redis": "redis://127.0.0.1:6400/2", "name": "prod"]) { problems.append("\($0): \($1)") }
        XCTAssertEqual(problems, [])
        XCTAssertEqual(config?.redis, RedisEndpoint(host: "127.0.0.1", port: 6400, database: 2))
        XCTAssertEqual(config?.shards, 4096)
        XCTAssertEqual(config?.leaseTTL, .seconds(10))
        XCTAssertEqual(config?.loadThreshold, 0.75)
        problems = []
        _ = FleetConfig.parse(["redis": "http://x", "name": "a{b}", "shards": 0, "leaseTTL": -1,
                               "loadThreshold": 2, "extra": 1]) { problems.append("\($0): \($1)") }
        XCTAssertEqual(Set(problems.map { String($0.prefix { $0 != ":" }) }),
                       ["fleet.extra", "fleet.redis", "fleet.name"])
        problems = []
        _ = FleetConfig.parse(["redis": "redis://h", "name": "n", "shards": 0, "leaseTTL": 0.1,
                               "loadThreshold": 2]) { problems.append("\($0): \($1)") }
        XCTAssertEqual(problems.map { String($0.prefix { $0 != ":" }) }.sorted(),
                       ["fleet.leaseTTL", "fleet.loadThreshold", "fleet.shards"])
    }

    func testRedisEndpoint_parsesURLs() {
        XCTAssertEqual(RedisEndpoint(url: "redis://10.0.0.1"), RedisEndpoint(host: "10.0.0.1"))
        XCTAssertEqual(RedisEndpoint(url: "redis://h:7000/3"), RedisEndpoint(host: "h", port: 7000, database: 3))
        XCTAssertNil(RedisEndpoint(url: "redis://h:0"))
        XCTAssertNil(RedisEndpoint(url: "redis://user:pw@h"))
        XCTAssertNil(RedisEndpoint(url: "rediss://h"))
        XCTAssertNil(RedisEndpoint(url: "redis://h/x"))
    }
}
