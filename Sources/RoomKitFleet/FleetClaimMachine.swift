/// When a fleet host may take shards (docs/FLEET.md), as a pure state
/// machine: one method per input, each returning what the driver
/// (`FleetCoordinator`, which does the Redis I/O) must do. Times are the
/// loop's milliseconds, passed in.
///
/// The rule it keeps: after a host sees a new Redis process (its `run_id`
/// changed: the data may be gone), the owners' re-assertion wins against
/// claims by design, not by timing. Such a host takes no shard for one renew
/// interval, in which every live owner's renew re-asserts what it held; and
/// after any (re)connect it takes none until it knows the run ID. The first
/// Redis a host sees holds nothing back (it had nothing to re-assert). A
/// draining host never takes one again.
public struct FleetClaimMachine: Sendable, Hashable {
    /// Where the host is with respect to claiming.
    public enum State: Sendable, Hashable {
        /// No Redis connection.
        case disconnected
        /// Connected; the Redis run ID is not known yet.
        case awaitingRunID(previous: String?)
        /// A new Redis process: no taking claims before `until`.
        case holding(runID: String?, until: UInt64)
        /// Claims may take shards.
        case claiming(runID: String?)
        /// Draining: claims only report (and release), never take.
        case draining
    }

    /// What to do after a (re)connect.
    public enum ConnectedResult: Sendable, Hashable {
        /// Ask Redis for its run ID (`INFO server`).
        case askRunID
        /// Nothing (draining: no claims to gate).
        case none
    }

    /// What to do once the run ID is known.
    public enum RunIDResult: Sendable, Hashable {
        /// A new Redis process: add the rooms back and renew at once; claims wait until `until`.
        case newRedis(until: UInt64)
        /// The same process as before (a mere reconnect): claims may go on.
        case sameRedis
        /// Nothing (not waiting for a run ID).
        case none
    }

    /// What a claim round may do.
    public enum ClaimResult: Sendable, Hashable {
        /// Run the claim script; `mayTake`: whether it may take shards.
        case claim(mayTake: Bool)
        /// No claim round now (no connection, or the run ID is not known yet).
        case skip
    }

    /// What a lost connection means.
    public enum LostResult: Sendable, Hashable {
        /// Claims stop until the next connect and run ID.
        case stopClaiming
        /// Nothing changes (already disconnected or draining).
        case none
    }

    /// What a drain request means.
    public enum DrainResult: Sendable, Hashable {
        /// Start handing shards back; never take one again.
        case startDraining
        /// Already draining.
        case none
    }

    /// The current state.
    public private(set) var state: State = .disconnected
    /// How long claims wait after a new Redis process: one renew interval (ms).
    public let renewInterval: UInt64
    /// The run ID of the Redis process last seen (nil: none yet, or not reported).
    private var lastRunID: String?
    /// Whether any run ID was observed (the first one holds nothing back).
    private var hasSeenRedis = false

    /// `renewInterval`: milliseconds between renews (the hold after a new Redis).
    public init(renewInterval: UInt64) {
        self.renewInterval = renewInterval
    }

    /// Input: the connection to Redis is up.
    public mutating func connected() -> ConnectedResult {
        switch state {
        case .draining:
            return .none
        case .disconnected, .awaitingRunID, .holding, .claiming:
            state = .awaitingRunID(previous: lastRunID)
            return .askRunID
        }
    }

    /// Input: Redis answered `INFO server` at `now` with `runID` (nil when
    /// it reported none: treated as a new process, the safe side).
    public mutating func runIDObserved(_ runID: String?, now: UInt64) -> RunIDResult {
        switch state {
        case .awaitingRunID(let previous):
            lastRunID = runID
            if let runID, runID == previous {
                state = .claiming(runID: runID)
                return .sameRedis
            }
            if previous == nil && !hasSeenRedis {
                // This host's first Redis: it held nothing to re-assert, and a
                // shard without a lease record is held one TTL by the claim
                // script for an owner that may re-assert it.
                hasSeenRedis = true
                state = .claiming(runID: runID)
                return .newRedis(until: now)
            }
            hasSeenRedis = true
            let until = now + renewInterval
            state = .holding(runID: runID, until: until)
            return .newRedis(until: until)
        case .disconnected, .holding, .claiming, .draining:
            return .none
        }
    }

    /// Input: a claim round is due at `now`; `wouldTake`: whether the host
    /// would take shards on its own grounds (healthy, not loaded, past its
    /// first claim time).
    public mutating func claimDue(now: UInt64, wouldTake: Bool) -> ClaimResult {
        switch state {
        case .disconnected, .awaitingRunID:
            return .skip
        case .holding(let runID, let until):
            if now < until { return .claim(mayTake: false) }
            state = .claiming(runID: runID)
            return .claim(mayTake: wouldTake)
        case .claiming:
            return .claim(mayTake: wouldTake)
        case .draining:
            return .claim(mayTake: false)
        }
    }

    /// Input: the connection to Redis was lost.
    public mutating func lostRedis() -> LostResult {
        switch state {
        case .disconnected, .draining:
            return .none
        case .awaitingRunID, .holding, .claiming:
            state = .disconnected
            return .stopClaiming
        }
    }

    /// Input: the host drains (SIGTERM).
    public mutating func drain() -> DrainResult {
        switch state {
        case .draining:
            return .none
        case .disconnected, .awaitingRunID, .holding, .claiming:
            state = .draining
            return .startDraining
        }
    }
}
