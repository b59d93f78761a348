import RoomKitLoop
import RoomKitProtocol

/// The engine's record of one room session. Loop thread only.
final class SessionRecord {
    let room: Room
    var machine: RoomSessionMachine
    var user: LoginUser
    var token: String
    var wantsWritable: Bool
    /// Token expiry, ms since the epoch (from the login reply).
    var tokenExpiresAt: Int64 = .max
    /// The server's session ID, for resume.
    var session: String?
    /// The newest room seq seen (pushes and own replies): the resume point.
    var lastSeq: Int64 = 0
    /// Current deadline's generation (older heap entries are stale).
    var generation: UInt64 = 0
    var loginWaiters: [CheckedContinuation<Void, any Error>] = []
    var logoutWaiters: [CheckedContinuation<Void, any Error>] = []
    /// Whether this login is a resume (RECONNECTED) rather than a first login.
    var resuming = false
    /// The request ID of the login last handed to `send` (to withdraw it
    /// from the outbox when a logout comes before it went out).
    var loginRequestID: Int64?
    /// The fleet fence every login of this session carries (nil: none), and
    /// the server's current fence from a 1009008 refusal.
    var fence: Int64?
    var refusedFence: Int64?
    /// The stored cursor this login resumes (a `SessionStore`'s), until answered.
    var restored: SessionCursor?
    /// Whether the cache holds a stored room (so an adopted snapshot is a change).
    var startedFromStore = false
    /// A gap to report when the current login succeeds (reason, last applied seq).
    var pendingResync: (reason: ResyncReason, lastApplied: Int64)?
    /// Pushes with a seq up to this one are a resume's replay.
    var replayUntil: Int64 = 0
    /// Whether the cursor changed since the store last heard (it is in `dirtyCursors`).
    var cursorDirty = false
    /// Extended data for the next LOGINED / RECONNECTED report.
    var reportExtras: [String: JSON] = [:]

    init(room: Room, machine: RoomSessionMachine, user: LoginUser, token: String, wantsWritable: Bool) {
        self.room = room
        self.machine = machine
        self.user = user
        self.token = token
        self.wantsWritable = wantsWritable
    }
}

extension RoomHost {
    var nowMonotonic: Int64 { Int64(environment.nowMilliseconds) }

    func startLogin(_ roomID: String, user: LoginUser, token: String, writable: Bool, fence: Int64? = nil,
                    continuation: CheckedContinuation<Void, any Error>) {
        guard let record = idleDriver(roomID, user: user, token: token, writable: writable, continuation: continuation) else { return }
        record.fence = fence
        record.refusedFence = nil
        record.resuming = false
        record.pendingResync = nil
        restoreCursor(record)
        record.startedFromStore = record.restored != nil
        ensureTicker()
        run(.loginRequested, on: record)
        updateConnectionWanted()
    }

    /// A login for which no token could be had: the room still reports
    /// LOGINING, then LOGIN_FAILED with `error`'s code, and the call throws.
    func startImpossibleLogin(_ roomID: String, user: LoginUser, writable: Bool, error: RoomError,
                              continuation: CheckedContinuation<Void, any Error>) {
        guard let record = idleDriver(roomID, user: user, token: "", writable: writable, continuation: continuation) else { return }
        run(.loginImpossible(error.code, error.message), on: record)
    }

    /// The room's record, made or reused for a new login with `continuation`
    /// waiting on it; nil (and the continuation resumed) when already logged in.
    private func idleDriver(_ roomID: String, user: LoginUser, token: String, writable: Bool,
                            continuation: CheckedContinuation<Void, any Error>) -> SessionRecord? {
        let record: SessionRecord
        if let existing = sessions[roomID] {
            guard !existing.machine.isLoggedIn else {
                continuation.resume(throwing: RoomError(
                    code: .alreadyLoggedIn, message: "already logged in to \(roomID)", reason: .loginFailed))
                return nil
            }
            record = existing
            record.user = user
            record.token = token
            record.wantsWritable = writable
        } else {
            record = SessionRecord(room: handle(for: roomID),
                                   machine: RoomSessionMachine(loginTimeout: configuration.loginTimeout.milliseconds,
                                                               reconnectWindow: configuration.reconnectWindow.milliseconds),
                                   user: user, token: token, wantsWritable: writable)
            sessions[roomID] = record
        }
        record.loginWaiters.append(continuation)
        return record
    }

    func startLogout(_ roomID: String, continuation: CheckedContinuation<Void, any Error>) {
        guard let record = sessions[roomID], record.machine.isLoggedIn else {
            // No handle is made for a room never logged in to: it would stay
            // listed (allRooms, GET /v1/rooms) although it was never joined.
            let room = self.room(roomID)
            room?.update { $0.reason = .logoutFailed; $0.errorCode = .logoutNotLoggedIn }
            emit(.roomStateChanged(room: roomID, reason: .logoutFailed, errorCode: .logoutNotLoggedIn), room: room)
            return continuation.resume(throwing: RoomError(
                code: .logoutNotLoggedIn, message: "not logged in to \(roomID)", reason: .logoutFailed))
        }
        record.logoutWaiters.append(continuation)
        if case .logining(sent: true, _, _) = record.machine.state, let id = record.loginRequestID, withdrawQueued(id) {
            // The login never left the outbox (pacing): cancel it rather
            // than wait for a reply to a request the server will never see.
            run(.loginWithdrawn, on: record)
        }
        run(.logoutRequested, on: record)
    }

    /// Feeds the session machine and performs what it asks.
    func run(_ input: RoomSessionMachine.Input, on record: SessionRecord) {
        let actions = record.machine.handle(input, now: nowMonotonic, connectionReady: link.isReady)
        for action in actions { perform(action, record) }
    }

    private func perform(_ action: RoomSessionMachine.Action, _ record: SessionRecord) {
        let room = record.room
        switch action {
        case .sendLogin(let resume):
            sendLogin(record, resume: resume)
        case .sendLogout:
            send(.logout, room: room.id, timeout: false) { [self] _ in
                // Whatever the answer (even 1002002), the server no longer has us.
                run(.logoutAnswered, on: record)
            }
        case .report(let reason, let code, let cause):
            room.update { $0.reason = reason; $0.errorCode = code }
            var extendedData: [String: JSON] = cause.map { ["cause": .int(Int64($0.rawValue))] } ?? [:]
            if reason == .logined || reason == .reconnected {
                extendedData.merge(record.reportExtras) { current, _ in current }
                record.reportExtras = [:]
            }
            emit(.roomStateChanged(room: room.id, reason: reason, errorCode: code, extendedData: extendedData), room: room)
            if reason == .reconnectFailed {
                emitResync(record, .reconnectFailed, lastApplied: record.lastSeq, resumedAt: nil)
            }
            if reason.phase == .disconnected {
                // The session is over (logout, failure, kick): nothing can be committed.
                setWritable(false, record: record)
            }
        case .phase(let phase):
            room.update { $0.phase = phase }
            emit(.phaseChanged(room: room.id, phase: phase), room: room)
        case .setDeadline(let at):
            record.generation &+= 1
            deadlines.insert(at, room.id, generation: record.generation)
        case .cancelDeadline:
            record.generation &+= 1
        case .disconnected(let why):
            emit(.disconnectWithError(room: room.id, error: why), room: room)
        case .kickedWithReason(let code, let reason):
            emit(.kickedWithReason(room: room.id, code: code, reason: reason), room: room)
        case .finishLogin(let reported):
            var fenced = reported
            if fenced?.code == .staleFence { fenced?.currentFence = record.refusedFence }
            let error = fenced
            let waiters = record.loginWaiters
            record.loginWaiters.removeAll()
            // Resume on the next loop turn: the rest of this reply's events
            // (beingAbleToCommitChange, ...) are raised first, so a caller
            // returning from loginRoom has seen every event of its login.
            loop.execute {
                for waiter in waiters {
                    if let error { waiter.resume(throwing: error) } else { waiter.resume() }
                }
            }
        case .finishLogout:
            let waiters = record.logoutWaiters
            record.logoutWaiters.removeAll()
            loop.execute {
                for waiter in waiters { waiter.resume() }
            }
        case .forgetSession:
            // A stored cursor whose resume never succeeded stays stored.
            if record.session != nil { cursorChanged(record) }
            record.session = nil
            record.restored = nil
            record.resuming = false
            updateConnectionWanted()
        }
    }

    private func sendLogin(_ record: SessionRecord, resume: Bool) {
        let roomID = record.room.id
        // A resume after a long outage may need a fresh token.
        if resume, let provider = tokenProvider, record.tokenExpiresAt - environment.wallMilliseconds < 5_000 {
            let user = record.user.id
            Task { [self] in
                let token = try? await provider.token(room: roomID, user: user)
                loop.execute { [self] in
                    guard let record = sessions[roomID] else { return }
                    if let token { record.token = token }
                    transmitLogin(record, resume: resume)
                }
            }
            return
        }
        transmitLogin(record, resume: resume)
    }

    func transmitLogin(_ record: SessionRecord, resume: Bool) {
        guard link.isReady else { return }  // the machine resends on the next connectionReady
        var point = resume ? record.session.map { ResumePoint(session: $0, seq: record.lastSeq) } : nil
        if !resume, let cursor = record.restored { point = ResumePoint(session: cursor.session, seq: cursor.seq) }
        record.resuming = resume
        let request = LoginRequest(token: record.token, user: record.user, writable: record.wantsWritable, resume: point,
                                   fence: record.fence)
        record.loginRequestID = nextRequestID
        send(.login(request), room: record.room.id, timeout: false) { [self] result in
            loginAnswered(record, result)
        }
    }

    private func loginAnswered(_ record: SessionRecord, _ result: Result<[String: JSON], RoomError>) {
        let room = record.room
        switch result {
        case .success(let fields):
            let reply: LoginReply
            do {
                reply = try LoginReply(fields: fields)
            } catch {
                emit(.throwError(domain: "protocol", code: .malformed, message: "bad login reply: \(error)"), room: nil)
                return run(.loginFailed(.malformed, "bad login reply"), on: record)
            }
            let firstLogin = !record.resuming
            // The session this login asked to resume, and the last seq applied before it.
            let resumedSession = record.resuming ? record.session : record.restored?.session
            let lastApplied = record.lastSeq
            let fromStore = record.startedFromStore
            record.restored = nil
            record.startedFromStore = false
            record.session = reply.session
            record.tokenExpiresAt = reply.expiresAt
            if let snapshot = reply.snapshot {
                // A snapshot is the state at `reply.seq`. When recovered, the
                // missed events follow as pushes and advance lastSeq themselves;
                // moving it to `reply.seq` here would drop them as duplicates.
                record.lastSeq = reply.seq
                room.update { content in
                    content.state = snapshot.state
                    content.members = snapshot.members
                    content.streams = snapshot.streams
                    content.extraInfo = snapshot.extraInfo
                }
            }
            room.update { $0.memberId = reply.memberId; $0.seq = record.lastSeq; $0.writable = reply.writable }
            if let resumedSession {
                record.reportExtras = ["recovered": .bool(reply.recovered)]
                if reply.recovered { record.replayUntil = reply.seq }
                if !reply.recovered, record.pendingResync == nil {
                    record.pendingResync = (resumedSession == reply.session ? .notRecovered : .sessionExpired, lastApplied)
                }
            }
            cursorChanged(record)
            run(.loginSucceeded, on: record)
            emit(.beingAbleToCommitChange(room: room.id, writable: reply.writable), room: room)
            if let gap = record.pendingResync {
                record.pendingResync = nil
                emitResync(record, gap.reason, lastApplied: gap.lastApplied, resumedAt: reply.seq)
            }
            if !firstLogin || fromStore, let snapshot = reply.snapshot {
                // Not recovered: the snapshot replaces everything; report it whole.
                var diff = RoomStateDiff()
                diff.globalState = snapshot.state.globalState
                diff.sceneState = snapshot.state.sceneState
                diff.broadcastState = snapshot.state.broadcastState
                diff.roomMembers = snapshot.members
                emit(.roomStateModified(room: room.id, from: nil, diff: diff), room: room)
            }
        case .failure(let error):
            if error.code == .connectionInterrupted { return }  // the connection machine reports the loss
            if error.code == .rateLimited {
                // Not an answer about the login: try again shortly (the deadline still applies).
                let roomID = room.id
                let resume = record.resuming
                loop.schedule(after: .milliseconds(100)) { [weak self] in
                    guard let self, let record = sessions[roomID] else { return }
                    switch record.machine.state {
                    case .logining(true, _, _), .reconnecting(true, _): transmitLogin(record, resume: resume)
                    default: break
                    }
                }
                return
            }
            if error.code == .staleFence { record.refusedFence = error.currentFence }
            // A stale fence refuses a fresh login as well: no second try.
            if error.code != .staleFence, record.restored != nil, case .logining = record.machine.state {
                return abandonRestoredCursor(record, error)
            }
            run(.loginFailed(error.code, error.message), on: record)
        }
    }

    func setWritable(_ writable: Bool, record: SessionRecord) {
        let room = record.room
        let old = room.writable
        room.update { $0.writable = writable }
        if old != writable {
            cursorChanged(record)
            emit(.beingAbleToCommitChange(room: room.id, writable: writable), room: room)
        }
    }

    /// Keeps the cache exact after an own change (its push is not sent to us).
    func applyOwn(_ request: ClientRequest, reply: [String: JSON], record: SessionRecord) {
        let room = record.room
        if let seq = reply["seq"]?.int64Value {
            record.lastSeq = max(record.lastSeq, seq)
            room.update { $0.seq = max($0.seq, seq) }
        }
        cursorChanged(record)
        let me = room.memberId ?? -1
        switch request {
        case .setState(let patch):
            let effective = reply["patch"]?.objectValue ?? patch
            room.update { content in
                if let next = try? content.state.applying(patch: effective).0 { content.state = next }
            }
        case .putScenes, .setScenePath, .removeScenes, .insertImage, .setViewMode:
            if let patch = reply["patch"]?.objectValue {
                room.update { content in
                    if let next = try? content.state.applying(patch: patch).0 { content.state = next }
                }
            }
        case .setMemberState(let patch):
            room.update { content in
                if let index = content.members.firstIndex(where: { $0.memberId == me }) {
                    content.members[index].memberState = RoomState.mergeMemberState(content.members[index].memberState, patch)
                }
            }
        case .publishStream(let id, let extraInfo):
            let stream = MediaStream(id: id, userId: record.user.id, extraInfo: extraInfo)
            room.update { $0.streams.removeAll { $0.id == id }; $0.streams.append(stream) }
        case .unpublishStream(let id):
            room.update { $0.streams.removeAll { $0.id == id } }
        case .setExtraInfo(let key, let value):
            room.update { $0.extraInfo[key] = value }
        case .setWritable:
            if let writable = reply["writable"]?.boolValue {
                record.wantsWritable = writable
                setWritable(writable, record: record)
            }
        default:
            break
        }
    }
}


import Foundation
