import BenchSupport
import Foundation
import Logging
import RoomKit
import RoomKitBot
import RoomKitLoop
import RoomKitPluginHost
import RoomKitProtocol

/// What the client's observers count. Loop thread only.
final class Tally: @unchecked Sendable {
    // @unchecked Sendable: written by host observers on the loop thread, read
    // through `loop.submit`.
    var magix = 0
    var firstMagix: Int64 = 0
    var lastMagix: Int64 = 0
    var latencies: [Int64] = []
    var recordLatency = false
    var reconnected = 0
    var firstReconnected: Int64 = 0
    var lastReconnected: Int64 = 0
    var reconnectTimes: [Int64] = []
    var firstLost: Int64 = 0

    func observe(_ event: RoomEvent) {
        switch event {
        case .magix(let magix):
            let now = monotonicNanos()
            if self.magix == 0 { firstMagix = now }
            lastMagix = now
            self.magix += 1
            if recordLatency, let sent = magix.payload["t"]?.int64Value { latencies.append(now - sent) }
        case .roomStateChanged(_, .reconnected, _, _):
            let now = monotonicNanos()
            if reconnected == 0 { firstReconnected = now }
            lastReconnected = now
            reconnected += 1
            reconnectTimes.append(now)
        case .roomStateChanged(_, .reconnecting, _, _):
            if firstLost == 0 { firstLost = monotonicNanos() }
        default:
            break
        }
    }

    func reset() {
        magix = 0
        firstMagix = 0
        lastMagix = 0
        latencies.removeAll(keepingCapacity: true)
    }
}

/// The probe plugin's process-wide counters, read through dlsym.
struct Probe {
    typealias Counters = @convention(c) (UnsafeMutablePointer<UInt64>, UnsafeMutablePointer<Int64>, UnsafeMutablePointer<Int64>) -> Void
    typealias Latencies = @convention(c) (UnsafeMutablePointer<Int64>, Int) -> Int
    let reset: @convention(c) () -> Void
    let counters: Counters
    let latencies: Latencies

    init?(path: String) {
        guard let handle = dlopen(path, RTLD_NOW | RTLD_NOLOAD),
              let reset = dlsym(handle, "bench_probe_reset"), let counters = dlsym(handle, "bench_probe_counters"),
              let latencies = dlsym(handle, "bench_probe_latencies") else { return nil }
        self.reset = unsafeBitCast(reset, to: (@convention(c) () -> Void).self)
        self.counters = unsafeBitCast(counters, to: Counters.self)
        self.latencies = unsafeBitCast(latencies, to: Latencies.self)
    }

    func read() -> (count: Int, first: Int64, last: Int64) {
        var count: UInt64 = 0, first: Int64 = 0, last: Int64 = 0
        counters(&count, &first, &last)
        return (Int(count), first, last)
    }

    func samples() -> [Int64] {
        var buffer = [Int64](repeating: 0, count: 1 << 23)
        let n = buffer.withUnsafeMutableBufferPointer { latencies($0.baseAddress!, $0.count) }
        return Array(buffer.prefix(n))
    }
}

/// `roomkit-bench client`: the RoomKit side of workloads 1 to 4. Logs in
/// `--connections` RoomHosts (one connection each, all on one EventLoop) to
/// `--rooms` rooms each, reports login rate and memory, then follows the
/// orchestrator's commands on stdin (mark, report, await-reconnect, quit).
func runClient(_ options: Options) async throws {
    var logger = Logger(label: "bench")
    logger.logLevel = .error
    let url = options.string("url", "ws://127.0.0.1:7700/v1/rooms")
    let secret = options.string("secret", "bench-secret")
    let connections = options.int("connections", 8)
    let roomsPerConnection = options.int("rooms", 1000)
    let shared = options.int("shared", 0) == 1
    let window = options.int("window", 1000)
    let loop = try EventLoop(name: "bench-client", logger: logger)
    var configuration = RoomHostConfiguration(serverURL: url)
    // roomd runs with --rate-limit raised to match; see Benchmarks/bench.py.
    configuration.requestsPerSecond = options.double("pace", 1_000_000)
    configuration.requestBurst = options.double("pace", 1_000_000)
    configuration.loginTimeout = .seconds(120)
    // --service 1: a service connection (docs/PROTOCOL.md "Service connections"):
    // the engine then paces to the bucket roomd advertises, whatever --pace says.
    let service = options.int("service", 0) == 1
    if service { configuration.serviceToken = benchToken(secret: secret, user: "bot", role: .service) }
    configuration.backoffFirst = .seconds(1)
    // --batch 0: one WebSocket message per server message. The default (1)
    // is the engine's own: it asks roomd for batched messages
    // (docs/PROTOCOL.md "Batched messages"; docs/BENCHMARKS.md says which rows use it).
    configuration.batchesMessages = options.int("batch", 1) == 1
    let tally = Tally()
    tally.recordLatency = options.int("latency", 0) == 1 && options.values["probe"] == nil
    var hosts: [RoomHost] = []
    var managers: [PluginManager] = []
    for index in 0..<connections {
        var configuration = configuration
        // --store DIR: each host keeps its session cursors in roombot's SQLite store (the cost of durability).
        if let directory = options.values["store"] {
            configuration.sessionStore = try BotStore(path: "\(directory)/host-\(index).sqlite", logger: logger)
        }
        let host = try RoomHost(loop: loop, configuration: configuration, logger: logger)
        host.addObserver { tally.observe($0) }
        if let manifest = options.values["manifest"] {
            let manager = PluginManager(host: host, logger: logger)
            let errors = manager.load(try PluginManifest(path: manifest))
            guard errors.isEmpty else { throw BenchError("plugins: \(errors)") }
            managers.append(manager)
        }
        hosts.append(host)
    }
    let probe = options.values["probe"].flatMap(Probe.init(path:))
    _ = try await loop.submit {}
    let before = residentBytes()
    let started = monotonicNanos()
    let cpuBefore = processCPUNanos()
    let failures = await withTaskGroup(of: Int.self) { group in
        for (index, host) in hosts.enumerated() {
            let user = shared ? "bot-\(index)" : "bot"
            let token = benchToken(secret: secret, user: user, role: service ? .service : .writer)
            let rooms = (0..<roomsPerConnection).map { shared ? "room-\($0)" : "s\(index)-\($0)" }
            group.addTask { await loginAll(host, rooms: rooms, user: user, token: token, window: window) }
        }
        return await group.reduce(0, +)
    }
    let elapsed = Double(monotonicNanos() - started) / 1e9
    let loginCPU = processCPUNanos() - cpuBefore
    let sessions = connections * roomsPerConnection - failures
    try await Task.sleep(for: .seconds(1))
    let after = residentBytes()
    trimHeap()
    let trimmed = residentBytes()
    report(["phase": "ready", "sessions": .int(Int64(sessions)), "failed": .int(Int64(failures)),
            "connections": .int(Int64(connections)), "login_s": .double(elapsed),
            "logins_per_s": .double(Double(sessions) / elapsed), "rss_before": .int(Int64(before)),
            "rss_after": .int(Int64(after)), "rss_trimmed": .int(Int64(trimmed)), "cpu_ns": .int(loginCPU)])

    var markedCPU = processCPUNanos()
    for await command in stdinLines() {
        switch command {
        case "mark":
            try await loop.submit { tally.reset() }
            probe?.reset()
            markedCPU = processCPUNanos()
            report(["phase": "marked"])
        case "report":
            try await report(events: tally, probe: probe, loop: loop, since: markedCPU)
        case "await-reconnect":
            let deadline = monotonicNanos() + 180_000_000_000
            var counts = (0, Int64(0), Int64(0), Int64(0))
            while monotonicNanos() < deadline {
                counts = try await loop.submit { (tally.reconnected, tally.firstReconnected, tally.lastReconnected, tally.firstLost) }
                if counts.0 >= sessions { break }
                try await Task.sleep(for: .milliseconds(5))
            }
            let times = try await loop.submit { tally.reconnectTimes }
            report(["phase": "recovered", "reconnected": .int(Int64(counts.0)), "first_ns": .int(counts.1),
                    "last_ns": .int(counts.2), "lost_ns": .int(counts.3), "times": .array(times.map { .int($0) })])
        case "quit":
            exit(0)
        default:
            note("client: unknown command '\(command)'")
        }
    }
    _ = managers
}

/// Waits until the counters stop moving (500 ms), then reports them.
private func report(events tally: Tally, probe: Probe?, loop: EventLoop, since cpu: Int64) async throws {
    var previous = -1
    var quietSince = monotonicNanos()
    var reading = (count: 0, first: Int64(0), last: Int64(0))
    while true {
        if let probe {
            reading = probe.read()
        } else {
            reading = try await loop.submit { (tally.magix, tally.firstMagix, tally.lastMagix) }
        }
        if reading.count != previous {
            previous = reading.count
            quietSince = monotonicNanos()
        } else if monotonicNanos() - quietSince > 500_000_000 {
            break
        }
        try await Task.sleep(for: .milliseconds(20))
    }
    let samples: [Int64]
    if let probe {
        samples = probe.samples()
    } else {
        samples = try await loop.submit { tally.latencies }
    }
    let span = Double(reading.last - reading.first) / 1e9
    report(["phase": "report", "events": .int(Int64(reading.count)), "first_ns": .int(reading.first),
            "last_ns": .int(reading.last), "events_per_s": .double(span > 0 ? Double(reading.count) / span : 0),
            "latency": .object(latencySummary(samples)), "cpu_ns": .int(processCPUNanos() - cpu)])
}

/// Logs `host` in to `rooms` with at most `window` logins in flight; returns the failures.
private func loginAll(_ host: RoomHost, rooms: [String], user: String, token: String, window: Int) async -> Int {
    await withTaskGroup(of: Bool.self) { group in
        var next = 0
        var failures = 0
        func add() {
            let room = rooms[next]
            next += 1
            group.addTask {
                do {
                    try await host.loginRoom(room, user: LoginUser(id: user), token: token)
                    return true
                } catch {
                    return false
                }
            }
        }
        while next < min(window, rooms.count) { add() }
        for await ok in group {
            if !ok { failures += 1 }
            if next < rooms.count { add() }
        }
        return failures
    }
}

struct BenchError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
