extension FleetLeaseMachine {
    // MARK: Drain

    /// What a drain request does.
    public enum DrainResult: Sendable, Hashable {
        /// Draining from now: renew at once (telling the fleet) and run a
        /// claim round (which starts handing shards over). `held`: shards held.
        case startDraining(held: Int)
        /// Already draining.
        case none
    }

    /// Input: the host drains (SIGTERM) at `now`.
    public mutating func drain(now: UInt64) -> DrainResult {
        switch state {
        case .draining:
            return .none
        case .serving(let leases):
            _ = gate.drain()
            state = .draining(leases, since: now, servingHosts: nil)
            return .startDraining(held: leases.held.count)
        }
    }

    /// Where a drain is.
    public enum DrainProgress: Sendable, Hashable {
        /// Every shard is handed back (and, `handingOver` false, every room taken over).
        case done
        /// No other live host serves: nobody can take the rooms, stop waiting.
        case alone
        /// Still handing back (or not draining).
        case pending
    }

    /// Input: the drain's poll. `handingOver`: rooms still wait for their
    /// next owner's cursor.
    public func drainProgress(handingOver: Bool) -> DrainProgress {
        switch state {
        case .serving:
            return .pending
        case .draining(let leases, _, let servingHosts):
            let idle: Bool
            switch leases.release {
            case .idle: idle = true
            case .handingBack, .awaitingRedis: idle = false
            }
            if leases.held.isEmpty && leases.releasing.isEmpty && idle && !handingOver { return .done }
            return servingHosts == 0 ? .alone : .pending
        }
    }

    // MARK: Rooms

    /// What a change of the room set means to this host.
    public enum RoomChangeResult: Sendable, Hashable {
        /// The room is in a shard this host holds: log in (added) or out (removed).
        case mine
        /// Another host's room.
        case notMine
    }

    /// Input: `room` was added to the fleet's room set (by this host's API or the changes stream).
    public mutating func roomAdded(_ room: String) -> RoomChangeResult {
        let shard = shard(of: room)
        return withLeases { leases in
            guard leases.held[shard] != nil else { return .notMine }
            leases.held[shard]?.rooms.insert(room)
            return .mine
        }
    }

    /// Input: `room` was removed from the fleet's room set.
    public mutating func roomRemoved(_ room: String) -> RoomChangeResult {
        let shard = shard(of: room)
        return withLeases { leases in
            guard leases.held[shard] != nil else { return .notMine }
            leases.held[shard]?.rooms.remove(room)
            return .mine
        }
    }

    /// Whether `room` may be logged in now.
    public enum LoginDecision: Sendable, Hashable {
        /// Log in with the shard's fence.
        case login(fence: Int64)
        /// Held, but less than TTL/2 of the lease is surely left: wait for the next successful renew.
        case wait
        /// Not in a shard this host holds.
        case notHeld
    }

    /// The local lease rule for a login of `room` at `now`: at least TTL/2
    /// of the lease left on our own clock.
    public func loginDecision(_ room: String, now: UInt64) -> LoginDecision {
        guard let lease = leases.held[shard(of: room)], lease.rooms.contains(room) else { return .notHeld }
        guard lease.validUntil > now, lease.validUntil - now >= settings.ttl / 2 else { return .wait }
        return .login(fence: lease.fence)
    }

    /// Whether `room` is in a shard this host holds.
    public func holds(_ room: String) -> Bool {
        leases.held[shard(of: room)]?.rooms.contains(room) == true
    }

    /// The fence under which `room`'s cursor may be written (held or being handed back).
    public func cursorFence(_ room: String) -> Int64? {
        let shard = shard(of: room)
        let leases = self.leases
        return leases.held[shard]?.fence ?? leases.releasing[shard]?.fence
    }

    /// What a re-fence does.
    public enum RefencedResult: Sendable, Hashable {
        /// The shard now logs in with the new fence; retry the waiting logins.
        case refenced
        /// The shard changed meanwhile (lost or re-fenced): retry anyway.
        case stale
    }

    /// Input: the fence counter of `shard` moved past roomd's: `old` → `new`
    /// (nil: the script refused).
    public mutating func refenced(shard: Int, from old: Int64, to new: Int64?) -> RefencedResult {
        withLeases { leases in
            guard let new, new > 0, leases.held[shard]?.fence == old else { return .stale }
            leases.held[shard]?.fence = new
            return .refenced
        }
    }
}
