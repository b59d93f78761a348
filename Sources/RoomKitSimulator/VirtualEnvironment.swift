import Foundation
import RoomKit
import RoomKitLoop
import RoomKitProtocol

/// The simulator's `EngineEnvironment`: a virtual clock whose timers fire
/// only when the simulation advances it, and connections to an in-memory
/// `SimulatedServer`. Everything runs on the host's loop thread; nothing
/// waits for real time and nothing touches a socket.
final class VirtualEnvironment: EngineEnvironment, @unchecked Sendable {
    // @unchecked Sendable: used on the simulation loop's thread only; the
    // recorder's observer reads `now` there too.
    /// The virtual monotonic clock, ms since the simulation began.
    private(set) var now: Int64 = 0
    /// The virtual wall clock at `now == 0` (ms since the epoch).
    let epoch: Int64
    let jitterSeed: UInt64?
    unowned let server: SimulatedServer
    private var timers: [VirtualTimer] = []

    init(server: SimulatedServer, seed: UInt64, epoch: Int64) {
        self.server = server
        jitterSeed = seed
        self.epoch = epoch
    }

    var nowMilliseconds: UInt64 { UInt64(now) }
    var wallMilliseconds: Int64 { epoch + now }

    func scheduleRepeating(every interval: Duration, _ body: @escaping () -> Void) throws -> any EngineTimer {
        let timer = VirtualTimer(interval: max(1, interval.milliseconds), next: now + max(1, interval.milliseconds), body: body)
        timers.append(timer)
        return timer
    }

    func connect(to url: WebSocketURL, for host: RoomHost) throws -> any EngineConnection {
        server.connect(host: host)
    }

    func shutdown() {}

    /// When the next live timer fires (nil: none).
    var nextDeadline: Int64? {
        timers.removeAll { $0.cancelled }
        return timers.map(\.next).min()
    }

    /// Moves the clock to `time` without firing anything (nothing is due before it).
    func set(_ time: Int64) {
        precondition(time >= now, "virtual time only moves forward")
        now = time
    }

    /// Fires every timer due at `now`, in the order they were made.
    func fireDue() {
        for timer in timers where !timer.cancelled && timer.next <= now {
            timer.next = now + timer.interval
            timer.body()
        }
    }
}

/// A repeating virtual timer.
final class VirtualTimer: EngineTimer {
    let interval: Int64
    var next: Int64
    let body: () -> Void
    private(set) var cancelled = false

    init(interval: Int64, next: Int64, body: @escaping () -> Void) {
        self.interval = interval
        self.next = next
        self.body = body
    }

    func cancel() { cancelled = true }
}
