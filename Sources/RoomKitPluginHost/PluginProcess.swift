import CRoomKitPluginABI
import CRoomKitPluginWire
import Dispatch
import Foundation
import Logging
import RoomKitLoop
import RoomKitProtocol

/// A plugin running in its own `roomkit-plugin-host` process
/// (`"isolation": "process"`).
///
/// It plugs into the inline machinery unchanged: `map` returns a
/// `MappedPlugin` whose descriptor is a proxy whose hooks forward to the
/// process, so `PluginRuntime` (serial queue, URL timeouts, counters) and
/// `PluginManager` (dispatch, chain, reload) treat it like any other plugin.
/// Host-function calls from the process arrive on its reader thread and go
/// through the runtime's own host table (same logging, same room actions).
///
/// Supervision (PluginProcess+Supervisor.swift): crashes restart the process
/// with backoff and resend the events it had not finished; an event that
/// crashed it twice is skipped; hangs are killed; too many crashes quarantine.
///
/// Thread safety: mutable state is guarded by `lock`; the descriptor and the
/// spec are immutable.
final class PluginProcess: @unchecked Sendable {
    // @unchecked Sendable: every mutable field below `lock` is only touched
    // with `lock` held; `descriptor` is written once in init.

    enum Phase: String { case starting, running, restarting, quarantined, stopping, stopped }

    /// One event sent (or to send) to the process, kept until it finishes so
    /// that a restarted process gets it again, and so a crash can name it.
    struct Entry {
        let seq: UInt64
        let kind: String
        let room: String
        let frame: [UInt8]
        var skip = false
    }

    let spec: PluginSpec
    let library: String
    let executable: String
    let logger: Logger
    let onStatus: @Sendable (_ plugin: String, _ status: PluginStatus, _ message: String?) -> Void
    let descriptor: UnsafeMutablePointer<roomkit_plugin>
    let writer: DispatchQueue

    let lock = NSLock()
    // Guarded by `lock`:
    var phase = Phase.starting
    var current: PluginChild?
    var generation = 0
    var host: UnsafePointer<roomkit_host_api>?
    weak var runtime: PluginRuntime?
    var journal: [Entry] = []
    var journalHead = 0
    var written = 0
    var nextSeq: UInt64 = 0
    var flushScheduled = false
    var crashTimes: [UInt64] = []
    var poison: [UInt64: Int] = [:]
    var stats = Stats()
    var watchdog: (any DispatchSourceTimer)?

    /// Counters shown by `GET /v1/plugins` and metrics.
    struct Stats: Sendable, Hashable {
        var crashes = 0
        var restarts = 0
        var dropped = 0
        var skipped = 0
        var pid: Int32 = 0
    }

    /// Processes by descriptor address, so the manager can find a runtime's process.
    static let registry = LockedValue<[UInt: PluginProcess]>([:])

    /// The process behind `runtime`, if it runs in one.
    static func of(_ runtime: PluginRuntime) -> PluginProcess? {
        registry.withLock { $0[UInt(bitPattern: runtime.descriptor)] }
    }

    private init(spec: PluginSpec, library: String, executable: String, logger: Logger,
                 onStatus: @escaping @Sendable (String, PluginStatus, String?) -> Void) {
        self.spec = spec
        self.library = library
        self.executable = executable
        self.logger = logger
        self.onStatus = onStatus
        writer = DispatchQueue(label: "roomkit.plugin-process.\(spec.name)")
        descriptor = .allocate(capacity: 1)
        descriptor.initialize(to: roomkit_plugin())
    }

    /// Only a process that failed to map is ever freed (a mapped one is
    /// retained for good with its descriptor, see `map`): its descriptor was
    /// never handed out, so it goes with it.
    deinit {
        descriptor.deinitialize(count: 1)
        descriptor.deallocate()
    }

    // MARK: Mapping (the process replaces dlopen)

    /// Starts the plugin's process, which maps the library and checks its
    /// entry, ABI and declared hooks (so a library that crashes while loading
    /// costs only its process). Returns a descriptor whose hooks forward to it.
    static func map(_ spec: PluginSpec, path: String?, logger: Logger,
                    onStatus: @escaping @Sendable (String, PluginStatus, String?) -> Void) throws(PluginLoadError) -> MappedPlugin {
        let where_ = "plugins[\(spec.index)] (\(spec.name))"
        let file = path ?? spec.library
        guard FileManager.default.fileExists(atPath: file) else {
            throw PluginLoadError(plugin: spec.name, stage: .missingFile, message: "\(where_).library: no such file: \(file)")
        }
        guard let executable = hostExecutable() else {
            throw PluginLoadError(plugin: spec.name, stage: .missingFile, message:
                "\(where_).isolation: roomkit-plugin-host not found next to \(ownExecutable) (install it there, or set ROOMKIT_PLUGIN_HOST)")
        }
        let process = PluginProcess(spec: spec, library: file, executable: executable, logger: logger, onStatus: onStatus)
        let child: PluginChild
        do {
            child = try process.spawn()
        } catch {
            throw PluginLoadError(plugin: spec.name, stage: .dlopen, message: "\(where_): cannot start roomkit-plugin-host: \(error)")
        }
        switch child.waitForHello(timeout: process.loadBound) {
        case .some((0, _)):
            break
        case .some((let stage, let message)):
            child.kill()
            throw PluginLoadError(plugin: spec.name, stage: Self.stage(stage), message: "\(where_): \(message)")
        case nil:
            child.kill()
            let why = child.exitDescription ?? "did not answer within \(process.loadBound)"
            throw PluginLoadError(plugin: spec.name, stage: .dlopen, message: "\(where_): the plugin process \(why) while mapping \(file)")
        }
        process.installDescriptor()
        _ = Unmanaged.passRetained(process)  // lives as long as its descriptor: forever
        registry.withLock { $0[UInt(bitPattern: UnsafeRawPointer(process.descriptor))] = process }
        PluginLoader.keepForProcessLifetime(UnsafeRawPointer(process.descriptor))
        return MappedPlugin(spec: spec, descriptor: UnsafePointer(process.descriptor), mappedPath: file)
    }

    private static func stage(_ code: Int32) -> PluginLoadError.Stage {
        switch code {
        case Int32(ROOMKIT_WIRE_STAGE_MISSING_ENTRY.rawValue): return .missingEntry
        case Int32(ROOMKIT_WIRE_STAGE_ENTRY_REFUSED.rawValue): return .entryRefused
        case Int32(ROOMKIT_WIRE_STAGE_ABI_MISMATCH.rawValue): return .abiMismatch
        case Int32(ROOMKIT_WIRE_STAGE_HOOK_NOT_EXPORTED.rawValue): return .hookNotExported
        default: return .dlopen
        }
    }

    static var ownExecutable: String {
        (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments.first ?? "roombot"
    }

    /// `$ROOMKIT_PLUGIN_HOST`, else `roomkit-plugin-host` beside this executable.
    static func hostExecutable() -> String? {
        if let path = ProcessInfo.processInfo.environment["ROOMKIT_PLUGIN_HOST"], !path.isEmpty {
            return FileManager.default.isExecutableFile(atPath: path) ? path : nil
        }
        let beside = ((ownExecutable as NSString).deletingLastPathComponent as NSString).appendingPathComponent("roomkit-plugin-host")
        return FileManager.default.isExecutableFile(atPath: beside) ? beside : nil
    }

    /// How long mapping and on_load may take (as the inline host allows).
    var loadBound: Duration { max(spec.timeout * 20, .seconds(2)) }

    /// Lets the supervisor mark `runtime` quarantined.
    func attach(_ runtime: PluginRuntime) {
        lock.withLock { self.runtime = runtime }
    }

    /// Phase, counters, and how many events the process has not finished.
    var report: (isolation: PluginIsolation, phase: Phase, stats: Stats, pending: Int) {
        lock.withLock {
            if let current { trimLocked(done: current.doneSeq) }
            return (.process, phase, stats, journal.count - journalHead)
        }
    }

    // MARK: Hooks (called by PluginRuntime on the plugin's queue)

    /// on_load: sends the config, waits for the process's on_load.
    func load(host table: UnsafePointer<roomkit_host_api>?, config: String) -> Int32 {
        let child = lock.withLock { () -> PluginChild? in
            host = table
            return current
        }
        guard let child else { return -1 }
        let result = child.load(config: config, timeout: loadBound)
        guard result == 0 else {
            let why = result.map { "on_load returned \($0)" } ?? (child.exitDescription ?? "on_load did not return in time")
            logger.error("plugin process failed to load", metadata: ["plugin": "\(spec.name)", "reason": "\(why)"])
            lock.withLock { phase = .stopped }
            child.kill()
            return result ?? -1
        }
        lock.withLock { phase = .running }
        startWatchdog()
        return 0
    }

    /// A room, player or error event: queued in order, written in batches.
    func enqueue(type: roomkit_wire_down, kind: Int32, room: String, first: String, second: String, code: Int64 = 0) {
        lock.lock()
        defer { lock.unlock() }
        switch phase {
        case .quarantined, .stopping, .stopped: return
        case .starting, .running, .restarting: break
        }
        guard journal.count - journalHead < spec.supervision.queueLimit else {
            stats.dropped += 1
            return
        }
        nextSeq += 1
        var frame = WireFrame(UInt8(type.rawValue), capacity: 32 + room.utf8.count + first.utf8.count + second.utf8.count)
        frame.u64(nextSeq)
        let label: String
        if type == ROOMKIT_WIRE_THROW_ERROR {
            frame.u64(UInt64(bitPattern: code))
            frame.string(first)
            frame.string(second)
            label = "throwError"
        } else {
            frame.i32(kind)
            frame.string(room)
            frame.string(first)
            label = type == ROOMKIT_WIRE_ROOM_EVENT ? Self.roomKindName(kind)
                : type == ROOMKIT_WIRE_CONFIG_CHANGED ? "configChanged" : "player event \(kind)"
        }
        journal.append(Entry(seq: nextSeq, kind: label, room: room, frame: frame.finished))
        scheduleFlushLocked()
    }

    /// Schedules one write of everything unsent (`lock` held).
    func scheduleFlushLocked() {
        guard phase == .running, !flushScheduled else { return }
        flushScheduled = true
        writer.async { [self] in flush() }
    }

    /// Writes the unsent events in one send (writer queue).
    func flush() {
        let batch = lock.withLock { () -> (PluginChild, [UInt8])? in
            flushScheduled = false
            guard phase == .running || phase == .stopping, let child = current else { return nil }
            trimLocked(done: child.doneSeq)
            guard written < journal.count else { return nil }
            var bytes: [UInt8] = []
            for index in written..<journal.count where !journal[index].skip {
                bytes.append(contentsOf: journal[index].frame)
            }
            written = journal.count
            return (child, bytes)
        }
        if let (child, bytes) = batch, !bytes.isEmpty { child.send(bytes) }
    }

    /// Forgets the events the process has finished (`lock` held).
    func trimLocked(done: UInt64) {
        while journalHead < journal.count, journalHead < written, journal[journalHead].seq <= done {
            journalHead += 1
        }
        if journalHead == journal.count {
            journal.removeAll(keepingCapacity: true)
            journalHead = 0
            written = 0
        } else if journalHead > 1024, journalHead * 2 > journal.count {
            journal.removeFirst(journalHead)
            written -= journalHead
            journalHead = 0
        }
    }

    /// url_interrupter: a round trip bounded by `timeoutMs`; nil on timeout,
    /// NULL, or when the process is restarting (the chain passes the URL on).
    func interrupt(_ url: String) -> UnsafeMutablePointer<CChar>? {
        guard let child = lock.withLock({ phase == .running ? current : nil }) else { return nil }
        guard let bytes = child.interrupt(url, timeout: spec.timeout) else { return nil }
        return bytes.withUnsafeBufferPointer { buffer -> UnsafeMutablePointer<CChar>? in
            guard let memory = malloc(buffer.count + 1)?.assumingMemoryBound(to: CChar.self) else { return nil }
            buffer.withMemoryRebound(to: CChar.self) { memory.update(from: $0.baseAddress!, count: buffer.count) }
            memory[buffer.count] = 0
            return memory
        }
    }

    static func roomKindName(_ kind: Int32) -> String {
        let names = [1: "roomStateChanged", 2: "phaseChanged", 3: "roomStateModified", 4: "writableChanged",
                     5: "disconnected", 6: "kicked", 7: "appendFrameError", 8: "magix", 9: "userUpdate",
                     10: "streamUpdate", 11: "extraInfoUpdate", 12: "tokenWillExpire", 13: "resync"]
        return names[Int(kind)] ?? "room event \(kind)"
    }

    // MARK: The proxy descriptor

    private func installDescriptor() {
        var d = roomkit_plugin()
        d.struct_size = UInt32(MemoryLayout<roomkit_plugin>.size)
        d.abi_major = UInt16(ROOMKIT_PLUGIN_ABI_MAJOR)
        d.abi_minor = UInt16(ROOMKIT_PLUGIN_ABI_MINOR)
        d.`self` = Unmanaged.passUnretained(self).toOpaque()
        d.on_load = { me, host, config in
            proxy(me).load(host: host, config: config.map { String(cString: $0) } ?? "null")
        }
        d.on_unload = { me in proxy(me).shutdown() }
        let hooks = spec.hooks
        // Always: besides the throwError hook, a failed action of the
        // plugin's own reaches it as throw_error (roomkit_plugin.h); the child
        // calls the plugin's throw_error when it exports one.
        do {
            d.throw_error = { me, domain, code, message in
                proxy(me).enqueue(type: ROOMKIT_WIRE_THROW_ERROR, kind: 0, room: "",
                                  first: domain.map { String(cString: $0) } ?? "", second: message.map { String(cString: $0) } ?? "",
                                  code: code)
            }
        }
        if hooks.contains(.urlInterrupter) {
            d.url_interrupter = { me, url in
                guard let url else { return nil }
                return proxy(me).interrupt(String(cString: url))
            }
        }
        if hooks.contains(.room) || hooks.contains(.magix) {
            d.on_room_event = { me, kind, room, payload in
                guard let room, let payload else { return }
                proxy(me).enqueue(type: ROOMKIT_WIRE_ROOM_EVENT, kind: kind, room: String(cString: room),
                                  first: String(cString: payload), second: "")
            }
        }
        if hooks.contains(.player) {
            d.on_player_event = { me, kind, room, payload in
                guard let room, let payload else { return }
                proxy(me).enqueue(type: ROOMKIT_WIRE_PLAYER_EVENT, kind: kind, room: String(cString: room),
                                  first: String(cString: payload), second: "")
            }
        }
        installABI11Hooks(&d)
        descriptor.pointee = d
    }
}

/// The process behind a proxy descriptor's `self`.
private func proxy(_ pointer: UnsafeMutableRawPointer?) -> PluginProcess {
    Unmanaged<PluginProcess>.fromOpaque(pointer!).takeUnretainedValue()
}

extension PluginRuntime {
    /// Quarantines a process-isolated plugin on the supervisor's word (too
    /// many crashes); the manager hears it through `onQuarantine`.
    func quarantine(because reason: String) {
        let changed = state.withLock { counters -> Bool in
            guard counters.status == .loaded else { return false }
            counters.status = .quarantined
            loaded.store(false, ordering: .releasing)
            counters.reason = reason
            return true
        }
        if changed { onQuarantine(self, reason) }
    }
}
