import RoomKitProtocol

/// The clocks of PROTOCOL.md §4 and §8 that a server applies to sessions,
/// in milliseconds. roomd takes them from its configuration, the simulator
/// from its settings.
public struct SessionClocks: Sendable, Hashable {
    /// A connection silent this long is given up; a detached member leaves
    /// this long after its connection's last message (§4).
    public var heartbeatTimeout: Int64
    /// A detached (or kicked) session is kept this long for a resume (§6).
    public var sessionRetention: Int64
    /// `tokenWillExpire` is sent once a token has this long left (§8).
    public var tokenExpiryNotice: Int64

    public init(heartbeatTimeout: Int64 = 90_000, sessionRetention: Int64 = 1_200_000, tokenExpiryNotice: Int64 = 30_000) {
        self.heartbeatTimeout = heartbeatTimeout
        self.sessionRetention = sessionRetention
        self.tokenExpiryNotice = tokenExpiryNotice
    }

    /// Whether a connection whose last message arrived at `lastMessageAt`
    /// is past the heartbeat timeout at `now` (§4: counted from the last
    /// message, whatever the socket does). The caller then detaches its
    /// sessions (`SessionRules.detach`) and closes it.
    public func isSilent(lastMessageAt: Int64, now: Int64) -> Bool {
        now - lastMessageAt >= heartbeatTimeout
    }
}

/// One session's server-side rules as a value (Hummingbird's state-machine
/// shape): attached to a connection or detached from it, visible to the
/// others or not, its token's expiry and warning, and the kick that ended
/// it. Each input is a method that takes the time and returns what the
/// caller must do (push a join or a leave to the members, send a warning or
/// a kick, persist, forget); the machine does no I/O. roomd
/// (`ServerSession`) and the simulator's server (`SimulatedServer`) both
/// keep one per session, so the two servers cannot drift apart.
///
/// Times are milliseconds since the epoch on roomd and virtual
/// milliseconds in the simulator; only differences matter.
public struct SessionRules: Sendable, Hashable {
    /// Where the session stands. The data each state needs is inside it.
    public enum State: Sendable, Hashable {
        /// On a connection: visible to the others, its liveness is its
        /// connection's (the caller's `lastMessageAt`). `warnedForExpiry`
        /// is the expiry a `tokenWillExpire` was sent for on this
        /// connection, if any (once per token, issue 27 §4).
        case attached(warnedForExpiry: Int64?)
        /// Off its connection since `since` (retention counts from there);
        /// `lastSeen` was its connection's last message (the heartbeat
        /// timeout counts from there); `visible` until the member left.
        case detached(since: Int64, lastSeen: Int64, visible: Bool)
        /// Ended by a kick with `code` (no longer visible); a resume is
        /// refused with `code` until retention after `since` forgets it.
        case ended(code: ErrorCode, since: Int64)
    }

    /// The session's ID (the resume handle).
    public let id: String
    /// The user it belongs to (duplicate logins are per user and room).
    public let userId: String
    public internal(set) var state: State
    /// When its token expires (`Int64.max`: never).
    public internal(set) var tokenExpiresAt: Int64

    /// A fresh session, attached at `now`. Use `SessionRules.login` to
    /// decide whether a login is fresh, and `loggedIn(now:clocks:)` for what
    /// to send once it is.
    public init(id: String, userId: String, tokenExpiresAt: Int64) {
        self.id = id
        self.userId = userId
        self.tokenExpiresAt = tokenExpiresAt
        state = .attached(warnedForExpiry: nil)
    }

    /// A session read back from storage after a restart: detached (since
    /// `detachedAt`, or `now` when storage has none), its heartbeat counted
    /// from `now`, or ended with `endedCode`.
    public init(restoring id: String, userId: String, tokenExpiresAt: Int64, detachedAt: Int64?, visible: Bool,
                endedCode: ErrorCode?, now: Int64) {
        self.id = id
        self.userId = userId
        self.tokenExpiresAt = tokenExpiresAt
        if let endedCode {
            state = .ended(code: endedCode, since: detachedAt ?? now)
        } else {
            state = .detached(since: detachedAt ?? now, lastSeen: now, visible: visible)
        }
    }

    /// Whether the others see it as a member.
    public var visible: Bool {
        switch state {
        case .attached: return true
        case .detached(_, _, let visible): return visible
        case .ended: return false
        }
    }

    /// Whether it is on a connection.
    public var attached: Bool {
        switch state {
        case .attached: return true
        case .detached, .ended: return false
        }
    }

    /// When it lost its connection (nil while attached); what storage keeps.
    public var detachedAt: Int64? {
        switch state {
        case .attached: return nil
        case .detached(let since, _, _), .ended(_, let since): return since
        }
    }

    /// The kick code that ended it, if one did.
    public var endedCode: ErrorCode? {
        switch state {
        case .attached, .detached: return nil
        case .ended(let code, _): return code
        }
    }

    /// Whether the current token has been warned of on this connection.
    public var warnedOfExpiry: Bool {
        switch state {
        case .attached(let warned): return warned == tokenExpiresAt
        case .detached, .ended: return false
        }
    }
}
