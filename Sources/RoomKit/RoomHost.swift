import Dispatch
import Foundation
import CoreMetrics
import Logging
import RoomKitLoop
import RoomKitProtocol
import Synchronization

/// How a `RoomHost` connects and how patient it is. Durations are
/// configuration so tests can shrink the seed's values.
public struct RoomHostConfiguration: Sendable {
    /// `ws://` or `wss://` URL of the server's `/v1/rooms` endpoint.
    public var serverURL: String
    /// How long `loginRoom` waits for `LOGINED` before `LOGIN_FAILED` 1002053.
    public var loginTimeout: Duration = .seconds(30)
    /// How long a lost session keeps trying to resume before `RECONNECT_FAILED` 1002053.
    public var reconnectWindow: Duration = .seconds(1200)
    /// Reconnect backoff: full jitter, the first retry within `first`, capped at `cap`.
    public var backoffFirst: Duration = .seconds(1)
    public var backoffCap: Duration = .seconds(30)
    /// The connection's own reconnect backoff stops doubling here (when
    /// below `backoffCap`). It carries every room: a server back from a
    /// restart that took 10 s (restoring 1,000,000 sessions) was reached
    /// up to 16 s later at a 30 s cap, and every room waited with it (issue
    /// #26). A connect attempt costs one TCP handshake; the logins after it
    /// are paced by the server's advertised bucket, so retrying sooner
    /// storms nothing.
    public var connectionBackoffCap: Duration = .seconds(4)
    /// Silence after which the connection counts as dead. Default (nil):
    /// two of the server's ping intervals, at most its heartbeat timeout.
    public var livenessTimeout: Duration?
    /// How long an action (setGlobalState, ...) waits for its reply.
    public var requestTimeout: Duration = .seconds(15)
    /// Client-side pacing, a little under the server's per-connection limit
    /// (200 burst, 200/s), so a burst of logins or of resumes after a restart
    /// is admitted at a bounded rate and never trips 1009004. Used only when
    /// the server does not advertise the connection's bucket in its hello
    /// reply; one that does is paced at 95% of its refill rate and 75% of
    /// its burst (docs/PROTOCOL.md "Service connections").
    public var requestsPerSecond = 190.0
    public var requestBurst = 150.0
    /// Whether to pace to the bucket the server's hello advertises (true,
    /// the default) or always to `requestsPerSecond` / `requestBurst`.
    public var adoptsAdvertisedPacing = true
    /// A token with role `service`, sent in `hello`: the server then gives
    /// the connection its larger service request bucket, for a bot in
    /// thousands of rooms on one connection. nil: an ordinary connection.
    public var serviceToken: String?
    /// With a token provider: when the provider hands back the very token
    /// that is about to expire (a `tokenFile` nobody has updated yet), the
    /// host asks it again after this delay, doubling each time up to
    /// `backoffCap`, until it gets a new token or the old one expires. It
    /// never renews with the same token (issue 27 §4: that looped 1,100
    /// times in 5 s).
    public var tokenRecheckFirst: Duration = .seconds(1)
    /// Timer granularity of the engine (deadlines, pings, pacing).
    public var tick: Duration = .milliseconds(20)
    /// Sent in `hello`.
    public var clientName = "roomkit-swift/0.1"
    /// Whether the hello asks the server to batch its messages (true, the
    /// default): a server that confirms it may join the messages of one
    /// loop turn into one WebSocket message, which the host splits in
    /// place (docs/PROTOCOL.md "Batched messages", an extension). False:
    /// one WebSocket message per server message, as PROTOCOL.md §1 says.
    public var batchesMessages = true
    /// TLS and message-size settings of the WebSocket client.
    public var transport = WebSocketClientConfiguration()
    /// Keeps session cursors across restarts of the host. With a store,
    /// `loginRoom` first resumes the room's stored session (others see
    /// nothing when it is back within the server's heartbeat timeout), and
    /// the host saves every changed cursor once per loop turn. Nil (the
    /// default): every `loginRoom` of a new host is a fresh login.
    public var sessionStore: (any SessionStore)?
    /// Where the host reports its metrics (swift-metrics): sessions by
    /// reason, reconnects, events, dispatch latency (`RoomHostMetrics`).
    /// Nil (the default): the process-wide `MetricsSystem.factory`, a no-op
    /// until the app bootstraps a backend such as swift-prometheus.
    public var metricsFactory: (any MetricsFactory)?

    public init(serverURL: String) {
        self.serverURL = serverURL
    }
}

/// The engine a bot host embeds: many room sessions on one event loop, over
/// one connection per server that is re-established transparently.
///
/// Every method is safe from any thread; the engine itself runs on `loop`.
/// Callbacks are delivered on the loop thread unless `callbackQueue` is
/// given, in which case they are delivered on it, in order.
public final class RoomHost: @unchecked Sendable {
    // @unchecked Sendable: the mutable engine state below is touched on the
    // loop thread only; public methods hop there. `handles` has its own lock.

    public let loop: EventLoop
    public let configuration: RoomHostConfiguration
    let logger: Logger
    let url: WebSocketURL
    let tokenProvider: (any TokenProvider)?
    let callbackQueue: DispatchQueue?
    /// swift-metrics instruments (RoomHost+Metrics.swift).
    let metrics: RoomHostMetrics
    /// Observers and event streams.
    let broadcaster = EventBroadcaster<RoomEvent>()
    /// Delegates, common callbacks and the URL chain (RoomHost+Callbacks.swift).
    let callbacks = HostCallbacks()
    private let handles = LockedValue<[String: Room]>([:])
    /// Checks that a globalState decodes as the registered type (name, check).
    private let customGlobalState = LockedValue<(name: String, check: @Sendable (JSON) throws -> Void)?>(nil)

    /// Time, timers and connections (EngineEnvironment.swift).
    let environment: any EngineEnvironment
    /// Everything the engine mutates while it runs (RoomHost+State.swift),
    /// checked on every access to be on the loop thread.
    let engine: LoopBound<EngineState>

    /// Creates a host. Nothing connects until the first `loginRoom`.
    public convenience init(loop: EventLoop, configuration: RoomHostConfiguration, logger: Logger = Logger(label: "roomkit.host"),
                            tokenProvider: (any TokenProvider)? = nil, callbackQueue: DispatchQueue? = nil) throws {
        try self.init(loop: loop, configuration: configuration, logger: logger, tokenProvider: tokenProvider,
                      callbackQueue: callbackQueue, environment: LiveEnvironment(loop: loop, transport: configuration.transport))
    }

    /// A host on `environment`'s clock, timers and connections (the
    /// simulator's virtual ones; see RoomKitSimulator).
    package init(loop: EventLoop, configuration: RoomHostConfiguration, logger: Logger = Logger(label: "roomkit.host"),
                 tokenProvider: (any TokenProvider)? = nil, callbackQueue: DispatchQueue? = nil,
                 environment: any EngineEnvironment) throws {
        self.loop = loop
        self.environment = environment
        self.configuration = configuration
        self.logger = logger
        self.tokenProvider = tokenProvider
        self.callbackQueue = callbackQueue
        url = try WebSocketURL(configuration.serverURL)
        let link = ConnectionMachine(
            backoff: .init(first: configuration.backoffFirst.milliseconds,
                           cap: min(configuration.backoffCap, configuration.connectionBackoffCap).milliseconds),
            livenessOverride: configuration.livenessTimeout?.milliseconds)
        engine = LoopBound(EngineState(link: link, pacing: (configuration.requestBurst, configuration.requestsPerSecond),
                                        jitterSeed: environment.jitterSeed), loop: loop)
        metrics = RoomHostMetrics(factory: configuration.metricsFactory ?? MetricsSystem.factory, server: configuration.serverURL)
    }

    /// Registers the custom global state type (the seed's
    /// `setCustomGlobalStateClass`): another member's change whose
    /// `globalState` does not decode as `type` raises
    /// `fireCatchErrorWhenAppendFrame` with that member's ID, and so does a
    /// login or resume whose snapshot does not (member ID 0): the first
    /// state the app sees is checked too. The session goes on.
    public func registerGlobalStateType<T: Decodable & SendableMetatype>(_ type: T.Type) {
        let check: @Sendable (JSON) throws -> Void = { json in _ = try json.decode(T.self) }
        customGlobalState.withLock { $0 = ("\(type)", check) }
    }

    var globalStateType: (name: String, check: @Sendable (JSON) throws -> Void)? { customGlobalState.current }

    /// Every event, in the order the engine raised it, as an `AsyncSequence`.
    /// Each call makes a new subscription that keeps the newest `limit` events;
    /// it ends at `shutdown()` (at once when subscribed after it).
    public func events(bufferingNewest limit: Int = 100_000) -> AsyncStream<RoomEvent> {
        broadcaster.stream(bufferingNewest: limit)
    }

    /// Calls `observer` on the loop thread for every event, synchronously and
    /// in order (for event logs and plugin dispatch), before the streams and
    /// delegates hear it. Cancel the token to remove the observer.
    @discardableResult
    public func addObserver(_ observer: @escaping @Sendable (RoomEvent) -> Void) -> RegistrationToken {
        broadcaster.addObserver(observer)
    }

    /// Like `addObserver`, with the event's one encoding (`EventEncoding`):
    /// every encoded observer of one event gets the same encoding, whose
    /// bytes are written once, by the first sink that reads them (the event
    /// log, the dashboard's stream, plugins), or never. Loop thread, in order
    /// with the other observers.
    @discardableResult
    public func addEncodedObserver(_ observer: @escaping @Sendable (RoomEvent, EventEncoding) -> Void) -> RegistrationToken {
        broadcaster.addEncodedObserver(observer)
    }

    /// Whether the event being raised belongs to a resume's replay: it
    /// happened while the session was away (PROTOCOL.md §6). Loop thread
    /// only, meaningful inside an observer (`addObserver`).
    public var isRaisingReplay: Bool {
        loop.preconditionInEventLoop()
        return applyingReplay
    }

    /// The handle of a room this host has seen, if any.
    public func room(_ id: String) -> Room? {
        handles.withLock { $0[id] }
    }

    /// Every room handle this host has seen.
    public var allRooms: [Room] {
        handles.withLock { Array($0.values) }
    }

    func handle(for id: String) -> Room {
        handles.withLock { rooms in
            if let room = rooms[id] { return room }
            let room = Room(id: id, host: self)
            rooms[id] = room
            return room
        }
    }

    // MARK: Room lifecycle

    /// Logs in to `roomID` and returns once `LOGINED`. Reports `LOGINING`
    /// first; throws a `RoomError` with reason `LOGIN_FAILED` (1002033 bad
    /// token, 1002053 timeout, or the server's code). With no `token`,
    /// `tokenProvider` (else the host's token provider) supplies one; when
    /// none can be had, the room reports `LOGINING` then `LOGIN_FAILED` 1002033.
    /// A `fence` (fleets, docs/FLEET.md) goes with this login and every
    /// resume of its session; a stale one fails with 1009008 and the server's
    /// fence in `RoomError.currentFence`.
    @discardableResult
    public func loginRoom(_ roomID: String, user: LoginUser, token: String? = nil, tokenProvider: (any TokenProvider)? = nil,
                          writable: Bool = true, fence: Int64? = nil, delegate: (any RoomDelegate)? = nil) async throws -> Room {
        guard RoomID.isValid(roomID) else {
            throw RoomError(code: .invalidArgument, message: "invalid room ID '\(roomID)'", reason: .loginFailed)
        }
        let resolved: Result<String, RoomError>
        do {
            resolved = .success(try await resolveToken(token, room: roomID, user: user.id, provider: tokenProvider))
        } catch {
            resolved = .failure(error)
        }
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            let accepted = loop.execute { [self] in
                // Made on the loop thread, with the session's other long-lived
                // blocks: made on the caller's thread, 100,000 rooms spread over
                // that many more malloc arenas (about 150 bytes of RSS a room).
                let room = handle(for: roomID)
                if let delegate { room.delegate = delegate }
                switch resolved {
                case .success(let token):
                    startLogin(roomID, user: user, token: token, writable: writable, fence: fence, waiter: .call(continuation))
                case .failure(let error):
                    startImpossibleLogin(roomID, user: user, writable: writable, error: error, waiter: .call(continuation))
                }
            }
            if !accepted { continuation.resume(throwing: RoomError(code: .internalError, message: "host is shut down")) }
        }
        return handle(for: roomID)
    }

    /// Logs in to each of `rooms` as ``loginRoom(_:user:token:tokenProvider:writable:fence:delegate:)``
    /// would (a token from `tokenProvider`, or the host's), and returns each
    /// room's outcome in order, nil when it logged in, once every room has
    /// one. For hosts that join many rooms at once: each `loginRoom` call
    /// is a task, a continuation and a hop to the loop of its own, and
    /// roombot joining a million rooms spent a fifth of its CPU on those.
    /// The rooms' handles are ``room(_:)``'s.
    public func loginRooms(_ rooms: [String], user: LoginUser, tokenProvider: (any TokenProvider)? = nil,
                           writable: Bool = true) async -> [RoomError?] {
        // Each room: its token, or why its login fails on the loop (as
        // loginRoom's: LOGIN_FAILED), or nil for an invalid ID (refused here).
        var starts = [Result<String, RoomError>?](repeating: nil, count: rooms.count)
        var outcomes = [RoomError?](repeating: nil, count: rooms.count)
        for (index, roomID) in rooms.enumerated() {
            guard RoomID.isValid(roomID) else {
                outcomes[index] = RoomError(code: .invalidArgument, message: "invalid room ID '\(roomID)'", reason: .loginFailed)
                continue
            }
            do {
                starts[index] = .success(try await resolveToken(nil, room: roomID, user: user.id, provider: tokenProvider))
            } catch {
                starts[index] = .failure(error)
            }
        }
        let refused = outcomes
        let logins = starts
        return await withCheckedContinuation { (continuation: CheckedContinuation<[RoomError?], Never>) in
            let accepted = loop.execute { [self] in
                let batch = LoginBatch(outcomes: refused, remaining: logins.count { $0 != nil }, continuation: continuation)
                for (index, start) in logins.enumerated() {
                    let roomID = rooms[index]
                    switch start {
                    case .success(let token)?:
                        _ = handle(for: roomID)
                        startLogin(roomID, user: user, token: token, writable: writable, waiter: .batch(batch, index: index))
                    case .failure(let error)?:
                        _ = handle(for: roomID)
                        startImpossibleLogin(roomID, user: user, writable: writable, error: error, waiter: .batch(batch, index: index))
                    case nil:
                        break
                    }
                }
            }
            if !accepted {
                continuation.resume(returning: rooms.map { _ in RoomError(code: .internalError, message: "host is shut down") })
            }
        }
    }

    /// Logs out of `roomID`: `LOGOUT` (phase `disconnecting`, then
    /// `disconnected`), or `LOGOUT_FAILED` 1002002 (thrown) when not logged in.
    public func logoutRoom(_ roomID: String) async throws {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            let accepted = loop.execute { [self] in startLogout(roomID, continuation: continuation) }
            if !accepted { continuation.resume(throwing: RoomError(code: .internalError, message: "host is shut down")) }
        }
    }

    /// Logs out of every room; each reaches `LOGOUT`. Returns their IDs.
    @discardableResult
    public func logoutRoom() async -> [String] {
        let rooms = (try? await loop.submit { [self] in
            sessions.values.filter { $0.machine.isLoggedIn }.map(\.room.id)
        }) ?? []
        await withTaskGroup(of: Void.self) { group in
            for room in rooms {
                group.addTask { try? await self.logoutRoom(room) }
            }
        }
        return rooms.sorted()
    }

    /// Leaves `from` (`LOGOUT`) and logs in to `to` as the same user
    /// (`LOGINING`, then `LOGINED` or `LOGIN_FAILED`).
    ///
    /// What can be known locally is checked before `from` is left, and
    /// throws with `from` untouched: `from` not logged in (`LOGOUT_FAILED`
    /// 1002002, reported), an invalid target ID (1009006), a target already
    /// logged in (1009007), no token for the target (1002033). When the
    /// target's login itself fails, `from` stays left, as in the seed.
    @discardableResult
    public func switchRoom(from: String, to: String, token: String? = nil, tokenProvider: (any TokenProvider)? = nil,
                           delegate: (any RoomDelegate)? = nil) async throws -> Room {
        let (user, targetJoined) = try await loop.submit { [self] in
            (sessions[from].flatMap { $0.machine.isLoggedIn ? $0.user : nil }, sessions[to]?.machine.isLoggedIn ?? false)
        }
        guard let user else {
            try await logoutRoom(from)  // reports LOGOUT_FAILED 1002002 and throws
            throw RoomError(code: .logoutNotLoggedIn, message: "switchRoom: not logged in to \(from)", reason: .logoutFailed)
        }
        guard RoomID.isValid(to) else {
            throw RoomError(code: .invalidArgument, message: "switchRoom: invalid room ID '\(to)'", reason: .loginFailed)
        }
        guard !targetJoined else {
            throw RoomError(code: .alreadyLoggedIn, message: "switchRoom: already logged in to \(to)", reason: .loginFailed)
        }
        let token = try await resolveToken(token, room: to, user: user.id, provider: tokenProvider)
        try await logoutRoom(from)
        return try await loginRoom(to, user: user, token: token, delegate: delegate ?? room(from)?.delegate)
    }

    /// Logs out of every room, closes the connection, and ends every event stream.
    public func shutdown() async {
        await logoutRoom()
        _ = try? await loop.submit { [self] in
            isShutDown = true
            ticker?.cancel()
            ticker = nil
            connection?.close(code: 1000, reason: "host shutting down", discardQueued: false)
            environment.shutdown()
        }
        broadcaster.finish()
    }

    private func resolveToken(_ token: String?, room: String, user: String,
                              provider: (any TokenProvider)?) async throws(RoomError) -> String {
        if let token { return token }
        guard let tokenProvider = provider ?? tokenProvider else {
            throw RoomError(code: .tokenInvalid, message: "no token given and no token provider", reason: .loginFailed)
        }
        do {
            return try await tokenProvider.token(room: room, user: user)
        } catch {
            throw RoomError(code: .tokenInvalid, message: "token provider failed: \(error)", reason: .loginFailed)
        }
    }

    // MARK: Requests

    /// Sends an action for a logged-in room; returns the event's seq.
    func request(_ request: ClientRequest, room: String) async throws -> Int64 {
        let fields = try await requestFields(request, room: room)
        return fields["seq"]?.int64Value ?? 0
    }

    /// Sends an action for a logged-in room; returns the reply's fields.
    func requestFields(_ request: ClientRequest, room: String) async throws -> [String: JSON] {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<[String: JSON], any Error>) in
            let accepted = loop.execute { [self] in
                guard let record = sessions[room], record.machine.state == .active else {
                    return continuation.resume(throwing: RoomError(code: .roomNotLoggedIn, message: "not logged in to \(room)"))
                }
                guard link.isReady else {
                    return continuation.resume(throwing: RoomError(code: .connectionInterrupted, message: "\(room) is reconnecting"))
                }
                send(request, room: room, timeout: true) { [self] result in
                    switch result {
                    case .success(let fields):
                        applyOwn(request, reply: fields, record: record)
                        continuation.resume(returning: fields)
                    case .failure(let error):
                        continuation.resume(throwing: error)
                    }
                }
            }
            if !accepted { continuation.resume(throwing: RoomError(code: .internalError, message: "host is shut down")) }
        }
    }
}

/// One in-flight request. Loop thread only.
struct PendingRequest {
    let room: String?
    let deadline: UInt64?
    let completion: (Result<[String: JSON], RoomError>) -> Void
    /// A login's success read by `LoginReply.scan` (no JSON tree of the
    /// reply); every other answer still goes to `completion`.
    var scannedLogin: ((LoginReply) -> Void)?
}


extension RoomHost {
    /// Drops the shared connection as a network failure would (no close
    /// handshake). Logged-in rooms go `RECONNECTING` and resume on their own.
    /// For demos, tours and tests of reconnect handling.
    public func simulateConnectionLoss() {
        loop.execute { [self] in
            guard let connection else { return }
            logger.info("simulating a connection loss")
            connection.abort()
        }
    }
}
