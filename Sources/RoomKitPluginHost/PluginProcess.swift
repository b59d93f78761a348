import CRoomKitPluginABI
import CRoomKitPluginWire
import Dispatch
import Foundation
import Logging
import RoomKitLoop
import RoomKitProtocol
import Synchronization

/// The process kind of plugin endpoint (PluginEndpoint.swift): a child
/// speaking the wire of docs/PLUGIN-WIRE.md, `roomkit-plugin-host` for a
/// library (`"isolation": "process"`) or the manifest's `command`.
///
/// The runtime hands it calls on the plugin's one queue (`queue`, which is
/// also where its EVENTS frames are written); nothing here pretends to be a
/// C plugin. Events are encoded once into the journal and batched into
/// EVENTS frames; each counts as a call of the plugin when the child reports
/// it finished (DONE) or failed (FAILED). Host calls from the child arrive on
/// its reader thread and go straight to the host actions
/// (PluginProcess+HostCalls.swift).
///
/// Supervision (PluginProcess+Supervisor.swift, the decisions in
/// PluginSupervisorMachine): crashes restart the process with backoff and
/// resend the events it had not finished; an event that crashed it twice is
/// skipped; hangs are killed (the runtime's watchdog ticks the machine);
/// too many crashes quarantine.
///
/// Thread safety: mutable state is guarded by `lock`; the spec is immutable.
final class PluginProcess: @unchecked Sendable {
    // @unchecked Sendable: every mutable field below `lock` is only touched
    // with `lock` held.

    typealias Phase = PluginSupervisorMachine.Phase

    /// One event sent (or to send) to the process, kept until it finishes so
    /// that a restarted process gets it again, and so a crash can name it.
    /// Its encoded record lives in `journalBytes` (no array per record).
    struct Entry {
        let seq: UInt64
        /// The record's type (`roomkit_wire_record`) and number (a room
        /// event's kind, a player event's, an error's code).
        let type: UInt8
        let number: Int64
        /// Where its encoded EVENTS record (PLUGIN-WIRE.md section 4) is in
        /// the journal's bytes (`PluginJournalBytes`), and its length.
        let chunk: Int
        let start: Int
        let length: Int
        /// When it was queued (uptime ns): the start of its call's latency.
        let posted: UInt64
        /// A room or player event's room, for the per-room counts (nil: another kind of record).
        var room: String?
        var skip = false
        /// The child reported its handler failed (FAILED): counted already.
        var failed = false
        /// The supervisor's tick found it over `timeoutMs` (PluginCallDeadline):
        /// it counts as one failure when the child finishes it (DONE).
        var late = false

        /// The hook it calls, for the per-hook metrics.
        var hook: PluginHookKind {
            switch UInt32(type) {
            case ROOMKIT_WIRE_RECORD_ROOM.rawValue: return .roomEvent
            case ROOMKIT_WIRE_RECORD_PLAYER.rawValue: return .playerEvent
            case ROOMKIT_WIRE_RECORD_CONFIG_CHANGED.rawValue: return .configChanged
            default: return .throwError
            }
        }

        /// What the record is, for messages: "magix in room lobby", "throwError".
        var label: String {
            switch UInt32(type) {
            case ROOMKIT_WIRE_RECORD_ROOM.rawValue:
                return "\(PluginProcess.roomKindName(Int32(truncatingIfNeeded: number))) in room \(room ?? "")"
            case ROOMKIT_WIRE_RECORD_PLAYER.rawValue: return "player event \(number) in room \(room ?? "")"
            case ROOMKIT_WIRE_RECORD_CONFIG_CHANGED.rawValue: return "configChanged"
            default: return "throwError"
            }
        }
    }

    /// A call that is not a room or player event (those come in a turn's batch, `deliver`), for `send`.
    enum Record {
        case throwError(domain: String, code: Int64, message: String)
        case configChanged(room: String?, config: String)
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
    /// The plugin's one queue (the runtime's): calls run and frames are written here.
    let queue: DispatchQueue
    /// on_config_changed calls posted and not yet finished by the child: a
    /// URL request waits behind them on the queue instead of going at once
    /// (PLUGIN-WIRE.md section 5; PluginRuntime.interrupt).
    let configChangesPending = Atomic<Int>(0)

    let lock = NSLock()
    /// Held for a whole flush (PluginProcess+Journal.swift), so frames leave in journal order.
    let flushing = NSLock()
    // Guarded by `lock`. The journal's state, touched per record, skips
    // Swift's dynamic exclusivity check (a thread-local access set per
    // access: ~12% of the plugin queue's samples in isolation-bench): each is
    // read and written only with `lock` held, never across a call that could
    // reach it again (as `LoopOwned` and `LockedValue` do).
    /// The supervision's decisions (PluginSupervisorMachine.swift); this class is its driver.
    @exclusivity(unchecked) var machine: PluginSupervisorMachine
    var phase: Phase { machine.phase }
    var current: PluginChild?
    var generation = 0
    weak var runtime: PluginRuntime?
    /// The contract minor version of the child's HELLO.
    var helloMinor: UInt16 = 0
    /// The journal (PluginProcess+Journal.swift), in seq order: entries
    /// before `countedHead` are counted (dropped as they pile up), from
    /// there to `journalHead` finished but not yet counted, from there to
    /// `written` sent and not finished, and the rest not sent.
    @exclusivity(unchecked) var journal: [Entry] = []
    @exclusivity(unchecked) var countedHead = 0
    @exclusivity(unchecked) var journalHead = 0
    /// The uptime (ns) of the last finish counted.
    @exclusivity(unchecked) var lastFinish: UInt64 = 0
    /// The journal's encoded records, in chunks released as their records finish.
    @exclusivity(unchecked) var journalBytes = PluginJournalBytes()
    @exclusivity(unchecked) var written = 0
    @exclusivity(unchecked) var nextSeq: UInt64 = 0
    @exclusivity(unchecked) var flushScheduled = false
    /// The last flush's gathered frames, kept for the next one (their arrays' capacity reused).
    @exclusivity(unchecked) var gathered = GatheredFrames()
    @exclusivity(unchecked) var stats = Stats()
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
        machine = PluginSupervisorMachine(limits: spec.supervision, callBound: spec.timeout,
                                          hangBound: spec.timeout * spec.supervision.hangFactor,
                                          loadBound: max(spec.timeout * 20, .seconds(2)))
        self.logger = logger
        self.onStatus = onStatus
        queue = DispatchQueue(label: "roomkit.plugin.\(spec.name)")
    }

    /// The contract minor version the child's HELLO declared.
    var abiMinor: UInt16 { lock.withLock { helloMinor } }

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

    // MARK: Calls (from PluginRuntime, on the plugin's queue)

    /// LOAD: sends the config, waits for the child's on_load. nil when it
    /// loaded; else why not, in words (a crash names its signal).
    func load(config: String) -> String? {
        guard let child = lock.withLock({ current }) else { return "on_load failed: the plugin process is gone" }
        let loaded = child.load(config: config, callTimeout: spec.timeout, timeout: loadBound)
        let now = PluginChild.monotonicNow()
        if let loaded {
            let result = lock.withLock { machine.frame(.loaded(result: loaded), now: now) }
            // A failed on_load is said as such, even when the child exited
            // after its LOADED and the machine heard that first.
            if loaded != 0 {
                let why = "on_load failed (returned \(loaded))"
                logger.error("plugin process failed to load", metadata: ["plugin": "\(spec.name)", "reason": "\(why)"])
                child.kill()
                return why
            }
            switch result {
            case .running:
                startWatchdog()
                return nil
            case .stopAndKill(let why), .kill(let why):
                child.kill(because: why)
                return why
            case .load, .nothing:
                child.kill(because: "unloaded while loading")
                return "unloaded while loading"
            }
        }
        // No LOADED: it died (the machine heard `exited`) or is silent (`timeout`).
        _ = child.waitForExit(timeout: .milliseconds(200))
        _ = lock.withLock { machine.timeout(.load, now: now) }
        let why = child.exitDescription.map { "on_load crashed: the plugin process \($0)" } ?? "on_load did not return in time"
        lock.withLock { loadFailure = why }
        logger.error("plugin process failed to load", metadata: ["plugin": "\(spec.name)", "reason": "\(why)"])
        child.kill()
        return why
    }

    /// url_interrupter: a round trip bounded by `timeoutMs`, with no thread
    /// waiting for it (PluginChild.interrupt). `finish` gets the new URL,
    /// or why there is none (the chain passes the URL on).
    func interrupt(_ url: String, then finish: @escaping @Sendable (Result<String, URLFailure>) -> Void) {
        guard let child = lock.withLock({ phase == .running ? current : nil }) else {
            return finish(.failure(URLFailure("the plugin process is not running")))
        }
        let timeout = spec.timeout
        child.interrupt(url, timeout: timeout) { reply in
            let answer: PluginChild.Answer
            switch reply {
            case .success(let answered): answer = answered
            case .failure(.timedOut): return finish(.failure(URLFailure("urlInterrupter gave no answer within \(timeout)")))
            case .failure(.exited(let how)): return finish(.failure(URLFailure("the plugin process \(how) during urlInterrupter")))
            }
            guard answer.result == 0, let text = answer.text else { return finish(.failure(URLFailure("urlInterrupter returned NULL"))) }
            guard let rewritten = String(validating: text, as: UTF8.self) else {
                return finish(.failure(URLFailure("urlInterrupter returned invalid UTF-8")))
            }
            finish(.success(rewritten))
        }
    }

    /// Why a process plugin's URL step gave no URL (counted as a failed call).
    struct URLFailure: Error {
        var reason: String
        init(_ reason: String) { self.reason = reason }
    }

    /// The watchdog's tick: URL requests past their deadline end, timed out.
    func expireRequests() {
        lock.withLock { current }?.expireRequests()
    }

    /// EXPORT_STATE: the state, or nothing (the child answered null); nil when
    /// it is not running or does not answer within `timeout`.
    func exportState(timeout: Duration) -> PluginRuntime.Export? {
        guard let answer = stateRoundTrip(ROOMKIT_WIRE_EXPORT_STATE, state: nil, timeout: timeout) else { return nil }
        guard let text = answer.text else { return .nothing }
        guard let state = String(validating: text, as: UTF8.self) else { return .failed("export_state returned invalid UTF-8") }
        return .state(state)
    }

    /// IMPORT_STATE: import_state's result (-1 when the child has none); nil without an answer in time.
    func importState(_ state: String, timeout: Duration) -> Int32? {
        guard let answer = stateRoundTrip(ROOMKIT_WIRE_IMPORT_STATE, state: state, timeout: timeout) else { return nil }
        return answer.result == ROOMKIT_WIRE_NO_IMPORT ? -1 : answer.result
    }

    /// One export/import round trip with the running child, after every event
    /// queued before it (the export must follow the old version's last event).
    private func stateRoundTrip(_ type: roomkit_wire_down, state: String?, timeout: Duration) -> (result: Int32, text: [UInt8]?)? {
        guard let child = lock.withLock({ phase == .running ? current : nil }) else { return nil }
        flush()
        return child.stateRequest(type, state: state, timeout: timeout)
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
