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

    public enum Input: Sendable, Hashable {
        /// Some room needs the connection.
        case wanted
        /// No room needs it any more.
        case unwanted
        case opened
        /// The hello reply: ping interval and the server's heartbeat timeout (ms).
        case helloAnswered(interval: Int64, timeout: Int64)
        /// Any message from the server (liveness).
        case messageReceived
        /// The connection failed or closed.
        case closed(String)
        /// Periodic check.
        case tick
    }

    public enum Action: Sendable, Hashable {
        case connect
        case sendHello
        case sendPing
        /// Drop the connection without ceremony (it is silent or unwanted).
        case abort(String)
        /// The connection became ready / was lost (rooms react).
        case becameReady
        case lost(String)
    }

    /// Backoff: the first retry within `first`, each later ceiling doubling up to `cap`.
    public struct Backoff: Sendable, Hashable {
        public var first: Int64
        public var cap: Int64
        public init(first: Int64 = 1000, cap: Int64 = 30_000) {
            self.first = first
            self.cap = cap
        }

        /// Full jitter: uniform in [0, min(cap, first * 2^attempt)].
        public func delay(attempt: Int, random: Double) -> Int64 {
            let ceiling = min(Double(cap), Double(first) * pow2(min(attempt, 30)))
            return Int64(ceiling * min(max(random, 0), 1))
        }

        private func pow2(_ n: Int) -> Double { Double(1 << n) }
    }

    public private(set) var state: State = .idle
    public private(set) var wanted = false
    private(set) var attempt = 0
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

    /// Takes `input` at `now`; `random` is a fresh uniform value in [0, 1)
    /// for the backoff jitter. One method per input below, each deciding per
    /// state with no catch-all, so an unhandled pair is a compile error.
    public mutating func handle(_ input: Input, now: Int64, random: Double) -> [Action] {
        switch input {
        case .wanted: return becameWanted()
        case .unwanted: return becameUnwanted()
        case .opened: return opened(now: now)
        case .helloAnswered(let interval, let timeout): return helloAnswered(interval: interval, timeout: timeout, now: now)
        case .messageReceived: return messageReceived(now: now)
        case .closed(let why): return closed(why, now: now, random: random)
        case .tick: return tick(now: now, random: random)
        }
    }

    private mutating func becameWanted() -> [Action] {
        wanted = true
        switch state {
        case .idle:
            state = .connecting
            return [.connect]
        case .connecting, .greeting, .ready, .backingOff:
            return []
        }
    }

    private mutating func becameUnwanted() -> [Action] {
        wanted = false
        switch state {
        case .idle:
            return []
        case .ready:
            state = .idle
            return [.abort("no room needs the connection"), .lost("closed")]
        case .connecting, .greeting, .backingOff:
            state = .idle
            return [.abort("no room needs the connection")]
        }
    }

    private mutating func opened(now: Int64) -> [Action] {
        switch state {
        case .connecting:
            state = .greeting(since: now)
            return [.sendHello]
        case .idle, .greeting, .ready, .backingOff:
            return []
        }
    }

    private mutating func helloAnswered(interval: Int64, timeout: Int64, now: Int64) -> [Action] {
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
            return [.becameReady]
        case .idle, .connecting, .ready, .backingOff:
            return []
        }
    }

    private mutating func messageReceived(now: Int64) -> [Action] {
        switch state {
        case .ready(_, let lastPingAt):
            state = .ready(lastMessageAt: now, lastPingAt: lastPingAt)
        case .greeting:
            state = .greeting(since: now)
        case .idle, .connecting, .backingOff:
            break
        }
        return []
    }

    private mutating func closed(_ why: String, now: Int64, random: Double) -> [Action] {
        switch state {
        case .connecting, .greeting, .ready:
            return lose(why, now: now, random: random, abort: false)
        case .idle, .backingOff:
            return []
        }
    }

    private mutating func tick(now: Int64, random: Double) -> [Action] {
        switch state {
        case .ready(let lastMessageAt, let lastPingAt):
            if now - lastMessageAt >= deadAfter {
                return lose("no message from the server for \(now - lastMessageAt) ms", now: now, random: random, abort: true)
            }
            if now - lastPingAt >= pingInterval {
                state = .ready(lastMessageAt: lastMessageAt, lastPingAt: now)
                return [.sendPing]
            }
            return []
        case .greeting(let since):
            if now - since >= deadAfter {
                return lose("no hello reply", now: now, random: random, abort: true)
            }
            return []
        case .backingOff(let until):
            if now >= until {
                state = .connecting
                return [.connect]
            }
            return []
        case .idle, .connecting:
            return []
        }
    }

    private mutating func lose(_ why: String, now: Int64, random: Double, abort: Bool) -> [Action] {
        let wasReady = isReady
        var actions: [Action] = abort ? [.abort(why)] : []
        if wasReady { actions.append(.lost(why)) }
        if wanted {
            let delay = backoff.delay(attempt: attempt, random: random)
            attempt += 1
            state = .backingOff(until: now + delay)
        } else {
            state = .idle
        }
        return actions
    }
}
