import Foundation
import Logging
import RoomKit
import RoomKitLoop
import RoomKitProtocol

/// What the first logins have done so far, room by room (each room counts
/// once, however many attempts it took): the progress line and `/readyz`
/// read it.
public struct JoinProgress: Sendable, Hashable {
    /// The rooms to join.
    public var total = 0
    /// Rooms in (LOGINED).
    public var joined = 0
    /// Rooms given up (a final failure, or failing past the reconnect window).
    public var failed = 0
    /// Rooms whose login failed and that wait for their cause's backoff.
    public var retrying = 0
    public init() {}
}

/// One login's outcome, or a timer of the join pipeline.
enum JoinOutcome: Sendable {
    /// A batch of logins (`loginBatch` rooms at most), each room's outcome (nil: joined).
    case logins([String], [RoomError?])
    case backoffEnded(ErrorCode)
    case refresh
}

extension BotRunner {
    /// How many logins may be outstanding at once at most, whatever the
    /// server advertises: enough to keep one roomd busy (it commits the
    /// logins of a loop turn in one transaction), few enough that a login
    /// never waits in the bot's outbox long enough to time out.
    static let maxLoginsInFlight = 1024

    /// Rooms per `RoomHost.loginRooms` call: one task and one hop to the
    /// loop for this many logins, not one each (a fifth of the bot's CPU at
    /// a million rooms). Small against the window, so a batch waiting for
    /// its slowest login holds few slots back.
    static let loginBatch = 64

    /// Logs in to `rooms` (the first logins), through `JoinSchedule`: at
    /// most `maxLoginsInFlight` (and at most the request burst the server
    /// advertises) outstanding at once, new ones started as answers come
    /// in; a failure that may pass (server not up, timeout, rate limit,
    /// server error) waits for its cause's shared backoff (full jitter,
    /// `backoffFirst` doubling up to `backoffCap`) and is tried again until
    /// it has been failing for the reconnect window; a final one (bad
    /// token, not permitted, ...) is not. Failures are logged aggregated:
    /// one line per cause per `logInterval`, with a count. Each attempt is a
    /// real login: LOGINING, then LOGINED or LOGIN_FAILED. Ends when every
    /// room has an outcome, or early when cancelled.
    func joinAll(_ rooms: [String]) async {
        let configuration = host.configuration
        // Until a hello reply advertises the server's bucket, the window is
        // the configured pacing burst: 1,024 logins queued at 190/s would
        // wait longer than the login timeout.
        let burst = await host.requestBurst() ?? configuration.requestBurst
        var schedule = JoinSchedule(
            rooms: rooms, window: Self.window(burst: burst),
            backoff: ConnectionMachine.Backoff(first: configuration.backoffFirst.milliseconds, cap: configuration.backoffCap.milliseconds),
            giveUpAfter: configuration.reconnectWindow.milliseconds)
        let aggregator = LogAggregator(logger: logger)
        let clock = ContinuousClock()
        let start = clock.now
        var lastFlush = start
        func now() -> Int64 { (clock.now - start).milliseconds }
        publish(schedule)
        await withTaskGroup(of: JoinOutcome.self) { group in
            group.addTask { await Self.refresh() }
            fill(&schedule, group: &group)
            while !schedule.isFinished, let outcome = await group.next() {
                if Task.isCancelled || isStopping { break }
                switch outcome {
                case .logins(let rooms, let errors):
                    for (room, error) in zip(rooms, errors) {
                        if let error {
                            failed(room, error, schedule: &schedule, group: &group, aggregator: aggregator, now: now())
                        } else {
                            schedule.succeeded(room)
                        }
                    }
                case .backoffEnded(let cause):
                    schedule.backoffEnded(cause)
                case .refresh:
                    if let burst = await host.requestBurst() {
                        schedule.setWindow(Self.window(burst: burst))
                    }
                    if clock.now - lastFlush >= config.logInterval {
                        lastFlush = clock.now
                        aggregator.flush()
                    }
                    group.addTask { await Self.refresh() }
                }
                fill(&schedule, group: &group)
                publish(schedule)
            }
            group.cancelAll()
        }
        aggregator.flush()
        publish(schedule)
    }

    /// How many logins may be outstanding when the host paces to `burst`.
    static func window(burst: Double) -> Int {
        min(maxLoginsInFlight, max(1, Int(burst)))
    }

    private static func refresh() async -> JoinOutcome {
        try? await Task.sleep(for: .milliseconds(250))
        return .refresh
    }

    /// Starts logins while the window has room, `loginBatch` per task.
    private func fill(_ schedule: inout JoinSchedule, group: inout TaskGroup<JoinOutcome>) {
        var batch: [String] = []
        func start() {
            let rooms = batch
            batch = []
            group.addTask { [self] in
                .logins(rooms, await host.loginRooms(rooms, user: config.user, tokenProvider: tokens))
            }
        }
        while let room = schedule.nextRoom() {
            batch.append(room)
            if batch.count == Self.loginBatch { start() }
        }
        if !batch.isEmpty { start() }
    }

    private func failed(_ room: String, _ error: RoomError?, schedule: inout JoinSchedule, group: inout TaskGroup<JoinOutcome>,
                        aggregator: LogAggregator, now: Int64) {
        let code = error?.code ?? .internalError
        // Aggregated by what failed, not by room: the room's own name leaves the cause.
        let why = error.map { $0.description.replacingOccurrences(of: room, with: "<room>") } ?? "unknown error"
        switch schedule.failed(room, code: code, transient: error.map { Self.isTransient($0.code) } ?? false,
                               now: now, random: Double.random(in: 0..<1)) {
        case .startBackoff(let cause, let delay):
            group.addTask {
                try? await Task.sleep(for: .milliseconds(delay))
                return .backoffEnded(cause)
            }
            aggregator.note(.warning, "logins failed; retrying after a shared backoff", cause: why, room: room)
        case .joinedBackoff:
            aggregator.note(.warning, "logins failed; retrying after a shared backoff", cause: why, room: room)
        case .gaveUp:
            aggregator.note(.error, "logins failed; the reconnect window has passed, not retrying", cause: why, room: room)
            forgetFailed(room)
        case .final:
            aggregator.note(.warning, "logins failed", cause: why, room: room)
            forgetFailed(room)
        }
    }

    private func publish(_ schedule: JoinSchedule) {
        joinProgress.withLock {
            $0 = JoinProgress()
            $0.total = schedule.total
            $0.joined = schedule.joined
            $0.failed = schedule.failed
            $0.retrying = schedule.waiting
        }
    }

    /// Whether a failed login may succeed if tried again later: no answer in
    /// time (server down or unreachable: 1002053), a lost connection
    /// (1002051), the server's rate limit (1009004) or internal error (1009500).
    static func isTransient(_ code: ErrorCode) -> Bool {
        code == .timedOut || code == .connectionInterrupted || code == .rateLimited || code == .internalError
    }

    /// An operator joined or left `room` through the control API: the room
    /// set follows, and so does readiness (a configured room left this way
    /// is not waited for until it is joined again, or the bot restarts).
    func operatorChose(_ room: String, joined: Bool) {
        remember(room, joined: joined)
        leftByOperator.withLock { left in
            if joined {
                _ = left.remove(room)
            } else {
                _ = left.insert(room)
            }
        }
    }

    /// A remembered room whose login failed for good is no room the bot is in.
    private func forgetFailed(_ room: String) {
        guard !isStopping else { return }
        remember(room, joined: false)
    }

    /// The rooms the bot should be in (`targetRooms`, less the configured
    /// rooms an operator left through the control API) that are not
    /// `LOGINED` or `RECONNECTED`, with their reason and code (`/readyz`).
    public var roomsNotReady: [(room: String, reason: RoomReason, errorCode: ErrorCode)] {
        let left = leftByOperator.withLock { $0 }
        return targetRooms.compactMap { id in
            if left.contains(id) { return nil }
            let content = host.room(id)?.content
            let reason = content?.reason ?? .logout
            if reason == .logined || reason == .reconnected { return nil }
            return (id, reason, content?.errorCode ?? .success)
        }
    }
}
