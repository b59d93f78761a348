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

    typealias Phase = PluginSupervisorMachine.Phase

    /// One event sent (or to send) to the process, kept until it finishes so
    /// that a restarted process gets it again, and so a crash can name it.
    struct Entry {
        let seq: UInt64
        /// The encoded EVENTS record (PLUGIN-WIRE.md section 4).
        let record: [UInt8]
        var skip = false

        /// What the record is, for messages: "magix in room lobby", "throwError".
        var label: String {
            record.withUnsafeBytes { raw -> String in
                var r = WireReader(raw)
                let type = UInt32(r.u8())
                _ = r.u64()
                let number = Int64(bitPattern: r.u64())
                let a = r.string() ?? ""
                switch type {
                case ROOMKIT_WIRE_RECORD_ROOM.rawValue: return "\(PluginProcess.roomKindName(Int32(truncatingIfNeeded: number))) in room \(a)"
                case ROOMKIT_WIRE_RECORD_PLAYER.rawValue: return "player event \(number) in room \(a)"
                case ROOMKIT_WIRE_RECORD_CONFIG_CHANGED.rawValue: return "configChanged"
                default: return "throwError"
                }
            }
        }
    }

    let spec: PluginSpec
    let library: String
    /// argv[0] (absolute) and the arguments: roomkit-plugin-host and the library, or the manifest's command.
    let executable: String
    let arguments: [String]
    /// The child's working directory (the manifest's folder for a command; nil: the bot's).
    let workingDirectory: String?
    let logger: Logger
    let onStatus: @Sendable (_ plugin: String, _ status: PluginStatus, _ message: String?) -> Void
    let descriptor: UnsafeMutablePointer<roomkit_plugin>
    let writer: DispatchQueue

    let lock = NSLock()
    // Guarded by `lock`:
    /// The supervision's decisions (PluginSupervisorMachine.swift); this class is its driver.
    var machine: PluginSupervisorMachine
    var phase: Phase { machine.phase }
    var current: PluginChild?
    var generation = 0
    var host: UnsafePointer<roomkit_host_api>?
    weak var runtime: PluginRuntime?
    var journal: [Entry] = []
    var journalHead = 0
    var written = 0
    var nextSeq: UInt64 = 0
    var flushScheduled = false
    var stats = Stats()
    var watchdog: (any DispatchSourceTimer)?
    /// Rate of the warnings for failed fire-and-forget calls.
    let failedCallLog = TokenBucket(rate: 1, burst: 5)
    /// Why on_load failed, in words (a crash names its signal).
    var loadFailure: String?

    /// Counters shown by `GET /v1/plugins` and metrics.
    struct Stats: Sendable, Hashable {
        var crashes = 0
        var restarts = 0
        var dropped = 0
        var skipped = 0
        var pid: Int32 = 0
    }

    init(spec: PluginSpec, library: String, executable: String, arguments: [String], workingDirectory: String?,
         logger: Logger, onStatus: @escaping @Sendable (String, PluginStatus, String?) -> Void) {
        self.spec = spec
        self.library = library
        self.executable = executable
        self.arguments = arguments
        self.workingDirectory = workingDirectory
        machine = PluginSupervisorMachine(limits: spec.supervision, hangBound: spec.timeout * spec.supervision.hangFactor,
                                          loadBound: max(spec.timeout * 20, .seconds(2)))
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

    /// Whether every event queued for the process has been written and
    /// finished (or the process is gone for good): nothing of it is pending.
    var idle: Bool {
        lock.withLock {
            switch phase {
            case .quarantined, .stopping, .stopped: return true
            case .starting, .restarting: return journal.count == journalHead
            case .running: break
            }
            if let current { trimLocked(done: current.doneSeq) }
            return !flushScheduled && journalHead == journal.count
        }
    }

    /// Why on_load failed (nil: it did not, or it returned a code and lived).
    var loadFailureReason: String? { lock.withLock { loadFailure } }

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
        let result = child.load(config: config, callTimeout: spec.timeout, timeout: loadBound)
        guard result == 0 else {
            if result == nil { _ = child.waitForExit(timeout: .milliseconds(200)) }
            let why = result.map { "on_load returned \($0)" }
                ?? child.exitDescription.map { "on_load crashed: the plugin process \($0)" } ?? "on_load did not return in time"
            if result == nil { lock.withLock { loadFailure = why } }
            logger.error("plugin process failed to load", metadata: ["plugin": "\(spec.name)", "reason": "\(why)"])
            _ = lock.withLock { machine.loaded(ok: false) }
            child.kill()
            return result ?? -1
        }
        guard lock.withLock({ machine.loaded(ok: true) }) == .running else {
            child.kill(because: "unloaded while loading")
            return -1
        }
        startWatchdog()
        return 0
    }

    /// A room, player, error or config event: encoded once, queued in order,
    /// written in EVENTS frames (many records a frame when they queue up).
    /// Returns the record's seq (nil: not queued).
    @discardableResult
    func enqueue(_ type: roomkit_wire_record, number: Int64, a: UnsafePointer<CChar>?, b: UnsafePointer<CChar>) -> UInt64? {
        lock.lock()
        defer { lock.unlock() }
        switch phase {
        case .quarantined, .stopping, .stopped: return nil
        case .starting, .running, .restarting: break
        }
        guard journal.count - journalHead < spec.supervision.queueLimit else {
            stats.dropped += 1
            return nil
        }
        nextSeq += 1
        journal.append(Entry(seq: nextSeq, record: WireRecord.encode(type, seq: nextSeq, number: number, a: a, b: b)))
        scheduleFlushLocked()
        return nextSeq
    }

    /// Schedules one write of everything unsent (`lock` held).
    func scheduleFlushLocked() {
        guard phase == .running, !flushScheduled else { return }
        flushScheduled = true
        writer.async { [self] in flush() }
    }

    /// Writes the unsent events as EVENTS frames in one send (writer queue).
    func flush() {
        let batch = lock.withLock { () -> (PluginChild, [UInt8], Bool)? in
            flushScheduled = false
            guard phase == .running || phase == .stopping, let child = current else { return nil }
            trimLocked(done: child.doneSeq)
            guard written < journal.count else { return nil }
            let wasIdle = written == journalHead
            var bytes: [UInt8] = []
            var frameStart = -1, count: UInt32 = 0
            func close() {
                guard frameStart >= 0 else { return }
                let length = UInt32(bytes.count - frameStart - 4)
                withUnsafeBytes(of: length.littleEndian) { for i in 0..<4 { bytes[frameStart + i] = $0[i] } }
                withUnsafeBytes(of: count.littleEndian) { for i in 0..<4 { bytes[frameStart + 5 + i] = $0[i] } }
                frameStart = -1
                count = 0
            }
            for index in written..<journal.count where !journal[index].skip {
                if frameStart >= 0, count >= ROOMKIT_WIRE_BATCH_RECORDS || bytes.count - frameStart >= Int(ROOMKIT_WIRE_BATCH_BYTES) { close() }
                if frameStart < 0 {
                    frameStart = bytes.count
                    bytes.append(contentsOf: [0, 0, 0, 0, UInt8(ROOMKIT_WIRE_EVENTS.rawValue), 0, 0, 0, 0])
                }
                bytes.append(contentsOf: journal[index].record)
                count += 1
            }
            close()
            written = journal.count
            return (child, bytes, wasIdle)
        }
        guard let (child, bytes, wasIdle) = batch, !bytes.isEmpty else { return }
        if wasIdle { child.noteWaitingFrom(PluginChild.monotonicNow()) }
        child.send(bytes)
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
