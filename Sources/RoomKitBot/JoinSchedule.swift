import RoomKit
import RoomKitProtocol

/// The plan of roombot's first logins, as a value with no I/O: which room
/// to try next, how many may be outstanding at once, and when the rooms
/// whose login failed may try again. Times are ms on a monotonic clock;
/// randomness (the backoff's jitter) is injected.
///
/// Why a plan and not one task per room: with 300,000 rooms, one task per
/// room put every login in the engine's outbox at once. The login timeout
/// ran while a request waited its turn behind the others, so the last ones
/// timed out, each retried on its own, and the retries joined the queue:
/// congestion collapse (issue #26). Here at most `window` logins are
/// outstanding, so none waits long enough to time out, and the rooms that
/// fail the same way (the same error code) share one backoff: one timer,
/// whose delay grows with each round that fails and starts over at the
/// first success.
struct JoinSchedule: Sendable {
    /// What `failed(_:code:transient:now:random:)` asks the driver to do.
    enum FailedAction: Sendable, Hashable {
        /// The first room to fail with `cause` since its last backoff: arm
        /// one timer for `delay` ms, then call `backoffEnded(cause)`.
        case startBackoff(cause: ErrorCode, delay: Int64)
        /// The room waits for the backoff already running for its cause.
        case joinedBackoff
        /// The room has been failing for longer than the reconnect window: given up.
        case gaveUp
        /// A failure that cannot pass (bad token, not permitted, ...): given up.
        case final
    }

    /// One cause's shared backoff.
    private struct Backoff: Sendable {
        /// Rounds that failed since the last success (the delay's exponent).
        var attempt = 0
        /// Whether a timer runs for this cause; its rooms are in `waiting`.
        var running = false
        var waiting: [String] = []
    }

    /// Every room to join, in order; `next` is the first not yet tried.
    private let rooms: [String]
    private var next = 0
    /// Rooms whose backoff ended, tried before new ones (oldest first).
    private var ready: [String] = []
    private var readyHead = 0
    /// When each room that failed at least once first failed (rooms that
    /// never failed cost nothing here).
    private var firstFailure: [String: Int64] = [:]
    private var backoffs: [ErrorCode: Backoff] = [:]
    private let backoff: ConnectionMachine.Backoff
    /// How long a room may keep failing before it is given up (ms).
    private let giveUpAfter: Int64
    /// How many logins may be outstanding at once.
    private(set) var window: Int
    private(set) var inFlight = 0
    /// Rooms in (`joined`) and given up (`failed`): each room counts once.
    private(set) var joined = 0
    private(set) var failed = 0

    init(rooms: [String], window: Int, backoff: ConnectionMachine.Backoff, giveUpAfter: Int64) {
        self.rooms = rooms
        self.window = max(1, window)
        self.backoff = backoff
        self.giveUpAfter = giveUpAfter
    }

    /// The rooms to join.
    var total: Int { rooms.count }

    /// Every room has an outcome: none outstanding, none waiting, none left.
    var isFinished: Bool {
        inFlight == 0 && next == rooms.count && readyHead == ready.count && backoffs.values.allSatisfy { $0.waiting.isEmpty }
    }

    /// Rooms that failed and wait for their cause's backoff.
    var waiting: Int { backoffs.values.reduce(0) { $0 + $1.waiting.count } }

    /// The window follows what the server advertises (the engine's pacing burst).
    mutating func setWindow(_ window: Int) {
        self.window = max(1, window)
    }

    /// The next room to log in to, counted as outstanding; nil when the
    /// window is full or no room is ready.
    mutating func nextRoom() -> String? {
        guard inFlight < window else { return nil }
        let room: String
        if readyHead < ready.count {
            room = ready[readyHead]
            readyHead += 1
            if readyHead == ready.count {
                ready.removeAll(keepingCapacity: false)
                readyHead = 0
            }
        } else if next < rooms.count {
            room = rooms[next]
            next += 1
        } else {
            return nil
        }
        inFlight += 1
        return room
    }

    /// `room` is in. The server answers again: every backoff starts over.
    mutating func succeeded(_ room: String) {
        inFlight -= 1
        joined += 1
        if !firstFailure.isEmpty { firstFailure.removeValue(forKey: room) }
        for cause in Array(backoffs.keys) { backoffs[cause]?.attempt = 0 }
    }

    /// `room`'s login failed with `code`; `transient`: it may pass if tried later.
    mutating func failed(_ room: String, code: ErrorCode, transient: Bool, now: Int64, random: Double) -> FailedAction {
        inFlight -= 1
        guard transient else {
            return giveUp(room, .final)
        }
        let first = firstFailure[room] ?? now
        guard now - first < giveUpAfter else {
            return giveUp(room, .gaveUp)
        }
        firstFailure[room] = first
        var shared = backoffs[code] ?? Backoff()
        shared.waiting.append(room)
        defer { backoffs[code] = shared }
        guard !shared.running else { return .joinedBackoff }
        shared.running = true
        let delay = backoff.delay(attempt: shared.attempt, random: random)
        shared.attempt += 1
        return .startBackoff(cause: code, delay: delay)
    }

    /// `cause`'s backoff timer fired: its rooms are tried again (before new ones).
    mutating func backoffEnded(_ cause: ErrorCode) {
        guard var shared = backoffs[cause] else { return }
        ready.append(contentsOf: shared.waiting)
        shared.waiting = []
        shared.running = false
        backoffs[cause] = shared
    }

    private mutating func giveUp(_ room: String, _ action: FailedAction) -> FailedAction {
        failed += 1
        firstFailure.removeValue(forKey: room)
        return action
    }
}
