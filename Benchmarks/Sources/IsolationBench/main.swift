import BenchSupport
import Foundation
import Logging
import RoomKit
import RoomKitLoop
@_spi(Benchmarks) import RoomKitPluginHost
import RoomKitProtocol

// isolation-bench: workload 7, what "isolation": "process" costs next to
// "inline", with the no-op C plugin (Benchmarks/plugins/bench_noop.c):
//   events/s  player events through PluginManager.dispatchPlayerEvent to 1
//             and to 3 plugins, on the loop thread, 256 per loop callback
//             (the route and the per-turn batches of room events), until
//             every plugin finished every event
//             (process: each process's pending count reaches 0);
//   per hook  wall and CPU ns per delivered event; for process mode the
//             plugin processes' own CPU is added (RUSAGE_CHILDREN, read
//             after they exit);
//   url       round trips of PluginManager.urlInterrupter through one
//             plugin that returns the URL unchanged: p50/p99;
//   floor     the machine's floor for such a round trip: one byte sent to
//             /bin/cat over a socket pair and read back (two processes,
//             each woken from sleep once per round trip): p50/p99;
//   none      the same dispatch loop with no plugin: the bot's own CPU per
//             event, so that `process_N.bot_cpu_ns_per_event_per_plugin` =
//             (bot CPU with N process plugins - bot CPU with none) / events / N
//             (the target of issue #25: <= 1 us per event per process plugin).
// Usage: isolation-bench --c LIB [--events N] [--urls N] [--only inline|process] [--plugins 1]
// roomkit-plugin-host is found beside this executable or via ROOMKIT_PLUGIN_HOST.

let options = Options(CommandLine.arguments.dropFirst())
let library = options.string("c", "")
let room = "room-1"

struct BenchError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

func childrenCPUNanos() -> Int64 {
    var usage = rusage()
    getrusage(RUSAGE_CHILDREN.rawValue, &usage)
    return Int64(usage.ru_utime.tv_sec) * 1_000_000_000 + Int64(usage.ru_utime.tv_usec) * 1000
        + Int64(usage.ru_stime.tv_sec) * 1_000_000_000 + Int64(usage.ru_stime.tv_usec) * 1000
}

/// A manager with `count` copies of the no-op plugin in `isolation` mode.
func manager(_ count: Int, isolation: String, hooks: [String]) throws -> (PluginManager, EventLoop) {
    var logger = Logger(label: "bench")
    logger.logLevel = .critical
    let loop = try EventLoop(name: "isolation-bench", logger: logger)
    let host = try RoomHost(loop: loop, configuration: RoomHostConfiguration(serverURL: "ws://127.0.0.1:9/v1/rooms"), logger: logger)
    let manager = PluginManager(host: host, logger: logger)
    let entries = (0..<count).map { index -> JSON in
        var entry: [String: JSON] = ["name": .string("noop-\(index)"), "library": .string(library), "abi": 1,
                                     "hooks": .array(hooks.map(JSON.string)), "order": .int(Int64(index)),
                                     // Generous: a shared machine can stall a thread for tens of ms, and a
                                     // quarantined plugin would never finish the run.
                                     "timeoutMs": 5_000,
                                     "isolation": .string(isolation)]
        if isolation == "process" { entry["queueLimit"] = 10_000_000 }
        return .object(entry)
    }
    let path = NSTemporaryDirectory() + "/isolation-bench-\(UUID().uuidString).json"
    try Data(JSON.object(["manifestVersion": 1, "plugins": .array(entries)]).serialized()).write(to: URL(fileURLWithPath: path))
    let errors = manager.load(try PluginManifest(path: path))
    guard errors.isEmpty else { throw BenchError("\(errors)") }
    return (manager, loop)
}

/// Events/s and ns per delivered event through `count` plugins.
func throughput(_ count: Int, isolation: String, events: Int) throws -> [String: JSON] {
    let (manager, loop) = try manager(count, isolation: isolation, hooks: count == 0 ? [] : ["player"])
    let payload = (["time": 1234, "keys": ["globalState"]] as JSON).jsonString
    func finished() -> Bool {
        manager.reports.allSatisfy { report in
            if let process = report.process { return report.calls >= events && process.pending == 0 }
            return report.calls >= events
        }
    }
    let childCPU = childrenCPUNanos()
    let cpu = processCPUNanos()
    let start = monotonicNanos()
    // On the loop thread, as a player's events come: `chunk` per loop
    // callback, each callback's events one batch per plugin (the turn).
    let chunk = 256
    var sent = 0
    while sent < events {
        let count = min(chunk, events - sent)
        _ = loop.execute {
            for _ in 0..<count { manager.dispatchPlayerEvent(kind: 4, room: room, payloadText: payload) }
            // The callback is the turn. Left to itself the turn would end behind every callback
            // already posted (this thread posts them faster than the loop runs them), so one
            // turn of the whole run.
            manager.endTurn()
        }
        sent += count
    }
    // Every chunk dispatched (with no plugin, this is all the work there is).
    try loop.runAndWait {}
    while !finished() {
        if let stuck = manager.reports.first(where: { $0.status != .loaded }) {
            throw BenchError("\(stuck.name) is \(stuck.status.rawValue): \(stuck.message ?? "")")
        }
        usleep(500)
    }
    let wall = monotonicNanos() - start
    let botCPU = processCPUNanos() - cpu
    let dropped = manager.reports.compactMap(\.process?.dropped).reduce(0, +)
    manager.unloadAll()
    try loop.shutdown()
    let pluginCPU = childrenCPUNanos() - childCPU  // the processes have exited and been reaped
    let delivered = Double(events * max(count, 1))
    return ["events_per_s": .double(Double(events) / (Double(wall) / 1e9)), "wall_ns_per_hook": .double(Double(wall) / delivered),
            "bot_cpu_ns_per_hook": .double(Double(botCPU) / delivered),
            "plugin_cpu_ns_per_hook": .double(Double(pluginCPU) / delivered), "dropped": .int(Int64(dropped)),
            "bot_cpu_ns": .int(botCPU)]
}

/// The bot's CPU per event per plugin that `count` plugins add to the same loop with none (`baseline`).
func addedBotCPU(_ figures: [String: JSON], over baseline: [String: JSON], count: Int, events: Int) -> JSON {
    let with = Double(figures["bot_cpu_ns"]?.intValue ?? 0), without = Double(baseline["bot_cpu_ns"]?.intValue ?? 0)
    return .double((with - without) / Double(events) / Double(count))
}

/// p50/p99 of urlInterrupter round trips through one plugin.
func urlRoundTrips(isolation: String, count: Int) async throws -> [String: JSON] {
    let (manager, loop) = try manager(1, isolation: isolation, hooks: ["urlInterrupter"])
    for _ in 0..<(count / 10) { _ = await manager.urlInterrupter("http://warm/up.png") }
    var samples: [Int64] = []
    samples.reserveCapacity(count)
    for index in 0..<count {
        let start = monotonicNanos()
        let url = await manager.urlInterrupter("http://img/\(index).png")
        samples.append(monotonicNanos() - start)
        if url != "http://img/\(index).png" { throw BenchError("url changed: \(url)") }
    }
    let failures = manager.reports.first?.failures ?? -1
    manager.unloadAll()
    try loop.shutdown()
    var summary = latencySummary(samples)
    summary["failures"] = .int(Int64(failures))
    return summary
}

/// p50/p99 of one byte echoed by `/bin/cat` over a socket pair: what a
/// round trip between two sleeping processes costs on this machine, with
/// no code of ours on the way (the URL row's floor).
func socketFloor(count: Int) throws -> [String: JSON] {
    var fds: [Int32] = [0, 0]
    guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &fds) == 0 else { throw BenchError("socketpair failed") }
    let cat = Process()
    cat.executableURL = URL(fileURLWithPath: "/bin/cat")
    let end = FileHandle(fileDescriptor: fds[1], closeOnDealloc: false)
    cat.standardInput = end
    cat.standardOutput = end
    try cat.run()
    close(fds[1])
    var byte: UInt8 = 7
    var samples: [Int64] = []
    samples.reserveCapacity(count)
    for index in 0..<(count + count / 10) {
        let start = monotonicNanos()
        guard write(fds[0], &byte, 1) == 1, read(fds[0], &byte, 1) == 1 else { throw BenchError("cat stopped echoing") }
        if index >= count / 10 { samples.append(monotonicNanos() - start) }
    }
    close(fds[0])
    cat.waitUntilExit()
    return latencySummary(samples)
}

do {
    let events = options.int("events", 1_000_000)
    let urls = options.int("urls", 20_000)
    var results: [String: JSON] = [:]
    let only = options.string("only", "")  // e.g. "process": one mode (for profiling)
    let justOne = options.string("plugins", "") == "1"  // only the 1-plugin row, no url (for profiling)
    let none = try throughput(0, isolation: "inline", events: events)
    results["none"] = .object(none)
    note("no plugin: \(results["none"]!.jsonString)")
    for isolation in ["inline", "process"] where only.isEmpty || only == isolation {
        var one = try throughput(1, isolation: isolation, events: events)
        one["bot_cpu_ns_per_event_per_plugin"] = addedBotCPU(one, over: none, count: 1, events: events)
        results["\(isolation)_1"] = .object(one)
        note("\(isolation), 1 plugin: \(results["\(isolation)_1"]!.jsonString)")
        if justOne { continue }
        var three = try throughput(3, isolation: isolation, events: events)
        three["bot_cpu_ns_per_event_per_plugin"] = addedBotCPU(three, over: none, count: 3, events: events)
        results["\(isolation)_3"] = .object(three)
        note("\(isolation), 3 plugins: \(results["\(isolation)_3"]!.jsonString)")
        results["\(isolation)_url"] = .object(try await urlRoundTrips(isolation: isolation, count: urls))
        note("\(isolation), url: \(results["\(isolation)_url"]!.jsonString)")
    }
    if !justOne {
        results["socket_floor"] = .object(try socketFloor(count: urls))
        note("socket floor: \(results["socket_floor"]!.jsonString)")
    }
    report(results)
} catch {
    note("isolation-bench failed: \(error)")
    exit(1)
}
