import Foundation

/// The decisions of a process plugin's supervision, as a pure state machine
/// (the shape of Hummingbird's and `RoomSessionMachine`'s): one method per
/// input, a result per input carrying its data, no I/O, no clock, no
/// randomness of its own. `PluginProcess` is the driver: it spawns, kills,
/// writes and schedules what the results say, and feeds back what happened.
/// Tested without a process (`PluginSupervisorMachineTests`).
struct PluginSupervisorMachine: Sendable {
    /// Where the plugin's process stands (`GET /v1/plugins` shows its name).
    enum Phase: String, Sendable { case starting, running, restarting, quarantined, stopping, stopped }

    /// What the process was doing when it died (from its progress page or its DONE frames).
    enum Suspect: Equatable, Sendable {
        case idle
        /// Handling the event `seq`, described as `label` ("magix in room lobby").
        case event(seq: UInt64, label: String)
        case url
        case load
        case timer
    }

    /// A call the process is busy with, for the hang check.
    enum Busy: Equatable, Sendable {
        case idle
        /// A call that began at `since` (ns, the progress page's clock); `loading` uses the load bound.
        case call(since: UInt64, loading: Bool)
        /// No page: events are outstanding and the last progress (a DONE or answer) was at `lastProgress`.
        case outstanding(lastProgress: UInt64)
        /// No page, nothing outstanding: a PING sent at `sentAt` is unanswered.
        case pinged(sentAt: UInt64)
    }

    let limits: PluginSupervision
    /// `timeoutMs × hangFactor`, and the bound of a load (ns).
    let hangBound: UInt64
    let loadBound: UInt64
    private(set) var phase = Phase.starting
    private var crashTimes: [UInt64] = []
    private var poison: [UInt64: Int] = [:]

    init(limits: PluginSupervision, hangBound: Duration, loadBound: Duration) {
        self.limits = limits
        self.hangBound = Self.nanoseconds(hangBound)
        self.loadBound = Self.nanoseconds(loadBound)
    }

    static func nanoseconds(_ duration: Duration) -> UInt64 {
        UInt64(max(duration.components.seconds, 0)) * 1_000_000_000 + UInt64(max(duration.components.attoseconds, 0) / 1_000_000_000)
    }

    // MARK: Inputs

    /// on_load answered `ok` (the first child).
    enum LoadedResult: Equatable { case running, stopAndKill }
    mutating func loaded(ok: Bool) -> LoadedResult {
        switch phase {
        case .starting:
            phase = ok ? .running : .stopped
            return ok ? .running : .stopAndKill
        case .running, .restarting, .quarantined, .stopping, .stopped:
            return .stopAndKill
        }
    }

    /// A restarted child loaded (`ok`) or failed to (then its exit is the next crash).
    enum RestartedResult: Equatable { case running, kill(reason: String) }
    mutating func restarted(ok: Bool) -> RestartedResult {
        switch phase {
        case .restarting:
            guard ok else { return .kill(reason: "restart failed (on_load did not succeed)") }
            phase = .running
            return .running
        case .starting, .running, .quarantined, .stopping, .stopped:
            return .kill(reason: "unloaded while restarting")
        }
    }

    /// A new child could not even be spawned during a restart.
    enum SpawnFailedResult: Equatable { case quarantine(reason: String), nothing }
    mutating func spawnFailed(_ error: String) -> SpawnFailedResult {
        switch phase {
        case .restarting:
            phase = .quarantined
            return .quarantine(reason: "cannot restart its process: \(error)")
        case .starting, .running, .quarantined, .stopping, .stopped:
            return .nothing
        }
    }

    /// The current child exited (`reason`: its signal or exit code, or why the bot killed it), at `now` (ns),
    /// while doing `suspect`. `jitter` in 0.5...1.5 spreads the restarts.
    enum ExitedResult: Equatable {
        /// An exit the bot asked for, or after the plugin was stopped: nothing to do.
        case finished
        /// A crash: restart after `delay`; `skip` is a poison event to skip (it crashed the plugin twice).
        case restart(delay: Duration, message: String, skip: UInt64?, skipNote: String?)
        /// A crash too many: quarantine with `reason`.
        case quarantine(reason: String, message: String, skip: UInt64?, skipNote: String?)
    }
    mutating func exited(reason: String, suspect: Suspect, now: UInt64, jitter: Double) -> ExitedResult {
        switch phase {
        case .starting, .stopping, .stopped:
            phase = .stopped
            return .finished
        case .quarantined:
            return .finished
        case .running, .restarting:
            break
        }
        var context = ""
        var skip: UInt64?
        var skipNote: String?
        switch suspect {
        case .idle: break
        case .url: context = " in urlInterrupter"
        case .load: context = " in on_load"
        case .timer: context = " in a timer"
        case .event(let seq, let label):
            context = " while handling \(label)"
            poison[seq, default: 0] += 1
            if poison[seq, default: 0] >= 2 {
                skip = seq
                skipNote = "skipped \(label): it crashed the plugin twice"
            }
        }
        let message = reason + context
        let window = UInt64(limits.crashWindowSeconds) * 1_000_000_000
        crashTimes = crashTimes.filter { now &- $0 < window } + [now]
        if crashTimes.count > limits.maxCrashes {
            phase = .quarantined
            return .quarantine(reason: "\(crashTimes.count) crashes within \(limits.crashWindowSeconds) s; last: \(message)",
                               message: message, skip: skip, skipNote: skipNote)
        }
        phase = .restarting
        let base = Double(limits.restartBackoffMs) * pow(2, Double(crashTimes.count - 1))
        let delay = min(base, 30_000) * min(max(jitter, 0.5), 1.5)
        return .restart(delay: .milliseconds(Int64(delay)), message: message, skip: skip, skipNote: skipNote)
    }

    /// The watchdog's tick at `now`: whether the child is hung.
    enum TickResult: Equatable { case nothing, kill(reason: String) }
    func tick(now: UInt64, busy: Busy) -> TickResult {
        switch phase {
        case .running: break
        case .starting, .restarting, .quarantined, .stopping, .stopped: return .nothing
        }
        switch busy {
        case .idle:
            return .nothing
        case .call(let since, let loading):
            let bound = loading ? loadBound : hangBound
            let elapsed = now &- since
            guard since != 0, elapsed > bound, elapsed < UInt64.max / 2 else { return .nothing }
            return .kill(reason: "hung: a call ran longer than \(Self.seconds(bound)) (timeoutMs × hangFactor), killed")
        case .outstanding(let last):
            guard last != 0, now > last, now - last > hangBound else { return .nothing }
            return .kill(reason: "hung: no progress on its events for \(Self.seconds(hangBound)) (timeoutMs × hangFactor), killed")
        case .pinged(let sentAt):
            guard sentAt != 0, now > sentAt, now - sentAt > hangBound else { return .nothing }
            return .kill(reason: "hung: no PONG within \(Self.seconds(hangBound)) (timeoutMs × hangFactor), killed")
        }
    }

    /// The plugin is unloaded.
    enum StopResult: Equatable { case unload, killCurrent, nothing }
    mutating func stop() -> StopResult {
        switch phase {
        case .running:
            phase = .stopping
            return .unload
        case .starting, .restarting:
            phase = .stopped
            return .killCurrent
        case .quarantined, .stopping, .stopped:
            phase = .stopped
            return .nothing
        }
    }

    /// The unload finished (the child exited or was killed).
    mutating func stopped() {
        phase = .stopped
    }

    /// The runtime quarantined the plugin (e.g. URL failures in a row).
    enum QuarantineResult: Equatable { case killCurrent, nothing }
    mutating func quarantine() -> QuarantineResult {
        switch phase {
        case .stopped: return .nothing
        case .starting, .running, .restarting, .quarantined, .stopping:
            phase = .quarantined
            return .killCurrent
        }
    }

    /// "0.2 seconds": how `Duration` prints, for messages.
    static func seconds(_ ns: UInt64) -> String {
        "\(Duration.nanoseconds(Int64(min(ns, UInt64(Int64.max)))))"
    }
}
