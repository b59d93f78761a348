import RoomKitLoop

/// The one shared connection to a server, as a value with no I/O: when to
/// connect, when to say hello and ping, when the connection counts as dead
/// (silence), and how long to back off before the next attempt (full jitter).
///
/// Times are ms on a monotonic clock. Randomness is injected so tests are
/// deterministic.
public struct ConnectionMachine: Sendable, Hashable {
    public enum State: Sendable, Hashable {
        /// No connection and none wanted.
        case idle
        /// Connecting (TCP, TLS, upgrade).
        case connecting
        /// Connected; `hello` sent at `since`, waiting for its reply.
        case greeting(since: Int64)
        /// Ready: rooms may send requests. The liveness clock: the last
        /// message from the server and the last ping sent.
        case ready(lastMessageAt: Int64, lastPingAt: Int64)
        /// Waiting until `until` before the next attempt.
        case backingOff(until: Int64)
    }

    // Each input has its own method and its own small result, in the shape
    // of Hummingbird's connection state machines: a caller switches over
    // exactly what that input can lead to, with no catch-all.

    /// What `wanted()` asks for.
    public enum WantedAction: Sendable, Hashable {
        case connect
        case none
    }

    /// What ends a connection: `abort` drops the transport without ceremony
    /// (silent or unwanted); `lost` tells the rooms a ready connection is gone.
    public struct Drop: Sendable, Hashable {
        public var abort: Bool
        /// Why, for logs and `fireDisconnectWithError`.
        public var why: String
        /// Whether the connection was ready, so the rooms must react.
        public var lost: Bool

        public init(abort: Bool, why: String, lost: Bool) {
            self.abort = abort
            self.why = why
            self.lost = lost
        }
    }

    /// What `unwanted()` and `closed(_:)` ask for.
    public enum DropAction: Sendable, Hashable {
        case drop(Drop)
        case none
    }

    /// What `opened(now:)` asks for.
    public enum OpenedAction: Sendable, Hashable {
        case sendHello
        case none
    }

    /// What `helloAnswered(...)` asks for.
    public enum HelloAction: Sendable, Hashable {
        /// The connection became ready: flush, and tell the rooms.
        case becameReady
        case none
    }

    /// What `tick(now:random:)` asks for.
    public enum TickAction: Sendable, Hashable {
        case connect
        case sendPing
        /// Silent too long (or no hello reply): drop it.
        case drop(Drop)
        case none
    }

    /// The reconnect backoff (RoomKitLoop's `Backoff`, shared with `RedisClient`).
    public typealias Backoff = RoomKitLoop.Backoff

    public private(set) var state: State = .idle
    /// Whether some room needs the connection.
    public private(set) var isWanted = false
    /// Failed attempts since the connection was last ready.
    public private(set) var attempt = 0
    /// Ping interval and silence limit in force (from hello, possibly tightened).
    public private(set) var pingInterval: Int64 = 10_000
    public private(set) var deadAfter: Int64 = 25_000
    public let backoff: Backoff
    /// An override of the silence limit (nil: derived from hello).
    public let livenessOverride: Int64?

    public init(backoff: Backoff = Backoff(), livenessOverride: Int64? = nil) {
        self.backoff = backoff
        self.livenessOverride = livenessOverride
    }

    public var isReady: Bool {
        if case .ready = state { return true }
        return false
    }

    /// Some room needs the connection.
    public mutating func wanted() -> WantedAction {
        isWanted = true
        switch state {
        case .idle:
            state = .connecting
            return .connect
        case .connecting, .greeting, .ready, .backingOff:
            return .none
        }
    }

    /// No room needs the connection any more.
    public mutating func unwanted() -> DropAction {
        isWanted = false
        switch state {
        case .idle:
            return .none
        case .ready:
            state = .idle
            return .drop(Drop(abort: true, why: "no room needs the connection", lost: true))
        case .connecting, .greeting, .backingOff:
            state = .idle
            return .drop(Drop(abort: true, why: "no room needs the connection", lost: false))
        }
    }

    /// The transport connected (upgrade done).
    public mutating func opened(now: Int64) -> OpenedAction {
        switch state {
        case .connecting:
            state = .greeting(since: now)
            return .sendHello
        case .idle, .greeting, .ready, .backingOff:
            return .none
        }
    }

    /// The hello reply: ping interval and the server's heartbeat timeout (ms).
    public mutating func helloAnswered(interval: Int64, timeout: Int64, now: Int64) -> HelloAction {
        switch state {
        case .greeting:
            state = .ready(lastMessageAt: now, lastPingAt: now)
            attempt = 0
            pingInterval = max(interval, 10)
            // Detect silence well before the server gives up on us, so a blip
            // stays invisible: the server answers every ping at once, so two
            // ping intervals of silence (one lost pong tolerated) mean dead;
            // never more than the server's own timeout.
            deadAfter = livenessOverride ?? min(timeout, pingInterval * 2)
            return .becameReady
        case .idle, .connecting, .ready, .backingOff:
            return .none
        }
    }

    /// Any message from the server (liveness). Never asks for anything: the
    /// receive path stays free of actions to perform.
    public mutating func messageReceived(now: Int64) {
        switch state {
        case .ready(_, let lastPingAt):
            state = .ready(lastMessageAt: now, lastPingAt: lastPingAt)
        case .greeting:
            state = .greeting(since: now)
        case .idle, .connecting, .backingOff:
            break
        }
    }

    /// The loop did not run for `stall` ms (busy, or the process stopped):
    /// it did not read either, so the server's messages of that time may be
    /// waiting unread. libuv runs its timers before it polls, so the next
    /// `tick` would come before them and take a busy loop for a silent
    /// server; the stall is credited to the silence clock instead. A dead
    /// server is still found, one stall later. A loop busy with logins once
    /// dropped its own live connection this way ("no message from the
    /// server for 11847 ms", issue #26). Never asks for anything.
    public mutating func loopStalled(for stall: Int64, now: Int64) {
        guard stall > 0 else { return }
        switch state {
        case .ready(let lastMessageAt, let lastPingAt):
            state = .ready(lastMessageAt: min(now, lastMessageAt + stall), lastPingAt: lastPingAt)
        case .greeting(let since):
            state = .greeting(since: min(now, since + stall))
        case .idle, .connecting, .backingOff:
            break
        }
    }

    /// The connection failed or closed; `random` in [0, 1) is the backoff's jitter.
    public mutating func closed(_ why: String, now: Int64, random: Double) -> DropAction {
        switch state {
        case .connecting, .greeting, .ready:
            return .drop(lose(why, now: now, random: random, abort: false))
        case .idle, .backingOff:
            return .none
        }
    }

    /// The periodic check; `random` in [0, 1) is the backoff's jitter.
    public mutating func tick(now: Int64, random: Double) -> TickAction {
        switch state {
        case .ready(let lastMessageAt, let lastPingAt):
            if now - lastMessageAt >= deadAfter {
                return .drop(lose("no message from the server for \(now - lastMessageAt) ms", now: now, random: random, abort: true))
            }
            if now - lastPingAt >= pingInterval {
                state = .ready(lastMessageAt: lastMessageAt, lastPingAt: now)
                return .sendPing
            }
            return .none
        case .greeting(let since):
            if now - since >= deadAfter {
                return .drop(lose("no hello reply", now: now, random: random, abort: true))
            }
            return .none
        case .backingOff(let until):
            if now >= until {
                state = .connecting
                return .connect
            }
            return .none
        case .idle, .connecting:
            return .none
        }
    }

    private mutating func lose(_ why: String, now: Int64, random: Double, abort: Bool) -> Drop {
        let drop = Drop(abort: abort, why: why, lost: isReady)
        if isWanted {
            let delay = backoff.delay(attempt: attempt, random: random)
            attempt += 1
            state = .backingOff(until: now + delay)
        } else {
            state = .idle
        }
        return drop
    }
}
