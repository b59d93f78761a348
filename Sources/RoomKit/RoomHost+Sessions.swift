import RoomKitLoop
import RoomKitProtocol

/// The engine's record of one room session. Loop thread only.
///
/// A host holds one per room (1,000,000 in the bench's largest tier), so
/// its fields are laid out for size: Swift lays a class's fields out in
/// declaration order, so the 8- and 16-byte fields come first and the
/// one-byte ones last, packed together; the three optional integers are
/// stored with a sentinel (an `Int64?` takes 16 bytes with its padding); and
/// the login's user, the same for every room of a bot, is one shared box.
/// An instance took 328 bytes of heap before (`malloc_usable_size`), 216 now.
final class SessionRecord {
    let room: Room
    var machine: RoomSessionMachine
    /// The login's user (boxed: `LoginUserBox`).
    var user: LoginUser { userBox.user }
    var userBox: LoginUserBox
    var token: String
    /// The server's session ID, for resume.
    var session: String?
    /// Token expiry, ms since the epoch (from the login reply).
    var tokenExpiresAt: Int64 = .max
    /// The newest room seq seen (pushes and own replies): the resume point.
    var lastSeq: Int64 = 0
    /// Current deadline's generation (older heap entries are stale).
    var generation: UInt64 = 0
    /// When this room last began logging in or reconnecting (uptime ns),
    /// for the login and resume timers (`RoomHostMetrics.reported`).
    var timedSince: UInt64 = 0
    var loginWaiters: [LoginWaiter] = []
    var logoutWaiters: [CheckedContinuation<Void, any Error>] = []
    /// The request ID of the login last handed to `send` (to withdraw it
    /// from the outbox when a logout comes before it went out).
    var loginRequestID: Int64? {
        get { storedLoginRequestID == Self.none ? nil : storedLoginRequestID }
        set { storedLoginRequestID = newValue ?? Self.none }
    }
    /// The fleet fence every login of this session carries (nil: none), and
    /// the server's current fence from a 1009008 refusal.
    var fence: Int64? {
        get { storedFence == Self.none ? nil : storedFence }
        set { storedFence = newValue ?? Self.none }
    }
    var refusedFence: Int64? {
        get { storedRefusedFence == Self.none ? nil : storedRefusedFence }
        set { storedRefusedFence = newValue ?? Self.none }
    }
    /// `Int64.min` stands for nil in the three above (request IDs count up
    /// from 1, fences are the fleet's counters: neither is ever negative).
    private static let none = Int64.min
    private var storedLoginRequestID = SessionRecord.none
    private var storedFence = SessionRecord.none
    private var storedRefusedFence = SessionRecord.none
    /// The stored cursor this login resumes (a `SessionStore`'s), until answered.
    /// Boxed: it is set only while such a login is in flight, and inline it
    /// would add 192 bytes to every one of a host's (100,000) records.
    var restored: SessionCursor? {
        get { restoredBox?.cursor }
        set { restoredBox = newValue.map(RestoredCursor.init) }
    }
    private var restoredBox: RestoredCursor?
    /// Pushes with a seq up to this one are a resume's replay.
    var replayUntil: Int64 = 0
    /// Extended data for the next LOGINED / RECONNECTED report.
    var reportExtras: [String: JSON] = [:]
    /// A gap to report when the current login succeeds (reason, last applied seq).
    var pendingResync: (reason: ResyncReason, lastApplied: Int64)?
    // The one-byte fields, together at the end.
    var wantsWritable: Bool
    /// An automatic renewal is in flight (RoomHost+Tokens.swift), and how
    /// often in a row the provider returned the token in use.
    var renewing = false
    var sameTokenAnswers: UInt8 = 0
    /// Whether this login is a resume (RECONNECTED) rather than a first login.
    var resuming = false
    /// Whether the cache holds a stored room (so an adopted snapshot is a change).
    var startedFromStore = false
    /// Whether the cursor changed since the store last heard (it is in `dirtyCursors`).
    var cursorDirty = false
    /// The phase last reported (`firePhaseChanged` fires on a change only).
    var phase: RoomPhase = .disconnected
    /// The reason last reported (nil: none yet), the room's place in the
    /// `roomkit_sessions` gauges.
    var reason: RoomReason?

    init(room: Room, machine: RoomSessionMachine, user: LoginUserBox, token: String, wantsWritable: Bool) {
        self.room = room
        self.machine = machine
        userBox = user
        self.token = token
        self.wantsWritable = wantsWritable
    }
}

/// Who waits for a login's outcome: one `loginRoom` call, or one room of
/// a `loginRooms` batch.
enum LoginWaiter: Sendable {
    case call(CheckedContinuation<Void, any Error>)
    case batch(LoginBatch, index: Int)

    /// The outcome: nil when logged in. Loop thread.
    func finish(_ error: RoomError?) {
        switch self {
        case .call(let continuation):
            if let error { continuation.resume(throwing: error) } else { continuation.resume() }
        case .batch(let batch, let index):
            batch.finish(index, error)
        }
    }
}

/// The outcomes of one `loginRooms` call, collected on the loop; its
/// caller resumes once, when the last room has one.
/// @unchecked Sendable: made, read and written on the loop thread only (it
/// crosses threads only inside the loop's own closures).
final class LoginBatch: @unchecked Sendable {
    private var outcomes: [RoomError?]
    private var remaining: Int
    private var continuation: CheckedContinuation<[RoomError?], Never>?

    /// `outcomes` holds the rooms already answered (refused before the
    /// loop), `remaining` how many are still to come.
    init(outcomes: [RoomError?], remaining: Int, continuation: CheckedContinuation<[RoomError?], Never>) {
        self.outcomes = outcomes
        self.remaining = remaining
        self.continuation = continuation
        if remaining == 0 { resume() }
    }

    func finish(_ index: Int, _ error: RoomError?) {
        outcomes[index] = error
        remaining -= 1
        if remaining == 0 { resume() }
    }

    private func resume() {
        continuation?.resume(returning: outcomes)
        continuation = nil
    }
}

/// A login's user, shared by the records of the rooms it logs in to (the
/// host hands the last one out again while the user is the same:
/// `RoomHost.userBox(for:)`).
final class LoginUserBox {
    let user: LoginUser
    init(_ user: LoginUser) { self.user = user }
}

private final class RestoredCursor {
    let cursor: SessionCursor
    init(_ cursor: SessionCursor) { self.cursor = cursor }
}

extension RoomHost {
    var nowMonotonic: Int64 { Int64(environment.nowMilliseconds) }

    /// The box for `user`: the last one handed out when it is the same user
    /// (a bot's rooms all log in as one), else a new one, kept as the last.
    func userBox(for user: LoginUser) -> LoginUserBox {
        if let last = lastUserBox, last.user == user { return last }
        let box = LoginUserBox(user)
        lastUserBox = box
        return box
    }

    func startLogin(_ roomID: String, user: LoginUser, token: String, writable: Bool, fence: Int64? = nil,
                    waiter: LoginWaiter) {
        guard let record = idleDriver(roomID, user: user, token: token, writable: writable, waiter: waiter) else { return }
        record.fence = fence
        record.refusedFence = nil
        record.resuming = false
        record.pendingResync = nil
        restoreCursor(record)
        record.startedFromStore = record.restored != nil
        ensureTicker()
        beginLogin(record)
        updateConnectionWanted()
    }

    /// A login for which no token could be had: the room still reports
    /// LOGINING, then LOGIN_FAILED with `error`'s code, and the call throws.
    func startImpossibleLogin(_ roomID: String, user: LoginUser, writable: Bool, error: RoomError,
                              waiter: LoginWaiter) {
        guard let record = idleDriver(roomID, user: user, token: "", writable: writable, waiter: waiter) else { return }
        failImpossibleLogin(record, code: error.code, message: error.message)
    }

    /// The room's record, made or reused for a new login with `waiter`
    /// waiting on it; nil (and the waiter answered) when already logged in.
    private func idleDriver(_ roomID: String, user: LoginUser, token: String, writable: Bool,
                            waiter: LoginWaiter) -> SessionRecord? {
        let record: SessionRecord
        if let existing = sessions[roomID] {
            guard !existing.machine.isLoggedIn else {
                waiter.finish(RoomError(code: .alreadyLoggedIn, message: "already logged in to \(roomID)", reason: .loginFailed))
                return nil
            }
            record = existing
            if record.user != user { record.userBox = userBox(for: user) }
            record.token = token
            record.wantsWritable = writable
        } else {
            record = SessionRecord(room: handle(for: roomID),
                                   machine: RoomSessionMachine(loginTimeout: configuration.loginTimeout.milliseconds,
                                                               reconnectWindow: configuration.reconnectWindow.milliseconds),
                                   user: userBox(for: user), token: token, wantsWritable: writable)
            sessions[roomID] = record
        }
        record.loginWaiters.append(waiter)
        return record
    }

    func startLogout(_ roomID: String, continuation: CheckedContinuation<Void, any Error>) {
        guard let record = sessions[roomID], record.machine.isLoggedIn else {
            // No handle is made for a room never logged in to: it would stay
            // listed (allRooms, GET /v1/rooms) although it was never joined.
            let room = self.room(roomID)
            room?.update { $0.reason = .logoutFailed; $0.errorCode = .logoutNotLoggedIn }
            if let record = sessions[roomID] { metrics.reported(.logoutFailed, .logoutNotLoggedIn, record) }
            emit(.roomStateChanged(room: roomID, reason: .logoutFailed, errorCode: .logoutNotLoggedIn), room: room)
            return continuation.resume(throwing: RoomError(
                code: .logoutNotLoggedIn, message: "not logged in to \(roomID)", reason: .logoutFailed))
        }
        record.logoutWaiters.append(continuation)
        if case .logining(sent: true, _, _) = record.machine.state, let id = record.loginRequestID, withdrawQueued(id) {
            // The login never left the outbox (pacing): cancel it rather
            // than wait for a reply to a request the server will never see.
            record.machine.loginWithdrawn()
        }
        requestLogout(record)
    }

    // The driver: each machine input is called here, and each result
    // becomes its effects in the order the seed's callbacks expect. The
    // machine decides what happened; the order of reports, timers, requests
    // and the pending calls is decided in this one place.

    func beginLogin(_ record: SessionRecord) {
        switch record.machine.loginRequested(now: nowMonotonic, connectionReady: link.isReady) {
        case .begin(let deadline, let send):
            report(.logining, .success, record)
            setDeadline(deadline, record)
            if send { sendLogin(record, resume: false) }
        case .none:
            break
        }
    }

    func failImpossibleLogin(_ record: SessionRecord, code: ErrorCode, message: String) {
        switch record.machine.loginImpossible(code, message) {
        case .fail(let error):
            report(.logining, .success, record)
            report(.loginFailed, error.code, record)
            finishLogin(record, error)
        case .none:
            break
        }
    }

    func requestLogout(_ record: SessionRecord) {
        switch record.machine.logoutRequested(connectionReady: link.isReady) {
        case .sendLogout:
            enterPhase(.disconnecting, record)
            send(.logout, room: record.room.id, timeout: false) { [self] _ in
                // Whatever the answer (even 1002002), the server no longer has us.
                end(record.machine.logoutAnswered(), record)
            }
        case .logoutOffline:
            enterPhase(.disconnecting, record)
            end(.loggedOut(abandonedLogin: nil), record)
        case .end(let ending):
            end(ending, record)
        case .afterLogin, .none:
            break
        }
    }

    func sessionConnectionReady(_ record: SessionRecord) {
        switch record.machine.connectionReady() {
        case .sendLogin(let resume): sendLogin(record, resume: resume)
        case .none: break
        }
    }

    func sessionConnectionLost(_ record: SessionRecord, why: String) {
        switch record.machine.connectionLost(now: nowMonotonic) {
        case .reconnect(let deadline):
            report(.reconnecting, .connectionInterrupted, record)
            emit(.disconnectWithError(room: record.room.id, error: why), room: record.room)
            setDeadline(deadline, record)
        case .end(let ending):
            end(ending, record)
        case .none:
            break
        }
    }

    func sessionSucceeded(_ record: SessionRecord) {
        switch record.machine.loginSucceeded() {
        case .logined(let logoutNext):
            cancelDeadline(record)
            report(.logined, .success, record)
            finishLogin(record, nil)
            if logoutNext { requestLogout(record) }
        case .reconnected:
            cancelDeadline(record)
            report(.reconnected, .success, record)
        case .none:
            break
        }
    }

    func sessionFailed(_ record: SessionRecord, code: ErrorCode, message: String) {
        end(record.machine.loginFailed(code, message), record)
    }

    func sessionKicked(_ record: SessionRecord, code: ErrorCode, message: String) {
        end(record.machine.kicked(code, message), record)
    }

    func sessionDeadlinePassed(_ record: SessionRecord) {
        end(record.machine.deadlinePassed(), record)
    }

    private func end(_ action: RoomSessionMachine.EndAction, _ record: SessionRecord) {
        switch action {
        case .end(let ending): end(ending, record)
        case .endWithdrawingLogin(let ending):
            // Before the session's end is reported: a login its observers
            // start again must reach the server after this logout.
            withdrawLogin(record)
            end(ending, record)
        case .none: break
        }
    }

    /// Takes back the login of a session that stopped waiting for it: out
    /// of the outbox if it never left, else by a logout after it (whatever
    /// the answers, which nobody waits for: the server drops the session it
    /// may have made, or answers 1002002).
    private func withdrawLogin(_ record: SessionRecord) {
        defer { record.loginRequestID = nil }  // its answer, if one comes, is dropped
        if let id = record.loginRequestID, withdrawQueued(id) { return }
        guard link.isReady else { return }  // the connection went, and its sessions with it
        send(.logout, room: record.room.id, timeout: false) { _ in }
    }

    /// A session is over: its timer goes, the reports and callbacks follow
    /// in the seed's order, and its resume data is forgotten.
    private func end(_ ending: RoomSessionMachine.Ending, _ record: SessionRecord) {
        cancelDeadline(record)
        switch ending {
        case .failed(let reason, let code, let cause, let login):
            report(reason, code, cause: cause, record)
            if let login { finishLogin(record, login) }
        case .kicked(let code, let message):
            report(.kickOut, code, record)
            emit(.kickedWithReason(room: record.room.id, code: code, reason: message), room: record.room)
        case .loggedOut(let abandonedLogin):
            if let abandonedLogin { finishLogin(record, abandonedLogin) }
            report(.logout, .success, record)
            finishLogout(record)
        }
        forgetSession(record)
    }

    /// `onRoomStateChanged`, after `firePhaseChanged` when the reason moves
    /// the room to another phase.
    private func report(_ reason: RoomReason, _ code: ErrorCode, cause: ErrorCode? = nil, _ record: SessionRecord) {
        let room = record.room
        if let phase = reason.phase { enterPhase(phase, record) }
        room.update { $0.reason = reason; $0.errorCode = code }
        metrics.reported(reason, code, record)
        var extendedData: [String: JSON] = cause.map { ["cause": .int(Int64($0.rawValue))] } ?? [:]
        if reason == .logined || reason == .reconnected, !record.reportExtras.isEmpty {
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
    }

    private func enterPhase(_ phase: RoomPhase, _ record: SessionRecord) {
        guard phase != record.phase else { return }
        record.phase = phase
        let room = record.room
        room.update { $0.phase = phase }
        emit(.phaseChanged(room: room.id, phase: phase), room: room)
    }

    private func setDeadline(_ at: Int64, _ record: SessionRecord) {
        record.generation &+= 1
        deadlines.insert(at, record.room.id, generation: record.generation)
    }

    /// Older heap entries carry an older generation and are ignored when
    /// they fire (or dropped earlier, when they pile up).
    private func cancelDeadline(_ record: SessionRecord) {
        record.generation &+= 1
        deadlines.cancelled { [sessions] room, generation in sessions[room]?.generation == generation }
    }

    /// The pending `loginRoom` calls end (nil: success).
    private func finishLogin(_ record: SessionRecord, _ reported: RoomError?) {
        var fenced = reported
        if fenced?.code == .staleFence { fenced?.currentFence = record.refusedFence }
        let error = fenced
        let waiters = record.loginWaiters
        record.loginWaiters.removeAll()
        // Resume on the next loop turn: the rest of this reply's events
        // (beingAbleToCommitChange, ...) are raised first, so a caller
        // returning from loginRoom has seen every event of its login.
        loop.execute {
            for waiter in waiters { waiter.finish(error) }
        }
    }

    private func finishLogout(_ record: SessionRecord) {
        let waiters = record.logoutWaiters
        record.logoutWaiters.removeAll()
        loop.execute {
            for waiter in waiters { waiter.resume() }
        }
    }

    /// Forget resume data: the session is over.
    private func forgetSession(_ record: SessionRecord) {
        // A stored cursor whose resume never succeeded stays stored.
        if record.session != nil { cursorChanged(record) }
        record.session = nil
        record.restored = nil
        record.resuming = false
        updateConnectionWanted()
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
        let id = nextRequestID
        record.loginRequestID = id
        // The answer to a withdrawn login (it timed out) is not this
        // session's: the record may already wait for a newer login.
        send(.login(request), room: record.room.id, timeout: false, scannedLogin: { [self] reply in
            guard record.loginRequestID == id else { return }
            loginSucceeded(record, reply)
        }) { [self] result in
            guard record.loginRequestID == id else { return }
            loginAnswered(record, result)
        }
    }

    private func loginAnswered(_ record: SessionRecord, _ result: Result<[String: JSON], RoomError>) {
        switch result {
        case .success(let fields):
            let reply: LoginReply
            do {
                reply = try LoginReply(fields: fields)
            } catch {
                // The error's own code (1009001 or 1009006), not always 1009001.
                emit(.throwError(domain: "protocol", code: error.code, message: "bad login reply: \(error.message)"), room: nil)
                return sessionFailed(record, code: error.code, message: "bad login reply: \(error.message)")
            }
            loginSucceeded(record, reply)
        case .failure(let error):
            if error.code == .connectionInterrupted { return }  // the connection machine reports the loss
            if error.code == .rateLimited {
                // Not an answer about the login: try again shortly (the deadline still applies).
                let roomID = record.room.id
                let resume = record.resuming
                loop.schedule(after: .milliseconds(100)) { [weak self] in
                    guard let self, let record = sessions[roomID] else { return }
                    switch record.machine.state {
                    case .logining(true, _, _), .reconnecting(true, _): transmitLogin(record, resume: resume)
                    case .idle, .logining(false, _, _), .active, .reconnecting(false, _), .disconnecting: break
                    }
                }
                return
            }
            if error.code == .staleFence { record.refusedFence = error.currentFence }
            // A stale fence refuses a fresh login as well: no second try.
            if error.code != .staleFence, record.restored != nil, case .logining = record.machine.state {
                return abandonRestoredCursor(record, error)
            }
            sessionFailed(record, code: error.code, message: error.message)
        }
    }

    /// A login or resume the server accepted, its reply decoded (from its
    /// fields, or scanned: `LoginReply.scan`).
    private func loginSucceeded(_ record: SessionRecord, _ reply: LoginReply) {
        let room = record.room
        let firstLogin = !record.resuming
        // The session this login asked to resume, and the last seq applied before it.
        let resumedSession = record.resuming ? record.session : record.restored?.session
        let lastApplied = record.lastSeq
        let fromStore = record.startedFromStore
        // A resume that recovered everything in the same session changes
        // nothing the store holds (the missed events that follow save
        // their own seq): no write for it. After a roomd restart that is
        // every room at once (issue #26: 1,000,000 resumes).
        let cursorKept = reply.snapshot == nil && record.session == reply.session
            && room.memberId == reply.memberId && room.writable == reply.writable
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
        if !cursorKept { cursorChanged(record) }
        sessionSucceeded(record)
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
        // The first state the app sees must fit the custom type too, not
        // only later pushes (RoomHost+Pushes.swift).
        if let snapshot = reply.snapshot { checkGlobalState(snapshot.state.globalState, from: 0, record: record) }
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
