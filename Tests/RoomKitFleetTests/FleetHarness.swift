import Foundation
import RoomKitProtocol
import RoomKitTestSupport
import XCTest

/// One real `roombot run` child in fleet mode, its log in a file (a busy
/// fleet host would fill a pipe), its control API on a known port.
final class FleetHost {
    let index: Int
    let controlPort: Int
    let configPath: String
    let logPath: String
    let eventsPath: String
    private(set) var process: Process?

    init(index: Int, directory: String, config: JSON) throws {
        self.index = index
        controlPort = freePort()
        configPath = "\(directory)/bot\(index).json"
        logPath = "\(directory)/bot\(index).log"
        eventsPath = "\(directory)/events\(index).ndjson"
        guard case .object(var object) = config else { throw XCTSkip("config must be an object") }
        object["control"] = .string("127.0.0.1:\(controlPort)")
        object["events"] = .string(eventsPath)
        object["state"] = .string("\(directory)/state\(index).sqlite")
        try Data(JSON.object(object).serialized()).write(to: URL(fileURLWithPath: configPath))
    }

    func start() throws {
        let binary = try builtProduct("roombot")
        _ = FileManager.default.createFile(atPath: logPath, contents: nil)
        let log = try XCTUnwrap(FileHandle(forWritingAtPath: logPath))
        defer { try? log.close() }
        log.seekToEndOfFile()
        let process = Process()
        process.executableURL = URL(fileURLWithPath: binary)
        process.arguments = ["run", "--config", configPath, "--log-level", "notice"]
        process.standardOutput = log
        process.standardError = log
        try process.run()
        self.process = process
    }

    var isRunning: Bool { process?.isRunning ?? false }

    func signal(_ signal: Int32) {
        if let process { kill(process.processIdentifier, signal) }
    }

    func kill9() {
        guard let process else { return }
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        self.process = nil
    }

    /// The rooms this host is in (LOGINED or RECONNECTED), from its control API;
    /// nil when it does not answer.
    func heldRooms() -> Set<String>? {
        let (status, body) = http(controlPort, "GET", "/v1/rooms")
        guard status == 200, let list = try? JSON.parse(Array(body.utf8)).arrayValue else { return nil }
        return Set(list.compactMap { entry -> String? in
            let reason = entry["reason"]?.stringValue
            return reason == "LOGINED" || reason == "RECONNECTED" ? entry["room"]?.stringValue : nil
        })
    }

    func fleet() -> JSON? {
        let (status, body) = http(controlPort, "GET", "/v1/fleet")
        return status == 200 ? try? JSON.parse(Array(body.utf8)) : nil
    }

    /// A counter or gauge from `/metrics` (0 when absent).
    func metric(_ name: String) -> Double {
        let (_, body) = http(controlPort, "GET", "/metrics")
        for line in body.split(separator: "\n") where line.hasPrefix(name + " ") {
            return Double(line.split(separator: " ").last ?? "") ?? 0
        }
        return 0
    }

    var log: String { fileText(logPath) ?? "" }
    var eventLines: [JSON] {
        (fileText(eventsPath) ?? "").split(separator: "\n").compactMap { try? JSON.parse(Array($0.utf8)) }
    }

    deinit { kill9() }
}

/// A real redis-server, a real roomd and N real roombot fleet hosts.
final class FleetHarness {
    static let secret = "fleet-secret-0123456789"
    let redis: RedisProcess
    let roomd: RoomdProcess
    let directory: String
    let rooms: [String]
    let ttl: Double
    var hosts: [FleetHost] = []
    /// With `probe: true`, every host loads the probe plugin, which appends
    /// each room event it hears to this one file (`ProbePlugin`).
    var probeOutput: String?

    /// The default lease TTL: 2 s, and 4 s in a sanitizer build
    /// (`make check-sanitizers` sets ROOMKIT_SANITIZED), where five
    /// instrumented bots, roomd and redis share two cores and a bot's loop
    /// can stall past a 2 s lease; the lease then runs out on its own clock,
    /// as it must, and the tests that count losses would measure the
    /// machine, not the fleet.
    static let defaultTTL: Double = ProcessInfo.processInfo.environment["ROOMKIT_SANITIZED"] != nil ? 4 : 2

    init(hosts count: Int, rooms: Int, ttl: Double = FleetHarness.defaultTTL, shards: Int = 4096, drainTimeout: Double = 20,
         configRooms: Bool = true, roomdArguments: [String] = [], probe: Bool = false,
         redisArguments: [String] = [], redisUser: String? = nil, redisPassword: String? = nil,
         through: (_ host: Int, _ redisPort: Int, _ roomdPort: Int) -> (redis: Int, roomd: Int) = { ($1, $2) }) throws {
        redis = RedisProcess(arguments: redisArguments)
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("fleet-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        self.rooms = (0..<rooms).map { "room-\($0)" }
        self.ttl = ttl
        roomd = RoomdProcess(secret: Self.secret, arguments: roomdArguments)
        try redis.start()
        try roomd.start()
        let config: JSON = [
            "server": .string("ws://127.0.0.1:\(roomd.port)/v1/rooms"),
            "user": ["id": "fleetbot", "name": "Fleet"], "auth": ["secret": .string(Self.secret)],
            "rooms": .array(configRooms ? self.rooms.map(JSON.string) : []),
            "loginTimeout": 20, "reconnectWindow": 60,
            "fleet": [
                "redis": .string(redis.url), "name": "test", "shards": .int(Int64(shards)), "leaseTTL": .double(ttl),
                // The test machine is shared: CPU load must not decide the placement here.
                "loadThreshold": 1.0, "drainTimeout": .double(drainTimeout),
            ],
        ]
        var manifest: String?
        if probe {
            let output = directory + "/probe.lines"
            let library = try compilePlugin("probe", source: ProbePlugin.source(output: output), in: directory)
            let path = directory + "/plugins.json"
            let json: JSON = ["manifestVersion": 1, "plugins": [[
                "name": "probe", "library": .string(library), "abi": 1, "hooks": ["room"], "rooms": ["*"], "timeoutMs": 1000,
            ]]]
            try Data(json.serialized()).write(to: URL(fileURLWithPath: path))
            manifest = path
            probeOutput = output
        }
        for index in 0..<count {
            // A host may reach Redis or roomd through a fault proxy.
            let (redisPort, roomdPort) = through(index, redis.port, roomd.port)
            guard case .object(var object) = config, case .object(var fleet) = object["fleet"] else { continue }
            fleet["redis"] = .string("redis://\(redisUser.map { $0 + "@" } ?? "")127.0.0.1:\(redisPort)/0")
            if let redisPassword {
                // The password from a file, as systemd's LoadCredential= would give it.
                let file = directory + "/redis-password"
                try (redisPassword + "\n").write(toFile: file, atomically: true, encoding: .utf8)
                fleet["passwordFile"] = .string(file)
            }
            object["fleet"] = .object(fleet)
            object["server"] = .string("ws://127.0.0.1:\(roomdPort)/v1/rooms")
            if let manifest { object["manifest"] = .string(manifest) }
            hosts.append(try FleetHost(index: index, directory: directory, config: .object(object)))
        }
    }

    func startAll() throws {
        for host in hosts { try host.start() }
    }

    /// Room → indexes of the running hosts that hold it.
    func holders() -> [String: [Int]] {
        var result: [String: [Int]] = [:]
        for host in hosts where host.isRunning {
            for room in host.heldRooms() ?? [] { result[room, default: []].append(host.index) }
        }
        return result
    }

    /// The rooms two running hosts held at one instant. One pass over the
    /// hosts is not a snapshot: a room a host gives up just after it was
    /// asked and another takes just before it is asked looks held twice
    /// although it never was (under a sanitizer each request takes long
    /// enough for that to happen). So the hosts are asked forwards and then
    /// backwards: a room host i reported in both passes was held by i over
    /// the whole span in which host j was asked twice, so if j reported it
    /// in both passes too, the two held it at the same time.
    func heldTwice() -> Set<String> {
        let running = hosts.filter(\.isRunning)
        var forward: [Int: Set<String>] = [:]
        for host in running { forward[host.index] = host.heldRooms() ?? [] }
        var both: [Int: Set<String>] = [:]
        for host in running.reversed() { both[host.index] = (host.heldRooms() ?? []).intersection(forward[host.index] ?? []) }
        var seen: Set<String> = []
        var twice: Set<String> = []
        for host in running {
            for room in both[host.index] ?? [] where !seen.insert(room).inserted { twice.insert(room) }
        }
        return twice
    }

    /// Waits until every room is held by exactly one running host; returns
    /// the seconds it took, or nil (with the last picture) on timeout.
    func waitExactlyOnce(_ rooms: [String]? = nil, timeout: TimeInterval) -> (seconds: Double?, last: [String: [Int]]) {
        let wanted = rooms ?? self.rooms
        let started = Date()
        var last: [String: [Int]] = [:]
        while Date().timeIntervalSince(started) < timeout {
            last = holders()
            if wanted.allSatisfy({ last[$0]?.count == 1 }) && last.count == wanted.count {
                return (Date().timeIntervalSince(started), last)
            }
            usleep(100_000)
        }
        return (nil, last)
    }

    /// A short description of what is wrong with `picture`.
    func problems(_ picture: [String: [Int]], _ rooms: [String]? = nil) -> String {
        let wanted = rooms ?? self.rooms
        let missing = wanted.filter { picture[$0] == nil }
        let doubled = picture.filter { $0.value.count > 1 }
        let extra = picture.keys.filter { !wanted.contains($0) }
        return "missing \(missing.count) (e.g. \(missing.prefix(3))), held twice \(doubled.count) "
            + "(e.g. \(doubled.prefix(3))), unexpected \(extra.count)"
    }

    /// Per running host, how many rooms it holds.
    func roomsPerHost(_ picture: [String: [Int]]) -> [Int: Int] {
        var counts: [Int: Int] = [:]
        for holders in picture.values { for index in holders { counts[index, default: 0] += 1 } }
        return counts
    }

    func sum(_ metric: String) -> Double {
        hosts.filter(\.isRunning).map { $0.metric(metric) }.reduce(0, +)
    }

    func close() {
        for host in hosts { host.kill9() }
        roomd.kill9()
        redis.kill9()
        if ProcessInfo.processInfo.environment["KEEP_FLEET_DATA"] == nil {
            try? FileManager.default.removeItem(atPath: directory)
        } else {
            print("FLEET DATA", directory)
        }
    }
}
