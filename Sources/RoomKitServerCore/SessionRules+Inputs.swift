import RoomKitProtocol

extension SessionRules {
    // MARK: Login

    /// What a login to a room must do, decided before anything changes.
    public enum LoginDecision: Sendable, Hashable {
        /// Refuse with 1009007: this connection already holds a live
        /// session in the room (a connection holds at most one per room).
        case alreadyOnConnection
        /// Resume the retained session with this ID: call `resume` on it.
        case resume(String)
        /// The session asked for was ended by a kick: refuse the login
        /// with that kick's code (§6).
        case refuse(ErrorCode)
        /// A fresh session. First end each of `kick` (the user's other
        /// live sessions in the room: the newest login wins) with
        /// 1002050. `resumeExpired` says a resume was asked for a session
        /// no longer retained (it becomes this fresh login).
        case fresh(kick: [String], resumeExpired: Bool)
    }

    /// Decides a login of `user` to a room. `heldOnConnection` says the
    /// connection the login came on already holds a live session in this
    /// room; `resuming` is the session ID the client asked to resume, if
    /// any; `lookup` finds a retained session of this room by ID;
    /// `sessions` are all of the room's retained sessions (only walked for
    /// a fresh login).
    public static func login(user: String, heldOnConnection: Bool, resuming: String?,
                             lookup: (String) -> SessionRules?,
                             sessions: some Sequence<SessionRules>) -> LoginDecision {
        if heldOnConnection { return .alreadyOnConnection }
        if let resuming, let session = lookup(resuming), session.userId == user {
            if let code = session.endedCode { return .refuse(code) }
            return .resume(session.id)
        }
        let kick = sessions.filter { $0.userId == user && $0.endedCode == nil }.map(\.id).sorted()
        return .fresh(kick: kick, resumeExpired: resuming != nil)
    }

    /// What to send right after a fresh login's reply (the join was pushed
    /// with it): a `tokenWillExpire` when the token is already within the
    /// notice. Marks that token warned.
    public mutating func loggedIn(now: Int64, clocks: SessionClocks) -> TokenResult {
        warnIfDue(now: now, clocks: clocks)
    }

    /// What a resume must do.
    public enum ResumeResult: Sendable, Hashable {
        /// Refused with the kick code that ended the session.
        case refused(ErrorCode)
        /// Attached again. `rejoin`: the member had left (heartbeat
        /// timeout), so push its join to the others before the reply.
        /// `warn`: after the reply (and any replay), send
        /// `tokenWillExpire` with this many seconds left.
        case resumed(rejoin: Bool, warn: Int64?)
    }

    /// A resume on a new connection with a token expiring at
    /// `tokenExpiresAt`. The new connection has not been warned yet.
    public mutating func resume(tokenExpiresAt: Int64, now: Int64, clocks: SessionClocks) -> ResumeResult {
        let rejoin: Bool
        switch state {
        case .ended(let code, _):
            return .refused(code)
        case .attached:
            rejoin = false
        case .detached(_, _, let visible):
            rejoin = !visible
        }
        self.tokenExpiresAt = tokenExpiresAt
        state = .attached(warnedForExpiry: nil)
        switch warnIfDue(now: now, clocks: clocks) {
        case .none: return .resumed(rejoin: rejoin, warn: nil)
        case .warn(let remaining): return .resumed(rejoin: rejoin, warn: remaining)
        }
    }

    /// Storage was reloaded (a failed group commit) while the session's
    /// connection stayed: attached again, silently (no join, no warning
    /// state kept). Ignored for an ended session.
    public mutating func reattached() {
        switch state {
        case .ended: return
        case .attached, .detached: state = .attached(warnedForExpiry: nil)
        }
    }

    // MARK: Connection

    /// What losing a connection asks of the caller.
    public enum DetachResult: Sendable, Hashable {
        /// It was not attached: nothing.
        case none
        /// Detached: persist it. The member stays visible until the
        /// heartbeat timeout after `lastSeen`.
        case persist
    }

    /// Its connection closed (or was given up for silence) at `now`;
    /// `lastSeen` is that connection's last message.
    public mutating func detach(now: Int64, lastSeen: Int64) -> DetachResult {
        switch state {
        case .detached, .ended:
            return .none
        case .attached:
            state = .detached(since: now, lastSeen: lastSeen, visible: true)
            return .persist
        }
    }

    /// What a logout asks of the caller.
    public enum LogoutResult: Sendable, Hashable {
        /// Forget the session (delete it from storage); when `leave`, first
        /// push the member's leave to the others.
        case forget(leave: Bool)
    }

    /// The client logged out: the session is over (no resume).
    public mutating func logout(now: Int64) -> LogoutResult {
        let leave = visible
        switch state {
        case .ended: break
        case .attached, .detached: state = .detached(since: now, lastSeen: now, visible: false)
        }
        return .forget(leave: leave)
    }

    // MARK: Kicks and tokens

    /// What a kick asks of the caller.
    public enum KickResult: Sendable, Hashable {
        /// Already ended: nothing.
        case none
        /// Ended with the code. `notify`: it was attached, so send
        /// `kicked` to its connection and unlink it. `leave`: push the
        /// member's leave. Persist it either way.
        case kicked(notify: Bool, leave: Bool)
    }

    /// Ends the session with a kick `code` (duplicate login, admin, token
    /// expired): a later resume is refused with the code.
    public mutating func kick(code: ErrorCode, now: Int64) -> KickResult {
        let leave = visible
        switch state {
        case .ended:
            return .none
        case .attached:
            state = .ended(code: code, since: now)
            return .kicked(notify: true, leave: leave)
        case .detached(let since, _, _):
            state = .ended(code: code, since: since)
            return .kicked(notify: false, leave: leave)
        }
    }

    /// Whether to warn of a token's expiry.
    public enum TokenResult: Sendable, Hashable {
        case none
        /// Send `tokenWillExpire` with this many seconds left.
        case warn(remaining: Int64)
    }

    /// A `renewToken` (or a new login token) set the expiry: a new expiry
    /// within the notice is warned of at once; the same one is not warned
    /// again (once per token).
    public mutating func renewed(tokenExpiresAt: Int64, now: Int64, clocks: SessionClocks) -> TokenResult {
        self.tokenExpiresAt = tokenExpiresAt
        return warnIfDue(now: now, clocks: clocks)
    }

    /// The server announces that the token expires at `tokenExpiresAt`,
    /// whatever the notice (the simulator's scripted `tokenWillExpire`
    /// step). Warns when attached.
    public mutating func announceExpiry(at tokenExpiresAt: Int64, now: Int64) -> TokenResult {
        self.tokenExpiresAt = tokenExpiresAt
        guard case .attached = state else { return .none }
        state = .attached(warnedForExpiry: tokenExpiresAt)
        return .warn(remaining: Self.seconds(tokenExpiresAt - now))
    }

    // MARK: Clocks

    /// What time passing asks of the caller for this session.
    public enum TickResult: Sendable, Hashable {
        case none
        /// Attached, token within the notice: send `tokenWillExpire`.
        case warn(remaining: Int64)
        /// Attached, token expired: the session is ended with `code`
        /// (1002056). Send `tokenWillExpire` first when `warnFirst` (it was
        /// never warned), then `kicked`; push the member's leave; persist.
        case kick(code: ErrorCode, warnFirst: Int64?)
        /// Detached past the heartbeat timeout: push the member's leave; persist.
        case leave
        /// Past retention: forget it (delete from storage); when `leave`,
        /// first push the member's leave.
        case forget(leave: Bool)
    }

    /// Time is `now`: the heartbeat and retention clocks of a detached
    /// session, the token clock of an attached one.
    public mutating func tick(now: Int64, clocks: SessionClocks) -> TickResult {
        switch state {
        case .attached:
            if now >= tokenExpiresAt {
                let warnFirst: Int64? = warnedOfExpiry ? nil : Self.seconds(tokenExpiresAt - now)
                state = .ended(code: .kickedTokenExpired, since: now)
                return .kick(code: .kickedTokenExpired, warnFirst: warnFirst)
            }
            switch warnIfDue(now: now, clocks: clocks) {
            case .none: return .none
            case .warn(let remaining): return .warn(remaining: remaining)
            }
        case .detached(let since, let lastSeen, let visible):
            if now - since >= clocks.sessionRetention {
                state = .detached(since: since, lastSeen: lastSeen, visible: false)
                return .forget(leave: visible)
            }
            if visible && now - lastSeen >= clocks.heartbeatTimeout {
                state = .detached(since: since, lastSeen: lastSeen, visible: false)
                return .leave
            }
            return .none
        case .ended(_, let since):
            return now - since >= clocks.sessionRetention ? .forget(leave: false) : .none
        }
    }

    /// The first time (ms) at which `tick` may answer anything but `.none`,
    /// so a server can leave the session alone until then: the token's
    /// notice (or its expiry once warned) while attached; the heartbeat
    /// timeout (while still visible) or the end of retention while
    /// detached; the end of retention once ended. It states `tick`'s own
    /// conditions, here beside them, so the two cannot drift apart.
    public func nextTick(clocks: SessionClocks) -> Int64 {
        switch state {
        case .attached:
            return warnedOfExpiry ? tokenExpiresAt : tokenExpiresAt - max(0, clocks.tokenExpiryNotice)
        case .detached(let since, let lastSeen, let visible):
            let forget = since + clocks.sessionRetention
            return visible ? min(forget, lastSeen + clocks.heartbeatTimeout) : forget
        case .ended(_, let since):
            return since + clocks.sessionRetention
        }
    }

    /// Warns of the current token when attached, within the notice and not
    /// warned of yet; marks it warned.
    private mutating func warnIfDue(now: Int64, clocks: SessionClocks) -> TokenResult {
        guard case .attached = state, !warnedOfExpiry, tokenExpiresAt - now <= clocks.tokenExpiryNotice else { return .none }
        state = .attached(warnedForExpiry: tokenExpiresAt)
        return .warn(remaining: Self.seconds(tokenExpiresAt - now))
    }

    /// Whole seconds left, never negative (`tokenWillExpire`'s `remaining`).
    static func seconds(_ milliseconds: Int64) -> Int64 { max(0, milliseconds / 1000) }
}
