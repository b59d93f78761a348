import BenchSupport
import CRoomKitPluginABI
import Foundation
import Logging
import RoomKit
import RoomKitLoop
@_spi(Benchmarks) import RoomKitPluginHost
import RoomKitProtocol

// plugin-bench: workload 5, the cost of one hook call. Three paths:
//   c-abi      a tight loop calling a no-op C plugin's on_room_event through
//              its descriptor's function pointer (what the host does per call);
//   swift-sdk  the same loop into a no-op plugin built with RoomKitPluginSDK,
//              through the descriptor the SDK exports (its trampoline parses
//              the payload JSON and makes the protocol call);
//   manager    PluginManager's whole dispatch path (payload encoding, room
//              glob, the hop to the plugin's serial queue, its watchdog and
//              counters), through the public dispatchPlayerEvent, 3 plugins.
// Usage: plugin-bench --c LIB --swift LIB [--iterations N]

let options = Options(CommandLine.arguments.dropFirst())
let payload = #"{"room":"room-1","from":12,"event":"bench","payload":{"t":123456789012345}}"#
let room = "room-1"

func descriptor(_ path: String) throws -> UnsafePointer<roomkit_plugin> {
    guard let handle = dlopen(path, RTLD_NOW | RTLD_LOCAL), let symbol = dlsym(handle, "roomkit_plugin_entry") else {
        throw BenchError("cannot load \(path): \(dlerror().map { String(cString: $0) } ?? "?")")
    }
    let entry = unsafeBitCast(symbol, to: roomkit_plugin_entry_fn.self)
    guard let descriptor = entry(UInt16(ROOMKIT_PLUGIN_ABI_MAJOR), UInt16(ROOMKIT_PLUGIN_ABI_MINOR)) else {
        throw BenchError("\(path) refused the ABI")
    }
    return descriptor
}

struct BenchError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// ns per call of `on_room_event` through the descriptor's function pointer.
func directLoop(_ descriptor: UnsafePointer<roomkit_plugin>, payload: String, iterations: Int) -> Double {
    guard let hook = descriptor.pointee.on_room_event else { return .nan }
    let me = descriptor.pointee.`self`
    return room.withCString { roomPointer in
        payload.withCString { payloadPointer in
            // Warm up, then time the best of three runs (the machine is shared).
            for _ in 0..<(iterations / 10) { hook(me, 8, roomPointer, payloadPointer) }
            var best = Double.infinity
            for _ in 0..<3 {
                let start = monotonicNanos()
                for _ in 0..<iterations { hook(me, 8, roomPointer, payloadPointer) }
                best = min(best, Double(monotonicNanos() - start) / Double(iterations))
            }
            return best
        }
    }
}

func cpuNanos() -> Int64 {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    let user = Int64(usage.ru_utime.tv_sec) * 1_000_000_000 + Int64(usage.ru_utime.tv_usec) * 1000
    let system = Int64(usage.ru_stime.tv_sec) * 1_000_000_000 + Int64(usage.ru_stime.tv_usec) * 1000
    return user + system
}

/// Wall and CPU ns per hook call through PluginManager (3 plugins, `player` hook);
/// nil when the plugins have not run every call within 120 s (the reports
/// are written to stderr then).
func managerPath(library: String, iterations: Int, directory: String) throws -> (wall: Double, cpu: Double)? {
    var logger = Logger(label: "bench")
    logger.logLevel = .critical
    let loop = try EventLoop(name: "plugin-bench", logger: logger)
    let host = try RoomHost(loop: loop, configuration: RoomHostConfiguration(serverURL: "ws://127.0.0.1:9/v1/rooms"), logger: logger)
    let manager = PluginManager(host: host, logger: logger)
    let entries = (0..<3).map { index -> JSON in
        ["name": .string("noop-\(index)"), "library": .string(library), "abi": 1, "hooks": ["player"],
         "rooms": ["*"], "order": .int(Int64(index)), "timeoutMs": 50, "isolation": "inline"]
    }
    let path = directory + "/plugins-\(UUID().uuidString).json"
    try Data(JSON.object(["manifestVersion": 1, "plugins": .array(entries)]).serialized()).write(to: URL(fileURLWithPath: path))
    let errors = manager.load(try PluginManifest(path: path))
    guard errors.isEmpty else { throw BenchError("\(errors)") }
    let event = (["time": 1234, "keys": ["globalState"]] as JSON).jsonString
    let expected = iterations * 3
    func drained() -> Bool { manager.reports.allSatisfy { $0.calls >= iterations } }
    let startWall = monotonicNanos()
    let startCPU = cpuNanos()
    for _ in 0..<iterations { manager.dispatchPlayerEvent(kind: 4, room: room, payloadText: event) }
    while !drained() {
        usleep(1000)
        if monotonicNanos() - startWall > 120_000_000_000 {
            note("manager path did not drain in 120 s: \(manager.reports.map { "\($0.name) \($0.status) calls \($0.calls) failures \($0.failures) \($0.message ?? "")" })")
            manager.unloadAll()
            try loop.shutdown()
            return nil
        }
    }
    let wall = Double(monotonicNanos() - startWall) / Double(expected)
    // The watchdogs of the last calls fire up to timeoutMs later: include their CPU.
    usleep(200_000)
    let cpu = Double(cpuNanos() - startCPU) / Double(expected)
    manager.unloadAll()
    try loop.shutdown()
    return (wall, cpu)
}

do {
    let iterations = options.int("iterations", 20_000_000)
    let managerIterations = options.int("manager-iterations", 200_000)
    let cLibrary = options.string("c", "")
    let swiftLibrary = options.string("swift", "")
    let c = try descriptor(cLibrary)
    let swift = try descriptor(swiftLibrary)
    let cABI = directLoop(c, payload: payload, iterations: iterations)
    let sdk = directLoop(swift, payload: payload, iterations: max(1, iterations / 20))
    let sdkEmpty = directLoop(swift, payload: "{}", iterations: max(1, iterations / 20))
    let directory = NSTemporaryDirectory()
    let managerC = try managerPath(library: cLibrary, iterations: managerIterations, directory: directory)
    let managerSwift = try managerPath(library: swiftLibrary, iterations: managerIterations, directory: directory)
    report(["c_abi_ns": .double(cABI), "swift_sdk_ns": .double(sdk), "swift_sdk_empty_payload_ns": .double(sdkEmpty),
            "manager_c_wall_ns": managerC.map { .double($0.wall) } ?? .null,
            "manager_c_cpu_ns": managerC.map { .double($0.cpu) } ?? .null,
            "manager_swift_wall_ns": managerSwift.map { .double($0.wall) } ?? .null,
            "manager_swift_cpu_ns": managerSwift.map { .double($0.cpu) } ?? .null,
            "payload_bytes": .int(Int64(payload.utf8.count))])
} catch {
    note("plugin-bench failed: \(error)")
    exit(1)
}
