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
        // The progress page: shared with roomkit-plugin-host; a private one
        // (never written by the child) for a command plugin.
        var page: UnsafeMutablePointer<roomkit_wire_progress>?
        let pageFD = roomkit_wire_progress_create(&page)
        guard pageFD >= 0, let page, roomkit_wire_pipe(&out) == 0, roomkit_wire_pipe(&err) == 0 else {
            for fd in pair + out + err + [pageFD] where fd >= 0 { close(fd) }
            throw PluginProcessError("cannot make the progress page or output pipes")
        }
        let sharePage = spec.command == nil
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
        lock.withLock {
            current = child
            generation += 1
            stats.pid = pid
        }
        child.start(stdout: out[0], stderr: err[0])
        return child
    }

    // MARK: Crashes

    /// Called on the child's reader thread once the process is gone.
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

        enum Next { case nothing, restart(Duration), quarantine(String) }
        var next = Next.nothing
        var poisoned: String?
        var context = ""
        lock.lock()
        guard child === current else { return lock.unlock() }
        current = nil
        switch phase {
        case .stopping, .stopped, .starting:
            phase = .stopped
            lock.unlock()
            return
        case .quarantined:
            lock.unlock()
            return
        case .running, .restarting:
            break
        }
        watchdog?.cancel()
        watchdog = nil
        trimLocked(done: child.doneSeq)
        // Without the progress page, the event being handled is the first one
        // sent and not finished (PLUGIN-WIRE.md section 8.1).
        let firstUnfinished = journal[journalHead..<written].first { !$0.skip }?.seq
        let (busyWhat, suspect) = child.usesPage ? (what, busySeq)
            : (firstUnfinished == nil ? Int32(ROOMKIT_WIRE_IDLE.rawValue) : Int32(ROOMKIT_WIRE_BUSY_EVENT.rawValue), firstUnfinished ?? 0)
        switch Int(busyWhat) {
        case Int(ROOMKIT_WIRE_BUSY_EVENT.rawValue):
            if let index = journal[journalHead...].firstIndex(where: { $0.seq == suspect }) {
                let label = journal[index].label
                context = " while handling \(label)"
                poison[suspect, default: 0] += 1
                if poison[suspect]! >= 2 {
                    journal[index].skip = true
                    stats.skipped += 1
                    poisoned = "skipped \(label): it crashed the plugin twice"
                }
            }
        case Int(ROOMKIT_WIRE_BUSY_URL.rawValue): context = " in urlInterrupter"
        case Int(ROOMKIT_WIRE_BUSY_LOAD.rawValue): context = " in on_load"
        case Int(ROOMKIT_WIRE_BUSY_TIMER.rawValue): context = " in a timer"
        default: break
        }
        stats.crashes += 1
        let now = DispatchTime.now().uptimeNanoseconds
        let window = UInt64(limits.crashWindowSeconds) * 1_000_000_000
        crashTimes = crashTimes.filter { now &- $0 < window } + [now]
        if crashTimes.count > limits.maxCrashes {
            phase = .quarantined
            stats.dropped += journal.count - journalHead
            journal.removeAll()
            journalHead = 0
            written = 0
            next = .quarantine("\(crashTimes.count) crashes within \(limits.crashWindowSeconds) s; last: \(reason)\(context)")
        } else {
            phase = .restarting
            written = journalHead  // resend what it had not finished
            let base = Double(limits.restartBackoffMs) * pow(2, Double(crashTimes.count - 1))
            let delay = min(base, 30_000) * Double.random(in: 0.5...1.5)
            next = .restart(.milliseconds(Int64(delay)))
        }
        let target = runtime
        lock.unlock()

        let message = "\(reason)\(context)"
        logger.error("plugin process crashed", metadata: ["plugin": "\(spec.name)", "reason": "\(message)"])
        onStatus(spec.name, .crashed, message)
        if let poisoned {
            logger.error("plugin event skipped", metadata: ["plugin": "\(spec.name)", "reason": "\(poisoned)"])
            onStatus(spec.name, .skipped, poisoned)
        }
        switch next {
        case .nothing: break
        case .quarantine(let why): target?.quarantine(because: why)
        case .restart(let delay):
            DispatchQueue.global().asyncAfter(deadline: .now() + .nanoseconds(Int(delay.components.attoseconds / 1_000_000_000
                                                                                  + delay.components.seconds * 1_000_000_000))) { [self] in
                restart()
            }
        }
    }

    /// Starts a new process, runs on_load with the same config, then resends
    /// the unfinished events. A failure here is another crash (childExited).
    func restart() {
        guard lock.withLock({ phase == .restarting }) else { return }
        let child: PluginChild
        do {
            child = try spawn()
        } catch {
            logger.error("plugin process could not restart", metadata: ["plugin": "\(spec.name)", "error": "\(error)"])
            lock.withLock { phase = .quarantined }
            let target = lock.withLock { runtime }
            target?.quarantine(because: "cannot restart its process: \(error)")
            return
        }
        guard let hello = child.waitForHello(timeout: loadBound), Self.check(hello, against: spec) == nil,
              roomkit_wire_limit(child.pid, UInt(spec.supervision.memoryLimitMB), UInt(spec.supervision.cpuLimitSeconds)) == 0,
              child.load(config: spec.config.jsonString, callTimeout: spec.timeout, timeout: loadBound) == 0 else {
            child.kill(because: child.killReason ?? "restart failed (on_load did not succeed)")
            return
        }
        let restarted = lock.withLock { () -> Bool in
            guard phase == .restarting, current === child else { return false }
            phase = .running
            stats.restarts += 1
            scheduleFlushLocked()
            return true
        }
        guard restarted else {
            child.kill(because: "unloaded while restarting")  // stopped or quarantined meanwhile
            return
        }
        startWatchdog()
        logger.info("plugin process restarted", metadata: ["plugin": "\(spec.name)", "pid": "\(child.pid)"])
        onStatus(spec.name, .restarted, "pid \(child.pid)")
    }

    // MARK: Hangs

    /// Kills the process when a call has run longer than `timeoutMs × hangFactor`
    /// (on_load: the load bound).
    func startWatchdog() {
        let limit = spec.timeout * spec.supervision.hangFactor
        let period = max(limit / 4, .milliseconds(5))
        let timer = DispatchSource.makeTimerSource(queue: .global())
        let periodNs = Int(period.components.seconds * 1_000_000_000 + period.components.attoseconds / 1_000_000_000)
        timer.schedule(deadline: .now() + .nanoseconds(periodNs), repeating: .nanoseconds(periodNs))
        timer.setEventHandler { [weak self] in self?.checkHang(limit: limit) }
        lock.withLock {
            watchdog?.cancel()
            watchdog = timer
        }
        timer.resume()
    }

    private func checkHang(limit: Duration) {
        guard let (child, outstanding) = lock.withLock({ () -> (PluginChild, Bool)? in
            guard phase == .running, let child = current else { return nil }
            trimLocked(done: child.doneSeq)
            return (child, written > journalHead)
        }) else { return }
        let now = PluginChild.monotonicNow()
        let boundNs = UInt64(limit.components.seconds) * 1_000_000_000 + UInt64(limit.components.attoseconds / 1_000_000_000)
        if child.usesPage {
            let what = roomkit_wire_load32(&child.progress.pointee.busy_what)
            let since = roomkit_wire_load64(&child.progress.pointee.busy_since_ns)
            guard what != 0, since != 0 else { return }
            let bound = what == Int32(ROOMKIT_WIRE_BUSY_LOAD.rawValue) ? loadBound : limit
            let elapsed = now &- since
            let ns = UInt64(bound.components.seconds) * 1_000_000_000 + UInt64(bound.components.attoseconds / 1_000_000_000)
            if elapsed > ns, elapsed < UInt64.max / 2 {
                child.kill(because: "hung: a call ran longer than \(bound) (timeoutMs × hangFactor), killed")
            }
            return
        }
        // No page: events outstanding and no DONE (or other progress) for the bound.
        let since = child.progressNs
        guard outstanding, since != 0, now > since, now - since > boundNs else { return }
        child.kill(because: "hung: no progress on its events for \(limit) (timeoutMs × hangFactor), killed")
    }

    // MARK: Shutdown

    /// on_unload: the queued events, then on_unload in the process, then its
    /// exit; SIGKILL after `shutdownTimeoutMs`.
    func shutdown() {
        let child = lock.withLock { () -> PluginChild? in
            watchdog?.cancel()
            watchdog = nil
            let running = phase == .running
            phase = .stopping
            return running ? current : nil
        }
        guard let child else {
            lock.withLock { current?.kill(because: "unloaded while restarting"); phase = .stopped }
            return
        }
        flush()
        child.send(WireFrame(UInt8(ROOMKIT_WIRE_UNLOAD.rawValue)).finished)
        if !child.waitForExit(timeout: .milliseconds(spec.supervision.shutdownTimeoutMs)) {
            logger.warning("plugin process did not unload in time; killing it", metadata: ["plugin": "\(spec.name)"])
            child.kill(because: "did not unload within shutdownTimeoutMs")
            _ = child.waitForExit(timeout: .seconds(1))
        }
        lock.withLock { phase = .stopped }
    }

    /// The runtime was quarantined (e.g. URL failures in a row): end the process.
    func stopAfterQuarantine() {
        let child = lock.withLock { () -> PluginChild? in
            guard phase != .stopped else { return nil }
            phase = .quarantined
            watchdog?.cancel()
            watchdog = nil
            return current
        }
        child?.kill(because: "quarantined")
    }

    // MARK: Host functions from the process (its reader thread)

    func log(level: Int32, _ message: String) {
        if let host = lock.withLock({ host }) {
            message.withCString { host.pointee.log?(host.pointee.context, level, $0) }
        } else {
            logger.info("\(oneLine(message))", metadata: ["plugin": "\(spec.name)"])
        }
    }

    /// Runs one proxied host function through the runtime's own table.
    func perform(_ function: Int32, argument: Int32, _ arguments: [[UInt8]?]) -> (Int32, String?) {
        guard let host = lock.withLock({ host }) else { return (-1, nil) }
        let api = host.pointee
        var strings: [UnsafeMutablePointer<CChar>?] = arguments.map { bytes in
            guard let bytes, let text = String(validating: bytes, as: UTF8.self) else { return nil }
            return strdup(text)
        }
        while strings.count < 4 { strings.append(nil) }
        defer { for pointer in strings { free(pointer) } }
        let a = strings.map { UnsafePointer($0) }
        switch UInt32(function) {
        case ROOMKIT_WIRE_DISPATCH_MAGIX.rawValue:
            return (api.dispatch_magix?(api.context, a[0], a[1], a[2], a[3]) ?? -1, nil)
        case ROOMKIT_WIRE_SET_GLOBAL_STATE.rawValue:
            return (api.set_global_state?(api.context, a[0], a[1]) ?? -1, nil)
        case ROOMKIT_WIRE_INSERT_IMAGE.rawValue:
            return (api.insert_image?(api.context, a[0], a[1]) ?? -1, nil)
        case ROOMKIT_WIRE_PUT_SCENES.rawValue:
            return (api.put_scenes?(api.context, a[0], a[1], a[2], argument) ?? -1, nil)
        case ROOMKIT_WIRE_ROOM_STATE.rawValue:
            guard let text = api.room_state_json?(api.context, a[0]) else { return (-1, nil) }
            defer { api.free_string?(api.context, text) }
            return (0, String(cString: text))
        default:
            return Self.performABI11(function, api, a)
        }
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
