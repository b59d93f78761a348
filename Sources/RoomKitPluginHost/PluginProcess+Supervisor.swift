import CRoomKitPluginABI
import CRoomKitPluginWire
import Dispatch
import Foundation
import Logging
import RoomKitProtocol

extension PluginProcess {
    // MARK: Spawning

    /// Starts a new incarnation and makes it `current`.
    func spawn() throws -> PluginChild {
        var pair: [Int32] = [-1, -1], out: [Int32] = [-1, -1], err: [Int32] = [-1, -1]
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &pair) == 0 else {
            throw PluginProcessError("socketpair: \(String(cString: strerror(errno)))")
        }
        // The progress page, offered to every child (fd 4): the bot reads it
        // only when the child's HELLO says it keeps it (`usesPage`); a child
        // that does not is timed by DONE and PING. The Python SDK keeps it, so
        // a crash names the event that was running and out-of-memory shows.
        var page: UnsafeMutablePointer<roomkit_wire_progress>?
        let pageFD = roomkit_wire_progress_create(&page)
        guard pageFD >= 0, let page, roomkit_wire_pipe(&out) == 0, roomkit_wire_pipe(&err) == 0 else {
            for fd in pair + out + err + [pageFD] where fd >= 0 { close(fd) }
            throw PluginProcessError("cannot make the progress page or output pipes")
        }
        let sharePage = true
        let environment = PluginEnvironment.forChild(plugin: spec.name, progressPage: sharePage)
        let argv = [executable] + arguments
        let path = executable
        let cwd = workingDirectory
        let pid = PluginSpawner.shared.run {
            var cArgv = argv.map { strdup($0) }
            cArgv.append(nil)
            var cEnv = environment.map { strdup($0) }
            cEnv.append(nil)
            defer { for pointer in cArgv + cEnv { free(pointer) } }
            return roomkit_wire_spawn(path, cArgv, cEnv, cwd, pair[1], sharePage ? pageFD : -1, out[1], err[1])
        }
        for fd in [pair[1], pageFD, out[1], err[1]] { close(fd) }
        guard pid > 0 else {
            for fd in [pair[0], out[0], err[0]] { close(fd) }
            roomkit_wire_progress_release(page)
            throw PluginProcessError("posix_spawn \(executable): \(String(cString: strerror(-pid)))")
        }
        let child = PluginChild(pid: pid, socket: pair[0], progress: page, owner: self)
        let result = lock.withLock { () -> PluginSupervisorMachine.SpawnedResult in
            current = child
            generation += 1
            stats.pid = pid
            return machine.spawned(.started(pid: pid), now: PluginChild.monotonicNow())
        }
        child.start(stdout: out[0], stderr: err[0])
        switch result {
        case .kill(let reason): child.kill(because: reason)
        case .awaitHello, .giveUp, .quarantine, .nothing: break
        }
        return child
    }

    // MARK: Crashes

    /// Called on the child's reader thread once the process is gone: what
    /// it was doing goes to the machine, which decides; this does the I/O.
    func childExited(_ child: PluginChild) {
        let what = roomkit_wire_load32(&child.progress.pointee.busy_what)
        let busySeq = roomkit_wire_load64(&child.progress.pointee.busy_seq)
        let crashErrno = roomkit_wire_load32(&child.progress.pointee.crash_errno)
        let vmKB = roomkit_wire_load64(&child.progress.pointee.crash_vm_kb)
        let limits = spec.supervision
        var reason = child.killReason ?? child.exitDescription ?? "exited"
        if child.exitSignal == SIGXCPU {
            reason = "went over its CPU limit (cpuLimitSeconds \(limits.cpuLimitSeconds)): " + reason
        } else if limits.memoryLimitMB > 0, crashErrno == ENOMEM || vmKB + 8192 >= UInt64(limits.memoryLimitMB) * 1024 {
            reason = "went over its memory limit (memoryLimitMB \(limits.memoryLimitMB)): " + reason
        }

        lock.lock()
        guard child === current else { return lock.unlock() }
        current = nil
        runtime?.stopChildWatchdog()
        trimLocked(done: child.doneSeq)
        // Without the progress page, the event being handled is the first one
        // sent and not finished (PLUGIN-WIRE.md section 8.1).
        let suspect: PluginSupervisorMachine.Suspect
        if child.usesPage {
            switch Int(what) {
            case Int(ROOMKIT_WIRE_BUSY_EVENT.rawValue):
                suspect = journal[journalHead...].first { $0.seq == busySeq }.map { .event(seq: busySeq, label: $0.label) } ?? .idle
            case Int(ROOMKIT_WIRE_BUSY_URL.rawValue): suspect = .url
            case Int(ROOMKIT_WIRE_BUSY_LOAD.rawValue): suspect = .load
            case Int(ROOMKIT_WIRE_BUSY_TIMER.rawValue): suspect = .timer
            default: suspect = .idle  // idle, or unloading: nothing to name
            }
        } else {
            suspect = journal[journalHead..<written].first { !$0.skip }.map { .event(seq: $0.seq, label: $0.label) } ?? .idle
        }
        let result = machine.exited(reason: reason, suspect: suspect, now: DispatchTime.now().uptimeNanoseconds,
                                    jitter: Double.random(in: 0.5...1.5))
        countCrashInRoom(suspect, result)
        var skipNote: String?
        switch result {
        case .finished:
            lock.unlock()
            countFinished(through: .max)
            return
        case .restart(_, _, let skip, let note), .quarantine(_, _, let skip, let note):
            stats.crashes += 1
            skipNote = note
            if let skip, let index = journal[journalHead...].firstIndex(where: { $0.seq == skip }) {
                journal[index].skip = true
                stats.skipped += 1
            }
        }
        if case .quarantine = result {
            stats.dropped += journal.count - journalHead
            clearJournalLocked()
        } else {
            written = journalHead  // resend what it had not finished, to be judged afresh
            for index in journalHead..<journal.count { journal[index].late = false }
        }
        let target = runtime
        lock.unlock()
        // What the child finished before it died counts (no FAILED can follow).
        countFinished(through: .max)

        let message: String
        switch result {
        case .finished: return
        case .restart(_, let text, _, _), .quarantine(_, let text, _, _): message = text
        }
        logger.error("plugin process crashed", metadata: ["plugin": "\(spec.name)", "reason": "\(message)"])
        onStatus(spec.name, .crashed, message)
        if let skipNote {
            logger.error("plugin event skipped", metadata: ["plugin": "\(spec.name)", "reason": "\(skipNote)"])
            onStatus(spec.name, .skipped, skipNote)
        }
        switch result {
        case .finished: return
        case .quarantine(let why, _, _, _): target?.quarantine(because: why)
        case .restart(let delay, _, _, _):
            let ns = Int(PluginSupervisorMachine.nanoseconds(delay))
            DispatchQueue.global().asyncAfter(deadline: .now() + .nanoseconds(ns)) { [self] in restart() }
        }
    }

    /// Starts a new process, checks its HELLO, runs on_load with the same
    /// config, then resends the unfinished events; each step is an input of
    /// the machine. A failure here is another crash (childExited).
    func restart() {
        guard lock.withLock({ phase == .restarting }) else { return }
        let child: PluginChild
        do {
            child = try spawn()
        } catch {
            logger.error("plugin process could not restart", metadata: ["plugin": "\(spec.name)", "error": "\(error)"])
            let result = lock.withLock { machine.spawned(.failed(error: "\(error)"), now: PluginChild.monotonicNow()) }
            switch result {
            case .quarantine(let why): lock.withLock { runtime }?.quarantine(because: why)
            case .awaitHello, .kill, .giveUp, .nothing: break
            }
            return
        }
        let result = greetAndLoad(child)
        switch result {
        case .kill(let reason), .stopAndKill(let reason):
            child.kill(because: child.killReason ?? reason)
        case .running:
            lock.withLock {
                stats.restarts += 1
                scheduleFlushLocked()
            }
            startWatchdog()
            logger.info("plugin process restarted", metadata: ["plugin": "\(spec.name)", "pid": .stringConvertible(child.pid)])
            onStatus(spec.name, .restarted, "pid \(child.pid)")
        case .load, .nothing:
            break
        }
    }

    /// A restarted child's HELLO (checked against the manifest, limits
    /// applied) and LOAD, each fed to the machine; its last result.
    private func greetAndLoad(_ child: PluginChild) -> PluginSupervisorMachine.FrameResult {
        guard let hello = child.waitForHello(timeout: loadBound) else {
            return timedOut(.hello)
        }
        var problem = Self.check(hello, against: spec)?.message
        if problem == nil, roomkit_wire_limit(child.pid, UInt(spec.supervision.memoryLimitMB), UInt(spec.supervision.cpuLimitSeconds)) != 0 {
            problem = "cannot apply memoryLimitMB/cpuLimitSeconds"
        }
        let greeted = lock.withLock { machine.frame(.hello(problem: problem), now: PluginChild.monotonicNow()) }
        guard greeted == .load else { return greeted }
        guard let result = child.load(config: spec.config.jsonString, callTimeout: spec.timeout, timeout: loadBound) else {
            return timedOut(.load)
        }
        return lock.withLock { machine.frame(.loaded(result: result), now: PluginChild.monotonicNow()) }
    }

    /// A wait that ran out, as the machine's `timeout` input, in `FrameResult` terms.
    private func timedOut(_ what: PluginSupervisorMachine.Timeout) -> PluginSupervisorMachine.FrameResult {
        switch lock.withLock({ machine.timeout(what, now: PluginChild.monotonicNow()) }) {
        case .kill(let reason): return .kill(reason: reason)
        case .stopAndKill(let reason): return .stopAndKill(reason: reason)
        case .nothing: return .nothing
        }
    }

    // MARK: Hangs

    /// Has the runtime's watchdog look at the child (`checkHang`) while it runs.
    func startWatchdog() {
        lock.withLock { runtime }?.startChildWatchdog()
    }

    /// The watchdog's tick (every quarter of `timeoutMs`): the machine
    /// judges from what it was told (records sent, DONE, PING, PONG); this
    /// marks a late record, sends a PING, or kills a hung child.
    func checkHang() {
        guard let (child, result) = lock.withLock({ () -> (PluginChild, PluginSupervisorMachine.TickResult)? in
            guard phase == .running, let child = current else { return nil }
            return (child, machine.tick(now: PluginChild.monotonicNow()))
        }) else { return }
        switch result {
        case .nothing: break
        case .ping: child.ping()
        case .late(let after): markLate(after: after, child: child)
        case .kill(let reason): child.kill(because: reason)
        }
    }

    /// A record sent after `after` has run longer than `timeoutMs`
    /// (PluginCallDeadline): marked late, it counts as one failed call when
    /// the child finishes it (`countFinished`), as an inline call that
    /// overruns does; one the child never finishes is a crash or a hang,
    /// counted as such. The record is the one the progress page says is
    /// running, when the child keeps it (a DONE may wait for the end of a
    /// frame), else the first after `after`.
    private func markLate(after: UInt64, child: PluginChild) {
        var blamed = after
        if child.usesPage, roomkit_wire_load32(&child.progress.pointee.busy_what) == Int32(ROOMKIT_WIRE_BUSY_EVENT.rawValue) {
            blamed = max(after, roomkit_wire_load64(&child.progress.pointee.busy_seq) &- 1)
        }
        lock.withLock {
            // The first not yet counted (finished or not) after `blamed`.
            if let index = journal[countedHead..<written].firstIndex(where: { $0.seq > blamed && !$0.skip }) {
                journal[index].late = true
            }
        }
    }

    // MARK: Shutdown

    /// on_unload: the queued events, then on_unload in the process, then its
    /// exit; SIGKILL after `shutdownTimeoutMs`.
    func shutdown() {
        let (result, child) = lock.withLock { () -> (PluginSupervisorMachine.StopResult, PluginChild?) in
            runtime?.stopChildWatchdog()
            return (machine.stop(), current)
        }
        switch result {
        case .nothing:
            return
        case .killCurrent:
            child?.kill(because: "unloaded while restarting")
            return
        case .unload:
            break
        }
        guard let child else { return lock.withLock { machine.stopped() } }
        flush()
        child.send(WireFrame(UInt8(ROOMKIT_WIRE_UNLOAD.rawValue)).finished)
        if !child.waitForExit(timeout: .milliseconds(spec.supervision.shutdownTimeoutMs)) {
            logger.warning("plugin process did not unload in time; killing it", metadata: ["plugin": "\(spec.name)"])
            child.kill(because: "did not unload within shutdownTimeoutMs")
            _ = child.waitForExit(timeout: .seconds(1))
        }
        lock.withLock { machine.stopped() }
    }

    /// The runtime was quarantined (e.g. URL failures in a row): end the process.
    func stopAfterQuarantine(because reason: String) {
        let (result, child) = lock.withLock { () -> (PluginSupervisorMachine.QuarantineResult, PluginChild?) in
            runtime?.stopChildWatchdog()
            return (machine.quarantine(because: reason), current)
        }
        switch result {
        case .killCurrent: child?.kill(because: "quarantined")
        case .nothing: break
        }
    }

    // MARK: Frames from the process (its reader thread)

    /// A URL or state request is about to be sent: the machine's `requested` input.
    func requestSent() {
        lock.withLock { machine.requested(now: PluginChild.monotonicNow()) }
    }

    /// A DONE, ANSWER, PONG, FAILED or LOADED: the machine's `frame` input.
    func childMadeProgress(_ frame: PluginSupervisorMachine.Frame) {
        lock.withLock { _ = machine.frame(frame, now: PluginChild.monotonicNow()) }
    }


    /// A LOG frame: the plugin's log rate limit, then the bot's log (no C table on the way).
    func log(level: Int32, _ message: String) {
        if let runtime = lock.withLock({ runtime }), let actions = runtime.actions {
            if runtime.mayLog() { actions.pluginLog(spec.name, level: level, message) }
        } else {
            logger.info("\(oneLine(message))", metadata: ["plugin": "\(spec.name)"])
        }
    }

    /// A fire-and-forget CALL failed its arguments (-1): logged, at most a few a second.
    func noteFailedCall(_ function: Int32) {
        let suppressed: Int
        switch failedCallLog.take() {
        case .allowed(let before): suppressed = before
        case .refused: return
        }
        logger.warning("plugin call failed (bad arguments or unknown room)",
                       metadata: ["plugin": "\(spec.name)", "function": "\(function)", "suppressed": "\(suppressed)"])
    }
}

/// Why a plugin process could not be started.
struct PluginProcessError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// Spawns plugin processes from one thread that lives as long as the bot:
/// PR_SET_PDEATHSIG fires when the *thread* that forked the child exits, so
/// spawning from a pool thread that later retires would kill the child.
final class PluginSpawner: @unchecked Sendable {
    // @unchecked Sendable: `jobs` is guarded by `condition`.
    static let shared = PluginSpawner()
    private let condition = NSCondition()
    private var jobs: [() -> Void] = []

    private init() {
        let thread = Thread { [self] in
            while true {
                condition.lock()
                while jobs.isEmpty { condition.wait() }
                let job = jobs.removeFirst()
                condition.unlock()
                job()
            }
        }
        thread.name = "roomkit.plugin-spawner"
        thread.start()
    }

    /// Runs `body` on the spawner thread and returns its result.
    func run(_ body: @escaping () -> pid_t) -> pid_t {
        let done = DispatchSemaphore(value: 0)
        var result: pid_t = -1
        condition.withLock {
            jobs.append {
                result = body()
                done.signal()
            }
            condition.signal()
        }
        done.wait()
        return result
    }
}
