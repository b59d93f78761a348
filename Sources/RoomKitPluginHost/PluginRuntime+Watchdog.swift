import RoomKitLoop
import Dispatch
import Synchronization

/// The posted calls of one plugin that have not finished, oldest first. A
/// plugin's queue is serial, so posted calls finish in the order they were
/// posted and only the oldest one (the head) can be running. Each call gets
/// `timeoutMs` from the moment it became the head (posted to an empty queue,
/// or its predecessor finished or timed out): time spent queued behind other
/// calls does not count against it, so a burst of events never fails a
/// healthy plugin, while a stuck call still fails every call behind it, one
/// timeout apart, until the plugin is quarantined.
struct OutstandingCalls {
    private var posted: [UInt64] = []
    private var head = 0
    private var nextSequence: UInt64 = 0
    /// Uptime (ns) at which the head call became the head.
    private var headSince: UInt64 = 0
    /// Whether a watchdog check is scheduled.
    private var armed = false

    /// Adds a call posted at `now` (uptime ns). Returns its sequence number
    /// and whether the caller must schedule a watchdog check (none pending).
    mutating func add(now: UInt64) -> (sequence: UInt64, arm: Bool) {
        nextSequence &+= 1
        if head == posted.count { headSince = now }
        posted.append(nextSequence)
        defer { armed = true }
        return (nextSequence, !armed)
    }

    /// Marks call `sequence` finished at `now`; false when the watchdog had
    /// already timed it out (it was no longer in the list).
    mutating func finish(_ sequence: UInt64, now: UInt64) -> Bool {
        guard head < posted.count, posted[head] == sequence else { return false }
        head += 1
        headSince = now
        compact()
        return true
    }

    /// Times out every head call whose budget has run out by `now`; returns
    /// how many, and when the next check is due (nil: nothing left, disarmed).
    mutating func expire(now: UInt64, timeout: UInt64) -> (overdue: Int, next: UInt64?) {
        var overdue = 0
        while head < posted.count, headSince &+ timeout <= now {
            head += 1
            headSince &+= timeout
            overdue += 1
        }
        compact()
        guard head < posted.count else {
            armed = false
            return (overdue, nil)
        }
        return (overdue, headSince &+ timeout)
    }

    private mutating func compact() {
        if head == posted.count {
            posted.removeAll(keepingCapacity: true)
            head = 0
        } else if head > 1024 && head * 2 > posted.count {
            posted.removeFirst(head)
            head = 0
        }
    }
}

extension PluginRuntime {
    /// Fire-and-forget calls, run in order on the plugin's queue in one hop
    /// (one wake-up of its thread for the whole batch). Each call is watched
    /// and counted on its own, exactly as if posted alone.
    func post(batch bodies: [@Sendable () -> Void]) {
        guard isActive, !bodies.isEmpty else { return }
        let posted = DispatchTime.now().uptimeNanoseconds
        let (first, arm) = outstanding.withLock { calls -> (UInt64, Bool) in
            let (first, arm) = calls.add(now: posted)
            for _ in 1..<bodies.count { _ = calls.add(now: posted) }
            return (first, arm)
        }
        if arm { armWatchdog(at: posted) }
        queue.async { [self] in
            for (offset, body) in bodies.enumerated() {
                let started = DispatchTime.now()
                body()
                // Not a success if the watchdog already counted it as overrun.
                if outstanding.withLock({ $0.finish(first &+ UInt64(offset), now: DispatchTime.now().uptimeNanoseconds) }) {
                    record(failure: nil, started: started)
                }
            }
        }
    }

    private var timeoutNanoseconds: UInt64 {
        let limit = spec.timeout.components
        return UInt64(max(0, limit.seconds)) * 1_000_000_000 + UInt64(max(0, limit.attoseconds)) / 1_000_000_000
    }

    /// Schedules one watchdog check, for a call that became the head at `at`.
    func armWatchdog(at: UInt64) {
        DispatchQueue.global().asyncAfter(deadline: DispatchTime(uptimeNanoseconds: at &+ timeoutNanoseconds)) { [self] in
            checkWatchdog()
        }
    }

    /// Counts every call that has now overrun its deadline as a failure, then
    /// re-arms for the oldest call still outstanding.
    private func checkWatchdog() {
        let timeout = timeoutNanoseconds
        let now = DispatchTime.now().uptimeNanoseconds
        let (overdue, next) = outstanding.withLock { $0.expire(now: now, timeout: timeout) }
        let started = DispatchTime(uptimeNanoseconds: now &- timeout)
        for _ in 0..<overdue {
            record(failure: "a call took longer than \(spec.timeout)", started: started)
        }
        if let next {
            DispatchQueue.global().asyncAfter(deadline: DispatchTime(uptimeNanoseconds: max(next, now &+ 1_000_000))) { [self] in
                checkWatchdog()
            }
        }
    }
}
