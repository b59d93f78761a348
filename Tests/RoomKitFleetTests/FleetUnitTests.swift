import Foundation
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

    func testFleetConfig_redisPassword_fromTheURL_aFile_orTheEnvironment_inThatOrder() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("fleet-pw-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try "from-file\n".write(toFile: directory + "/pw", atomically: true, encoding: .utf8)
        try "".write(toFile: directory + "/empty", atomically: true, encoding: .utf8)
        var problems: [String] = []
        let fail = { (field: String, problem: String) in problems.append("\(field): \(problem)") }
        let env = [FleetConfig.passwordEnvironment: "from-env"]
        let url = FleetConfig.parse(["redis": "redis://bot:from-url@h:6379/0", "name": "n"], environment: env, fail: fail)
        XCTAssertEqual(url?.redis.password, "from-url")
        XCTAssertEqual(url?.redis.username, "bot")
        XCTAssertEqual(url?.passwordSource, "fleet.redis")
        let file = FleetConfig.parse(["redis": "redis://bot@h", "name": "n", "passwordFile": .string(directory + "/pw")],
                                     environment: env, fail: fail)
        XCTAssertEqual(file?.redis.password, "from-file", "the file's trailing newline is dropped")
        XCTAssertEqual(file?.redis.username, "bot")
        XCTAssertEqual(file?.passwordSource, "fleet.passwordFile")
        let fromEnvironment = FleetConfig.parse(["redis": "redis://h", "name": "n"], environment: env, fail: fail)
        XCTAssertEqual(fromEnvironment?.redis.password, "from-env")
        XCTAssertEqual(fromEnvironment?.passwordSource, "ROOMBOT_REDIS_PASSWORD")
        XCTAssertNil(FleetConfig.parse(["redis": "redis://h", "name": "n"], environment: [:], fail: fail)?.redis.password)
        XCTAssertEqual(problems, [])
        _ = FleetConfig.parse(["redis": "redis://:x@h", "name": "n", "passwordFile": .string(directory + "/pw")], environment: [:], fail: fail)
        _ = FleetConfig.parse(["redis": "redis://h", "name": "n", "passwordFile": .string(directory + "/empty")], environment: [:], fail: fail)
        _ = FleetConfig.parse(["redis": "redis://h", "name": "n", "passwordFile": .string(directory + "/nope")], environment: [:], fail: fail)
        _ = FleetConfig.parse(["redis": "redis://h", "name": "n"], environment: [FleetConfig.passwordEnvironment: ""], fail: fail)
        XCTAssertEqual(problems, [
            "fleet.passwordFile: fleet.redis already has a password: give it in one place",
            "fleet.passwordFile: \(directory)/empty is empty",
            "fleet.passwordFile: cannot read \(directory)/nope",
            "ROOMBOT_REDIS_PASSWORD: is set but empty",
        ])
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
        XCTAssertEqual(RedisEndpoint(url: "redis://user:pw@h"), RedisEndpoint(host: "h", username: "user", password: "pw"))
        XCTAssertNil(RedisEndpoint(url: "redis://@h"), "an empty user")
        XCTAssertNil(RedisEndpoint(url: "rediss://h"))
        XCTAssertNil(RedisEndpoint(url: "redis://h/x"))
    }
}
