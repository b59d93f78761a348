import RoomKitLoop
import Dispatch
import Synchronization

/// The lateness rule of a plugin call, one for both kinds of endpoint: a
/// call that has been the head of its plugin's work (running, or first in
/// line, since its predecessor finished) for longer than a bound is late.
/// With `timeoutMs` as the bound a late call is one failed call
/// (`failure`): the runtime's watchdog judges an inline call
/// (`OutstandingCalls.expire`), the supervisor's tick a process plugin's
/// record (`PluginSupervisorMachine.tick`, from the records sent and the
/// child's DONE). With `timeoutMs × hangFactor` a process plugin's child is
/// hung and killed (an inline call cannot be killed).
enum PluginCallDeadline {
    /// Whether a call at the head since `since` (ns) has used up `bound` (ns) at `now`.
    static func isLate(since: UInt64, now: UInt64, bound: UInt64) -> Bool {
        since != 0 && now >= since && now - since >= bound
    }

    /// The failure a late call counts as, in words.
    static func failure(_ timeout: Duration) -> String { "a call took longer than \(timeout)" }
}

/// The posted calls of one plugin that have not finished, oldest first. A
/// plugin's queue is serial, so posted calls finish in the order they were
/// posted and only the oldest one (the head) can be running. Each call gets
/// `timeoutMs` from the moment it became the head (posted to an empty queue,
/// or its predecessor finished or timed out): time spent queued behind other
/// calls does not count against it, so a burst of events never fails a
/// healthy plugin, while a stuck call still fails every call behind it, one
/// timeout apart, until the plugin is quarantined.
struct OutstandingCalls {
    /// The calls posted so far are numbered 1 … `lastPosted`, in post
    /// order; `head` is the oldest one not finished or timed out (a serial
    /// queue finishes them in that order, so a range says it all: no list).
    private var head: UInt64 = 1
    private var lastPosted: UInt64 = 0
    /// Uptime (ns) at which the head call became the head.
    private var headSince: UInt64 = 0
    /// Whether a watchdog check is scheduled.
    private var armed = false

    /// Calls posted and not yet finished (or timed out): the queue's depth.
    var depth: Int { Int(lastPosted &+ 1 &- head) }

    /// Adds a call posted at `now` (uptime ns). Returns its sequence number
    /// and whether the caller must schedule a watchdog check (none pending).
    mutating func add(now: UInt64) -> (sequence: UInt64, arm: Bool) {
        add(count: 1, now: now)
    }

    /// Adds `count` calls posted together at `now`; returns the first one's
    /// sequence number (the others follow it) and whether to arm.
    mutating func add(count: Int, now: UInt64) -> (sequence: UInt64, arm: Bool) {
        if depth == 0 { headSince = now }
        let first = lastPosted &+ 1
        lastPosted &+= UInt64(count)
        defer { armed = true }
        return (first, !armed)
    }

    /// Marks call `sequence` finished at `now`; false when the watchdog had
    /// already timed it out (the head had moved past it).
    mutating func finish(_ sequence: UInt64, now: UInt64) -> Bool {
        guard depth > 0, sequence == head else { return false }
        head &+= 1
        headSince = now
        return true
    }

    /// Times out every head call whose budget has run out by `now`; returns
    /// how many, and when the next check is due (nil: nothing left, disarmed).
    mutating func expire(now: UInt64, timeout: UInt64) -> (overdue: Int, next: UInt64?) {
        var overdue = 0
        while depth > 0, PluginCallDeadline.isLate(since: headSince, now: now, bound: timeout) {
            head &+= 1
            headSince &+= timeout
            overdue += 1
        }
        guard depth > 0 else {
            armed = false
            return (overdue, nil)
        }
        return (overdue, headSince &+ timeout)
    }
}

/// One `on_room_event` (or `on_player_event`) call on its own (a held event, a call posted while
/// the loop shuts down, tests): its own NUL-terminated payload.
struct PluginRoomEvent: Sendable {
    let kind: Int32
    let room: String
    /// The payload's UTF-8 JSON text, NUL-terminated (handed to C as is).
    let payload: ArraySlice<UInt8>
    /// `.roomEvent` (on_room_event) or `.playerEvent` (on_player_event).
    var hook: PluginHookKind = .roomEvent

    init(kind: Int32, room: String, payload: ArraySlice<UInt8>, hook: PluginHookKind = .roomEvent) {
        self.kind = kind
        self.room = room
        self.payload = payload
        self.hook = hook
    }

    init(kind: Int32, room: String, payload: [UInt8]) {
        self.init(kind: kind, room: room, payload: payload[...])
    }

    init(kind: Int32, room: String, payload: String) {
        self.init(kind: kind, room: room, payload: Array(payload.utf8) + [0])
    }

    /// The payload text without its NUL (tests, hand-off).
    var payloadText: String { String(decoding: payload.dropLast(), as: UTF8.self) }
}

/// A batch of `on_room_event` and `on_player_event` calls for one plugin,
/// in the order raised: usually a loop turn's,
/// whose payload texts sit back to back in one buffer (each NUL-terminated)
/// that every plugin's batch of the turn shares; each call names its room,
/// kind and range there. Nothing is built per call when the turn is posted
/// (the calls are the array dispatch filled), and the plugin's thread takes
/// the buffer's address once per batch.
struct PluginRoomEvents: Sendable {
    let payloads: [UInt8]
    /// The calls' rooms (`TurnCall.room` is a place here).
    let rooms: [String]
    let calls: [TurnCall]
    /// The loop turn they came in, when batched (the dispatch latency's
    /// "last plugin done"; each call's `index` is its number there).
    let turn: TurnDone?

    init(payloads: [UInt8], rooms: [String], calls: [TurnCall], turn: TurnDone?) {
        self.payloads = payloads
        self.rooms = rooms
        self.calls = calls
        self.turn = turn
    }

    /// Single events, copied into one buffer of their own (not a turn's).
    init(_ events: [PluginRoomEvent]) {
        var payloads: [UInt8] = []
        var calls: [TurnCall] = []
        calls.reserveCapacity(events.count)
        for (offset, event) in events.enumerated() {
            let start = payloads.count
            payloads.append(contentsOf: event.payload)
            calls.append(TurnCall(kind: event.kind, room: Int32(offset), payload: start..<payloads.count, index: Int32(offset),
                                  hook: event.hook))
        }
        self.init(payloads: payloads, rooms: events.map(\.room), calls: calls, turn: nil)
    }

    var count: Int { calls.count }
    var isEmpty: Bool { calls.isEmpty }

    /// Call `offset`'s payload text, NUL-terminated.
    func payload(_ offset: Int) -> ArraySlice<UInt8> { payloads[calls[offset].payload] }
}

/// Work posted to a plugin and not yet taken by its queue, in post order,
/// each with the sequence number of its first watched call. Its own lock
/// (not the watchdog's), so the loop posting a batch and the plugin's thread
/// finishing calls rarely wait for each other.
struct PendingWork {
    var work: [(first: UInt64, since: UInt64, work: PluginWork)] = []
    /// Whether a drain of `work` is queued or running on the plugin's queue.
    var draining = false
}

/// What a plugin's queue runs, in post order (`PluginRuntime.enqueue`).
enum PluginWork: Sendable {
    /// Watched calls to `hook`, each counted on its own.
    case calls(PluginHookKind, [@Sendable () -> Void])
    /// One watched call to `hook` (`.calls` without an array per call).
    case call(PluginHookKind, @Sendable () -> Void)
    /// Watched `on_room_event` calls, each counted on its own.
    case roomEvents(PluginRoomEvents)
    /// Not a hook call (on_load, the URL chain, state hand-off): neither
    /// watched nor counted here; `callAndWait` times it.
    case unwatched(@Sendable () -> Void)
}

extension PluginRuntime {
    /// Fire-and-forget calls, run in order on the plugin's queue in one hop
    /// (one wake-up of its thread for the whole batch). Each call is watched
    /// and counted on its own, exactly as if posted alone.
    func post(hook: PluginHookKind, batch bodies: [@Sendable () -> Void]) {
        guard isActive, !bodies.isEmpty else { return }
        enqueue(.calls(hook, bodies), watched: watchesCalls ? bodies.count : 0)
    }

    /// Whether the watchdog times each posted call as it runs on the queue
    /// (inline). A process plugin's calls only hand records to its child
    /// there; the child is timed by its progress (`startChildWatchdog`) and
    /// each call counts when the child reports it finished or failed.
    var watchesCalls: Bool {
        switch endpoint {
        case .inline: return true
        case .process: return false
        }
    }

    /// A loop turn's room events for this plugin, run in order like
    /// `post(batch:)`, without a closure per call. `since` (uptime ns): the
    /// loop turn that raised them began (0: now), for the dispatch latency.
    func post(roomEvents events: PluginRoomEvents, since: UInt64 = 0) {
        guard isActive, !events.isEmpty else { return }
        enqueue(.roomEvents(events), watched: watchesCalls ? events.count : 0, since: since)
    }

    /// Single room events (held ones, or posted outside a loop turn), as one batch.
    func post(roomEvents events: [PluginRoomEvent]) {
        guard isActive, !events.isEmpty else { return }
        post(roomEvents: PluginRoomEvents(events))
    }

    /// Appends `work` to the plugin's list and wakes its queue only when no
    /// drain is queued or running: under load the plugin's thread runs batch
    /// after batch without a hop (and a thread wake-up) per batch. Everything
    /// runs in post order; `callAndWait` goes through here too, so it keeps
    /// its place among posted calls.
    func enqueue(_ work: PluginWork, watched count: Int, since: UInt64 = 0) {
        var first: UInt64 = 0
        var raised = since
        if count > 0 {
            let posted = DispatchTime.now().uptimeNanoseconds
            if raised == 0 { raised = posted }
            let arm: Bool
            (first, arm) = outstanding.withLock { $0.add(count: count, now: posted) }
            if arm { armWatchdog(at: posted) }
        }
        let wake = pending.withLock { pending -> Bool in
            pending.work.append((first, raised, work))
            defer { pending.draining = true }
            return !pending.draining
        }
        if wake { queue.async { [self] in drain() } }
    }

    /// Whether nothing posted to the plugin waits or runs on its queue.
    var isIdleOnItsQueue: Bool { pending.withLock { $0.work.isEmpty && !$0.draining } }

    /// Runs posted work until none is left (on the plugin's queue).
    private func drain() {
        while true {
            let taken = pending.withLock { pending -> [(first: UInt64, since: UInt64, work: PluginWork)] in
                let taken = pending.work
                pending.work = []
                if taken.isEmpty { pending.draining = false }
                return taken
            }
            if taken.isEmpty { return }
            for (first, since, work) in taken { run(work, first: first, since: since) }
        }
    }

    private func run(_ work: PluginWork, first: UInt64, since: UInt64) {
        var last = DispatchTime.now().uptimeNanoseconds
        switch work {
        case .unwatched(let body):
            body()
        case .call(_, let body) where first == 0:
            body()
        case .call(let hook, let body):
            body()
            _ = finished(first, started: last, hook: hook)
        case .calls(_, let bodies) where first == 0:
            for body in bodies { body() }
        case .calls(let hook, let bodies):
            for (offset, body) in bodies.enumerated() {
                body()
                last = finished(first &+ UInt64(offset), started: last, hook: hook)
            }
        case .roomEvents(let events):
            switch endpoint {
            case .inline(let inline): run(events, on: inline, first: first, since: since, last: last)
            case .process(let process):
                process.deliver(events, since: since)
                // As `TurnDone` says: a process plugin's call ends when its
                // events are handed to the process; its room's calls are
                // counted at the child's DONE (FAILED, a crash: where they arrive).
                events.turn?.finished(events, at: DispatchTime.now().uptimeNanoseconds)
            }
        }
    }

    /// Runs a batch of on_room_event and on_player_event calls in this
    /// thread, each timed (room events are also counted per room and in the
    /// dispatch latency, as before player events took this route).
    private func run(_ events: PluginRoomEvents, on inline: InlinePluginEndpoint, first: UInt64, since: UInt64, last start: UInt64) {
        var last = start
        // Each call is finished (watchdog) and timed on its own; the
        // batch's successes are counted together at its end.
        var tally = SuccessTally()
        // The rooms' calls, counted under one lock at the end (no lock or
        // hashing per call: consecutive calls in one room are one run).
        var runs = PluginRoomTally.Runs()
        var done: [(index: Int32, at: UInt64)] = []
        if events.turn != nil { done.reserveCapacity(events.count) }
        events.payloads.withUnsafeBufferPointer { payloads in
            payloads.withMemoryRebound(to: CChar.self) { payloads in
                // The calls and rooms in place: no copy (and no retain of a room) per call.
                events.calls.withUnsafeBufferPointer { calls in
                    events.rooms.withUnsafeBufferPointer { rooms in
                        for offset in calls.indices {
                            let room = rooms[Int(calls[offset].room)]
                            let isRoomEvent = calls[offset].hook == .roomEvent
                            let payload = payloads.baseAddress.map { $0 + calls[offset].payload.lowerBound }
                            room.withCString { room in
                                if isRoomEvent {
                                    inline.roomEvent(kind: calls[offset].kind, room: room, payload: payload)
                                } else {
                                    inline.playerEvent(kind: calls[offset].kind, room: room, payload: payload)
                                }
                            }
                            let now = DispatchTime.now().uptimeNanoseconds
                            if outstanding.withLock({ $0.finish(first &+ UInt64(offset), now: now) }) {
                                recordSuccess(nanoseconds: now &- last, hook: calls[offset].hook, into: &tally)
                                if isRoomEvent { runs.add(room) }
                            } else if isRoomEvent {
                                roomCalls.count(room, .roomEvent, failure: PluginCallDeadline.failure(spec.timeout))
                            }
                            if isRoomEvent {
                                metrics.recordDispatch(nanoseconds: now &- since)
                                if events.turn != nil { done.append((calls[offset].index, now)) }
                            }
                            last = now
                        }
                    }
                }
            }
        }
        flush(&tally)
        roomCalls.count(runs, .roomEvent)
        events.turn?.finished(done)
    }

    /// Marks watched call `sequence` finished now: a success unless the
    /// watchdog already counted it as overrun. One clock read per call: it
    /// ends this call and starts the next. Returns now.
    private func finished(_ sequence: UInt64, started: UInt64, hook: PluginHookKind) -> UInt64 {
        let now = DispatchTime.now().uptimeNanoseconds
        if outstanding.withLock({ $0.finish(sequence, now: now) }) {
            record(failure: nil, nanoseconds: now &- started, hook: hook)
        }
        return now
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

    /// Counts every inline call that has now overrun its deadline as a
    /// failure, then re-arms for the oldest call still outstanding.
    private func checkWatchdog() {
        let timeout = timeoutNanoseconds
        let now = DispatchTime.now().uptimeNanoseconds
        let (overdue, next) = outstanding.withLock { $0.expire(now: now, timeout: timeout) }
        let started = DispatchTime(uptimeNanoseconds: now &- timeout)
        for _ in 0..<overdue {
            record(failure: PluginCallDeadline.failure(spec.timeout), started: started, hook: nil)
        }
        if let next {
            DispatchQueue.global().asyncAfter(deadline: DispatchTime(uptimeNanoseconds: max(next, now &+ 1_000_000))) { [self] in
                checkWatchdog()
            }
        }
    }
}

extension PluginRuntime {
    /// Starts the watchdog's look at a running child, every quarter of
    /// `timeoutMs` (at least 5 ms): its supervisor's `tick`
    /// (`PluginProcess.checkHang`) counts a late record as a failure and
    /// kills a hung child. A new start (a restarted child) replaces the previous look.
    func startChildWatchdog() {
        guard let process else { return }
        let period = PluginSupervisorMachine.nanoseconds(max(spec.timeout / 4, .milliseconds(5)))
        let generation = watchdogGeneration.add(1, ordering: .relaxed).newValue
        @Sendable func check() {
            guard watchdogGeneration.load(ordering: .relaxed) == generation else { return }
            process.expireRequests()
            process.checkHang()
            DispatchQueue.global().asyncAfter(deadline: .now() + .nanoseconds(Int(period))) { check() }
        }
        DispatchQueue.global().asyncAfter(deadline: .now() + .nanoseconds(Int(period))) { check() }
    }

    /// Stops the look at the child (it exited, or the plugin stopped).
    func stopChildWatchdog() {
        watchdogGeneration.add(1, ordering: .relaxed)
    }
}
