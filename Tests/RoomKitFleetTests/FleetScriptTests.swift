import Dispatch
import Logging
@testable import RoomKitBot
import RoomKitLoop
import RoomKitRedis
import RoomKitTestSupport
import XCTest

/// The fleet's Lua scripts one by one against a real redis-server.
final class FleetScriptTests: XCTestCase {
    private var redis: RedisProcess!
    private var loop: EventLoop!
    private var client: RedisClient!
    private let keys = FleetKeys(fleet: "t")

    override func setUpWithError() throws {
        redis = RedisProcess()
        try redis.start()
        loop = try EventLoop(name: "fleet-scripts")
        let endpoint = try XCTUnwrap(RedisEndpoint(url: redis.url))
        client = try loop.runAndWait { [loop] in
            let client = RedisClient(loop: loop!, endpoint: endpoint, logger: Logger(label: "fleet-scripts"))
            try client.start()
            return client
        }
        let deadline = Date().addingTimeInterval(5)
        while try !loop.runAndWait({ [client] in client!.isConnected }), Date() < deadline { usleep(10_000) }
    }

    override func tearDownWithError() throws {
        try loop.shutdown()
        loop = nil
        client = nil
        // XCTest keeps test case objects until the process ends: stop it now.
        redis.kill9()
        redis = nil
    }

    private func run(_ source: FleetScriptSource, keys: [String], _ arguments: [String]) throws -> RedisValue {
        let script = source.script
        let result = LockedValue<Result<RedisValue, RedisError>?>(nil)
        let done = DispatchSemaphore(value: 0)
        _ = loop.execute { [client] in
            client!.evaluate(script, keys: keys, arguments: arguments) { value in
                result.withLock { $0 = value }
                done.signal()
            }
        }
        XCTAssertEqual(done.wait(timeout: .now() + 5), .success)
        return try XCTUnwrap(result.withLock { $0 }).get()
    }

    private func command(_ arguments: [String]) throws -> RedisValue {
        let result = LockedValue<Result<RedisValue, RedisError>?>(nil)
        let done = DispatchSemaphore(value: 0)
        _ = loop.execute { [client] in
            client!.command(arguments) { value in
                result.withLock { $0 = value }
                done.signal()
            }
        }
        XCTAssertEqual(done.wait(timeout: .now() + 5), .success)
        return try XCTUnwrap(result.withLock { $0 }).get()
    }

    /// The scripts are files (`Sources/RoomKitBot/Lua/*.lua`, a resource of
    /// RoomKitBot): every file is one the fleet runs, each compiles in the
    /// test redis (`SCRIPT LOAD`; running each is the tests below).
    func testEveryLuaFile_isAFleetScript_andCompilesInRedis() throws {
        let directory = try XCTUnwrap(FleetScripts.directory)
        let files = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.hasSuffix(".lua") }.sorted()
        XCTAssertEqual(files, FleetScripts.all.map { "\($0.name).lua" }.sorted())
        for source in FleetScripts.all {
            let text = try String(contentsOf: directory.appendingPathComponent("\(source.name).lua"), encoding: .utf8)
            XCTAssertEqual(source.source, text, "the script runs as its file says")
            let sha = try XCTUnwrap(try command(["SCRIPT", "LOAD", text]).string, source.name)
            XCTAssertEqual(sha.count, 40, source.name)
        }
    }

    private func claim(_ host: String, owned: Int, shards: Int = 8, ttl: Int = 60_000) throws -> (target: Int, claimed: [(Int, Int64)]) {
        let reply = try run(FleetScripts.claim, keys: [keys.lease, keys.owner, keys.hosts, keys.fence, keys.draining],
                            [host, String(ttl), String(shards), String(owned), String(shards), "1"]).array
        var pairs: [(Int, Int64)] = []
        let flat = reply[3].array
        for index in stride(from: 0, to: flat.count, by: 2) {
            pairs.append((Int(flat[index].integer ?? -1), flat[index + 1].integer ?? -1))
        }
        return (Int(reply[1].integer ?? 0), pairs)
    }

    private func renew(_ host: String, _ held: [(Int, Int64)], ttl: Int = 60_000) throws -> (lost: [Int], reasserted: [Int]) {
        var arguments = [host, String(ttl), "0", "0", "0"]
        for (shard, fence) in held { arguments += [String(shard), String(fence)] }
        let reply = try run(FleetScripts.renew, keys: [keys.lease, keys.owner, keys.hosts, keys.host(host), keys.fence,
                                                       keys.draining], arguments).array
        return (reply[1].array.compactMap { $0.integer.map(Int.init) }, reply[2].array.compactMap { $0.integer.map(Int.init) })
    }

    func testFirstClaim_waitsOneTTL_thenTakesUpToTheTargetWithRisingFences() throws {
        _ = try renew("a", [])
        _ = try renew("b", [])
        // Shards without a lease record count as leased for one TTL.
        XCTAssertEqual(try claim("a", owned: 0, ttl: 300).claimed.count, 0)
        usleep(400_000)
        let first = try claim("a", owned: 0, ttl: 300)
        XCTAssertEqual(first.target, 4, "8 shards over 2 live hosts")
        XCTAssertEqual(first.claimed.count, 4)
        XCTAssertEqual(first.claimed.map(\.1), [1, 2, 3, 4])
        let second = try claim("b", owned: 0, ttl: 300)
        XCTAssertEqual(second.claimed.map(\.1), [5, 6, 7, 8])
        XCTAssertEqual(Set(first.claimed.map(\.0)).intersection(second.claimed.map(\.0)), [])
        XCTAssertEqual(try claim("b", owned: 4).claimed.count, 0, "nothing expired is left")
    }

    /// The claim script's sixth element: rooms in shards no one holds, read
    /// once per claim round from the expired shards only.
    func testClaim_countsTheRoomsOfExpiredShards_notTheHeldOnes() throws {
        _ = try renew("a", [])
        redis.cli(["SADD", keys.rooms(2), "r1", "r2", "r3"])
        redis.cli(["SADD", keys.rooms(5), "r4"])
        _ = try claim("a", owned: 0, ttl: 1)  // enters the shards, leased for 1 ms
        usleep(20_000)
        let unhomed = { (host: String, owned: Int, may: String) throws -> Int64? in
            try self.run(FleetScripts.claim, keys: [self.keys.lease, self.keys.owner, self.keys.hosts, self.keys.fence, self.keys.draining],
                         [host, "60000", "8", String(owned), "8", may]).array[6].integer
        }
        XCTAssertEqual(try unhomed("a", 0, "0"), 4, "every shard expired, none claimed: all 4 rooms unhomed")
        XCTAssertEqual(try unhomed("a", 0, "1"), 0, "a claimed every shard")
    }

    func testRenew_extendsOwnShards_reportsTakenOnes_andReassertsOnlyOwnerlessOnes() throws {
        _ = try renew("a", [])
        usleep(50_000)
        _ = try claim("a", owned: 0, ttl: 1)  // enters the shards, leased for 1 ms
        usleep(20_000)
        let taken = try claim("a", owned: 0).claimed
        XCTAssertEqual(taken.count, 8)
        let shard = taken[0].0
        // Another host took shard 0 with a newer fence: a's renew reports it lost.
        redis.cli(["HSET", keys.owner, String(shard), "b|99"])
        XCTAssertEqual(try renew("a", taken).lost, [shard])
        // Redis lost everything: a's renew re-asserts and keeps the counter past its fences.
        redis.cli(["FLUSHALL"])
        let again = try renew("a", Array(taken.dropFirst()))
        XCTAssertEqual(again.lost, [])
        XCTAssertEqual(again.reasserted.count, 7)
        XCTAssertEqual(Int64(redis.cli(["GET", keys.fence]).filter(\.isNumber)), taken.map(\.1).max())
        // A release gives the shard up at once (expired lease, no owner); the
        // coordinator drops it from its renews when it sends the release.
        let released = taken[1]
        XCTAssertEqual(try run(FleetScripts.release, keys: [keys.lease, keys.owner],
                               ["a", "0", String(released.0), String(released.1)]), .integer(1))
        XCTAssertEqual(redis.cli(["HEXISTS", keys.owner, String(released.0)]).filter(\.isNumber), "0")
        XCTAssertEqual(redis.cli(["ZSCORE", keys.lease, String(released.0)]).filter(\.isNumber), "0")
        _ = try renew("a", Array(taken.dropFirst(2)))
        XCTAssertEqual(redis.cli(["HEXISTS", keys.owner, String(released.0)]).filter(\.isNumber), "0")
        XCTAssertEqual(try claim("b", owned: 0).claimed.map(\.0), [released.0], "another host can take it at once")
    }

    func testCursors_areWrittenOnlyByTheShardsCurrentOwnerAndFence() throws {
        redis.cli(["HSET", keys.owner, "3", "a|7"])
        let fields = ["s-1", "4", "17", "{\"id\":\"bot\"}", "1", "{}"]
        let written = try run(FleetScripts.cursors, keys: [keys.owner, keys.cursor("r1"), keys.cursor("r2")],
                              ["a", "3", "7", "set"] + fields + ["3", "6", "set"] + fields)
        XCTAssertEqual(written, .integer(1), "the stale fence 6 wrote nothing")
        XCTAssertEqual(redis.cli(["HGET", keys.cursor("r1"), "seq"]).filter(\.isNumber), "17")
        XCTAssertEqual(redis.cli(["EXISTS", keys.cursor("r2")]).filter(\.isNumber), "0")
        XCTAssertEqual(try run(FleetScripts.owners, keys: [keys.cursor("r1"), keys.cursor("r2")], []).array.map(\.string),
                       ["a|7", ""], "each cursor names its writer")
        // A drain's release keeps the cursors for the next owner; a rebalance's deletes them.
        redis.cli(["SADD", keys.rooms(3), "r1"])
        XCTAssertEqual(try run(FleetScripts.release, keys: [keys.lease, keys.owner], ["a", "1", "3", "7"]), .integer(1))
        XCTAssertEqual(redis.cli(["EXISTS", keys.cursor("r1")]).filter(\.isNumber), "1")
        redis.cli(["HSET", keys.owner, "3", "a|8"])
        XCTAssertEqual(try run(FleetScripts.release, keys: [keys.lease, keys.owner], ["a", "0", "3", "8"]), .integer(1))
        XCTAssertEqual(redis.cli(["EXISTS", keys.cursor("r1")]).filter(\.isNumber), "0")
    }

    func testRefence_movesTheCounterPastRoomdAndRefencesOnlyAnOwnedShard() throws {
        redis.cli(["SET", keys.fence, "5"])
        redis.cli(["HSET", keys.owner, "2", "a|5"])
        XCTAssertEqual(try run(FleetScripts.refence, keys: [keys.fence, keys.owner], ["900", "a", "2", "5"]), .integer(901))
        XCTAssertEqual(redis.cli(["HGET", keys.owner, "2"]).trimmingCharacters(in: .whitespacesAndNewlines), "\"a|901\"")
        XCTAssertEqual(try run(FleetScripts.refence, keys: [keys.fence, keys.owner], ["950", "a", "2", "5"]), .integer(-1),
                       "a stale owner record is not re-fenced")
        XCTAssertEqual(redis.cli(["GET", keys.fence]).filter(\.isNumber), "950", "but the counter still moves past roomd")
    }
}
