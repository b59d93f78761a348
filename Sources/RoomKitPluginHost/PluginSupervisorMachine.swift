import Foundation

/// The decisions of a process plugin's supervision, as a pure state machine
/// (the shape of Hummingbird's and `RoomSessionMachine`'s): one method per
/// input (`spawned`, `frame`, `timeout`, `exited`, `tick`, and the runtime's
/// `stop` and `quarantine`), a result per input carrying its data, the
/// state's data inside its enum case, no I/O, no clock, no randomness of its
/// own. `PluginProcess` is the driver: it spawns, kills, writes and
/// schedules what the results say, and feeds back what happened. Tested
/// without a process (`PluginSupervisorMachineTests`).
struct PluginSupervisorMachine: Sendable {
    /// Where the plugin's process stands (`GET /v1/plugins` shows its name).
    enum Phase: String, Sendable { case starting, running, restarting, quarantined, stopping, stopped }

    /// One incarnation of the child, as the machine knows it.
    struct Child: Equatable, Sendable {
        let pid: Int32
        /// When the bot last saw it make progress, or began waiting for it (ns).
        var lastProgress: UInt64
        /// Whether its HELLO was accepted (then LOAD was sent).
        var greeted = false
        /// What it is busy with, from the machine's own inputs (`sent`, DONE, PING, PONG).
        var work = Work()
    }

    /// The state, with each state's data in its case.
    enum State: Equatable, Sendable {
        /// The first child: not spawned yet (nil), or spawned and loading.
        case starting(Child?)
        case running(Child)
        /// After a crash: waiting out the backoff (nil), or a new child loading.
        case restarting(Child?)
        case quarantined(reason: String)
        case stopping
        case stopped
    }

    /// What the process was doing when it died (from its progress page or its DONE frames).
    enum Suspect: Equatable, Sendable {
        case idle
        /// Handling the event `seq`, described as `label` ("magix in room lobby").
        case event(seq: UInt64, label: String)
        case url
        case load
        case timer
    }

    let limits: PluginSupervision
    /// `timeoutMs` (a call over it is late: one failure, PluginCallDeadline),
    /// `timeoutMs × hangFactor` (a hang: the child is killed), and the bound of a load (ns).
    let callBound: UInt64
    let hangBound: UInt64
    let loadBound: UInt64
    private(set) var state = State.starting(nil)
    /// Crash times in the window, and crashes per event: the history, across states.
    private var crashTimes: [UInt64] = []
    private var poison: [UInt64: Int] = [:]

    init(limits: PluginSupervision, callBound: Duration, hangBound: Duration, loadBound: Duration) {
        self.limits = limits
        self.callBound = Self.nanoseconds(callBound)
        self.hangBound = Self.nanoseconds(hangBound)
        self.loadBound = Self.nanoseconds(loadBound)
    }

    static func nanoseconds(_ duration: Duration) -> UInt64 {
        UInt64(max(duration.components.seconds, 0)) * 1_000_000_000 + UInt64(max(duration.components.attoseconds, 0) / 1_000_000_000)
    }

    /// Not inlined: Swift 6.3.1's release CopyPropagation pass crashes
    /// ("Found outside of lifetime use") on this switch inlined into
    /// `PluginManager.reports`.
    var phase: Phase {
        @inline(never) get { phaseOfState }
    }

    private var phaseOfState: Phase {
        switch state {
        case .starting: return .starting
        case .running: return .running
        case .restarting: return .restarting
        case .quarantined: return .quarantined
        case .stopping: return .stopping
        case .stopped: return .stopped
        }
    }

    // MARK: Inputs

    /// A child was spawned (`pid`), or could not be (`error`), at `now`.
    enum SpawnOutcome: Equatable, Sendable { case started(pid: Int32), failed(error: String) }
    enum SpawnedResult: Equatable {
        /// Wait for its HELLO, at most until `deadline` (ns), then `timeout(.hello)`.
        case awaitHello(deadline: UInt64)
        /// The plugin was stopped or quarantined meanwhile: kill it.
        case kill(reason: String)
        /// The first child could not start: the plugin fails to load.
        case giveUp(reason: String)
        /// A restart could not start a child: quarantine.
        case quarantine(reason: String)
        case nothing
    }
    mutating func spawned(_ outcome: SpawnOutcome, now: UInt64) -> SpawnedResult {
        switch (state, outcome) {
        case (.starting(nil), .started(let pid)):
            state = .starting(Child(pid: pid, lastProgress: now))
            return .awaitHello(deadline: now &+ loadBound)
        case (.restarting(nil), .started(let pid)):
            state = .restarting(Child(pid: pid, lastProgress: now))
            return .awaitHello(deadline: now &+ loadBound)
        case (.starting(nil), .failed(let error)):
            state = .stopped
            return .giveUp(reason: "cannot start its process: \(error)")
        case (.restarting(nil), .failed(let error)):
            state = .quarantined(reason: "cannot restart its process: \(error)")
            return .quarantine(reason: "cannot restart its process: \(error)")
        case (.starting(.some), .started), (.restarting(.some), .started), (.running, .started):
            return .kill(reason: "a second child while one runs")
        case (.quarantined, .started), (.stopping, .started), (.stopped, .started):
            return .kill(reason: "unloaded while restarting")
        case (.starting(.some), .failed), (.restarting(.some), .failed), (.running, .failed),
             (.quarantined, .failed), (.stopping, .failed), (.stopped, .failed):
            return .nothing
        }
    }

    /// A frame from the child.
    enum Frame: Equatable, Sendable {
        /// Its HELLO: nil when it fits the manifest, else why not.
        case hello(problem: String?)
        /// LOADED with on_load's result.
        case loaded(result: Int32)
        /// DONE: every record through `through` is finished.
        case done(through: UInt64)
        /// PONG: the unanswered PING is answered.
        case pong
        /// ANSWER: a URL or state request is answered.
        case answer
        /// FAILED (or LOADED): the child is making progress.
        case progress
    }
    enum FrameResult: Equatable {
        /// Send LOAD (its HELLO fits).
        case load
        /// It loaded: the plugin runs; start the watchdog, flush what waits.
        case running(restarted: Bool)
        /// The first load failed: stop, kill the child; the plugin fails to load.
        case stopAndKill(reason: String)
        /// Kill this child (its exit is then the next crash, or nothing when stopped).
        case kill(reason: String)
        case nothing
    }
    mutating func frame(_ frame: Frame, now: UInt64) -> FrameResult {
        switch (state, frame) {
        case (.starting(var child?), .hello(nil)):
            child.greeted = true
            child.lastProgress = now
            state = .starting(child)
            return .load
        case (.restarting(var child?), .hello(nil)):
            child.greeted = true
            child.lastProgress = now
            state = .restarting(child)
            return .load
        case (.starting(.some), .hello(let problem?)):
            state = .stopped
            return .stopAndKill(reason: problem)
        case (.restarting(.some), .hello(let problem?)):
            return .kill(reason: "restart failed: \(problem)")
        case (.starting(var child?), .loaded(0)) where child.greeted:
            child.lastProgress = now
            state = .running(child)
            return .running(restarted: false)
        case (.restarting(var child?), .loaded(0)) where child.greeted:
            child.lastProgress = now
            state = .running(child)
            return .running(restarted: true)
        case (.starting(.some), .loaded(let result)):
            state = .stopped
            return .stopAndKill(reason: "on_load failed (returned \(result))")
        case (.restarting(.some), .loaded):
            return .kill(reason: "restart failed (on_load did not succeed)")
        case (.running(var child), .progress):
            child.lastProgress = max(child.lastProgress, now)
            state = .running(child)
            return .nothing
        case (.running(var child), .pong):
            child.lastProgress = max(child.lastProgress, now)
            child.work.pingSentAt = 0
            state = .running(child)
            return .nothing
        case (.running(var child), .answer):
            child.lastProgress = max(child.lastProgress, now)
            child.work.requests = max(child.work.requests - 1, 0)
            child.work.requestSince = child.work.requests > 0 ? now : 0
            state = .running(child)
            return .nothing
        case (.running(var child), .done(let through)):
            child.lastProgress = max(child.lastProgress, now)
            if through > child.work.doneThrough {
                child.work.doneThrough = through
                child.work.headSince = now  // the next record, if any, is the head from now
                child.work.sentThrough = max(child.work.sentThrough, through)
            }
            state = .running(child)
            return .nothing
        case (.starting(nil), .hello), (.restarting(nil), .hello), (.starting(nil), .loaded), (.restarting(nil), .loaded),
             (.running, .hello), (.running, .loaded):
            return .kill(reason: "an unexpected handshake frame")
        case (.quarantined, .hello), (.quarantined, .loaded), (.stopping, .hello), (.stopping, .loaded),
             (.stopped, .hello), (.stopped, .loaded):
            return .kill(reason: "unloaded while loading")
        case (.starting, .progress), (.starting, .done), (.starting, .pong), (.starting, .answer), (.restarting, .progress),
             (.restarting, .done), (.restarting, .pong), (.restarting, .answer), (.quarantined, .progress), (.quarantined, .done),
             (.quarantined, .pong), (.quarantined, .answer), (.stopping, .progress), (.stopping, .done), (.stopping, .pong),
             (.stopping, .answer), (.stopped, .progress), (.stopped, .done), (.stopped, .pong), (.stopped, .answer):
            return .nothing
        }
    }

    /// The bot sent a URL or state request (answered by ANSWER) at `now`.
    mutating func requested(now: UInt64) {
        switch state {
        case .running(var child):
            if child.work.requests == 0 { child.work.requestSince = now }
            child.work.requests += 1
            state = .running(child)
        case .starting, .restarting, .quarantined, .stopping, .stopped:
            return
        }
    }

    /// The bot wrote EVENTS frames whose last record is `through`, at `now`.
    /// Written to an idle child, the first of them is the head from now.
    mutating func sent(through: UInt64, now: UInt64) {
        switch state {
        case .running(var child):
            if !child.work.outstanding { child.work.headSince = now }
            child.work.sentThrough = max(child.work.sentThrough, through)
            state = .running(child)
        case .starting, .restarting, .quarantined, .stopping, .stopped:
            return
        }
    }

    /// The driver's wait for a HELLO or a LOADED ran out.
    enum Timeout: Equatable, Sendable { case hello, load }
    enum TimeoutResult: Equatable {
        /// The first child: stop and kill it; the plugin fails to load with `reason`.
        case stopAndKill(reason: String)
        /// A restarted child: kill it (its exit is the next crash).
        case kill(reason: String)
        case nothing
    }
    mutating func timeout(_ what: Timeout, now: UInt64) -> TimeoutResult {
        let reason = what == .hello ? "did not answer within \(Self.seconds(loadBound))" : "on_load did not return in time"
        switch state {
        case .starting(.some):
            state = .stopped
            return .stopAndKill(reason: reason)
        case .restarting(.some):
            return .kill(reason: "restart failed: \(reason)")
        case .starting(nil), .restarting(nil), .running, .quarantined, .stopping, .stopped:
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
        switch state {
        case .starting, .stopping, .stopped:
            state = .stopped
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
            state = .quarantined(reason: "\(crashTimes.count) crashes within \(limits.crashWindowSeconds) s; last: \(message)")
            return .quarantine(reason: "\(crashTimes.count) crashes within \(limits.crashWindowSeconds) s; last: \(message)",
                               message: message, skip: skip, skipNote: skipNote)
        }
        state = .restarting(nil)
        let base = Double(limits.restartBackoffMs) * pow(2, Double(crashTimes.count - 1))
        let delay = min(base, 30_000) * min(max(jitter, 0.5), 1.5)
        return .restart(delay: .milliseconds(Int64(delay)), message: message, skip: skip, skipNote: skipNote)
    }

    /// The watchdog's tick at `now`, judged from what the machine was told
    /// (records and requests sent, DONE, ANSWER, PING, PONG): the head
    /// record late (over `timeoutMs`: one failed call, once per record, the
    /// same rule as an inline call's, PluginCallDeadline), the child hung
    /// (no ANSWER to a request, or no DONE with records outstanding, for
    /// `timeoutMs × hangFactor`, or no PONG for as long), or quiet long
    /// enough to be PINGed (a child stuck in a timer shows only that way).
    mutating func tick(now: UInt64) -> TickResult {
        guard case .running(var child) = state else { return .nothing }
        defer { state = .running(child) }
        var work = child.work
        defer { child.work = work }
        if work.requests > 0, PluginCallDeadline.isLate(since: work.requestSince, now: now, bound: hangBound) {
            return .kill(reason: "hung: a call ran longer than \(Self.seconds(hangBound)) (timeoutMs × hangFactor), killed")
        }
        if work.outstanding {
            if PluginCallDeadline.isLate(since: work.headSince, now: now, bound: hangBound) {
                return .kill(reason: "hung: a call ran longer than \(Self.seconds(hangBound)) (timeoutMs × hangFactor), killed")
            }
            if work.lateAfter != work.doneThrough, PluginCallDeadline.isLate(since: work.headSince, now: now, bound: callBound) {
                work.lateAfter = work.doneThrough
                return .late(after: work.doneThrough)
            }
            return .nothing
        }
        if work.requests > 0 { return .nothing }  // busy with a request: its own bound above
        if work.pingSentAt != 0 {
            guard PluginCallDeadline.isLate(since: work.pingSentAt, now: now, bound: hangBound) else { return .nothing }
            return .kill(reason: "hung: no PONG within \(Self.seconds(hangBound)) (timeoutMs × hangFactor), killed")
        }
        guard PluginCallDeadline.isLate(since: child.lastProgress, now: now, bound: hangBound / 2) else { return .nothing }
        work.pingSentAt = now
        return .ping
    }

    /// The plugin is unloaded.
    enum StopResult: Equatable { case unload, killCurrent, nothing }
    mutating func stop() -> StopResult {
        switch state {
        case .running:
            state = .stopping
            return .unload
        case .starting, .restarting:
            state = .stopped
            return .killCurrent
        case .quarantined, .stopping, .stopped:
            state = .stopped
            return .nothing
        }
    }

    /// The unload finished (the child exited or was killed).
    mutating func stopped() {
        state = .stopped
    }

    /// The runtime quarantined the plugin (e.g. URL failures in a row).
    enum QuarantineResult: Equatable { case killCurrent, nothing }
    mutating func quarantine(because reason: String) -> QuarantineResult {
        switch state {
        case .stopped: return .nothing
        case .starting, .running, .restarting, .quarantined, .stopping:
            state = .quarantined(reason: reason)
            return .killCurrent
        }
    }

    /// "0.2 seconds": how `Duration` prints, for messages.
    static func seconds(_ ns: UInt64) -> String {
        "\(Duration.nanoseconds(Int64(min(ns, UInt64(Int64.max)))))"
    }
}
