import CHiredis
import CRoomKitRedis
import Logging
@_spi(ForeignEventLib) import RoomKitLoop

/// A Redis connection on the event loop: hiredis's async API driven by its
/// libuv adapter on our `uv_loop_t`, with the deadlines hiredis does not
/// keep (connect and per-command timeouts, on a `LoopTimer`) and automatic
/// reconnection.
///
/// Loop thread only, every method. Replies arrive on the loop thread.
/// A command that times out fails with `.timedOut` and drops the connection
/// (replies are matched by order, so a late reply could not be trusted);
/// every other pending command then fails with `.disconnected`, and the
/// client reconnects after `reconnectDelay`.
///
/// Keep the client alive until `close()` (or the loop's shutdown, which
/// closes it): hiredis holds an unretained pointer to it.
public final class RedisClient: @unchecked Sendable {
    // @unchecked Sendable: every mutable field is touched on the loop thread
    // only (asserted); Sendable so loop tasks can capture it.

    /// Tunables, with the defaults the fleet uses.
    public struct Configuration: Sendable {
        /// A command without a reply after this fails and drops the connection.
        public var commandTimeout: Duration = .seconds(2)
        /// A connect attempt that has not completed after this is abandoned.
        public var connectTimeout: Duration = .seconds(2)
        /// Wait between a lost connection and the next attempt; it doubles
        /// with each attempt that fails in a row, up to `reconnectDelayCap`
        /// (RoomKitLoop's `Backoff`, the engine's too).
        public var reconnectDelay: Duration = .milliseconds(250)
        /// The longest wait between attempts (never below `reconnectDelay`).
        public var reconnectDelayCap: Duration = .seconds(2)
        /// The defaults above.
        public init() {}
    }

    /// Where the server is.
    public let endpoint: RedisEndpoint
    /// The deadlines in use.
    public let configuration: Configuration
    private let loop: EventLoop
    private let logger: Logger

    /// Where the connection is in its life. Loop thread only.
    enum Lifecycle {
        /// Not started.
        case idle
        /// A hiredis context connecting (and authenticating) since `since`.
        case connecting(UnsafeMutablePointer<redisAsyncContext>, since: UInt64)
        /// Ready for commands.
        case connected(UnsafeMutablePointer<redisAsyncContext>)
        /// No context; the next attempt is due at `at`.
        case waiting(until: UInt64)
        /// Closed for good.
        case closed
    }

    private var lifecycle: Lifecycle = .idle
    /// Attempts failed in a row since the last ready connection (the backoff's step).
    private var failedAttempts = 0
    private var backoff: Backoff {
        let first = Int64(Self.ms(configuration.reconnectDelay))
        return Backoff(first: first, cap: max(first, Int64(Self.ms(configuration.reconnectDelayCap))))
    }
    private var nextID: UInt = 1
    private var pending: [UInt: (deadline: UInt64, completion: (Result<RedisValue, RedisError>) -> Void)] = [:]
    /// SUBSCRIBE callbacks: hiredis calls each one again for every message
    /// of its channels, so they are not in `pending` (no deadline, no removal).
    private var subscriptions: [UInt: (RedisValue) -> Void] = [:]
    private var ticker: LoopTimer?
    private var shutdownHook: Int?
    /// Called on the loop thread each time a connection is ready (first and after reconnects).
    public var onConnect: (() -> Void)?
    /// Called on the loop thread each time a ready connection is lost (not
    /// on `close()`), with why; the client reconnects by itself.
    public var onDisconnect: ((RedisError) -> Void)?

    /// The live hiredis context, if any.
    private var context: UnsafeMutablePointer<redisAsyncContext>? {
        switch lifecycle {
        case .connecting(let context, _), .connected(let context): return context
        case .idle, .waiting, .closed: return nil
        }
    }

    private var closed: Bool {
        switch lifecycle {
        case .closed: return true
        case .idle, .connecting, .connected, .waiting: return false
        }
    }

    /// Creates a client; call `start()` on the loop thread to connect.
    public init(loop: EventLoop, endpoint: RedisEndpoint, configuration: Configuration = Configuration(), logger: Logger) {
        self.loop = loop
        self.endpoint = endpoint
        self.configuration = configuration
        self.logger = logger
    }

    /// Whether a connection is established. Loop thread only.
    public var isConnected: Bool {
        loop.assertInEventLoop()
        switch lifecycle {
        case .connected: return true
        case .idle, .connecting, .waiting, .closed: return false
        }
    }

    /// Connects (and keeps reconnecting until `close()`). Loop thread only.
    public func start() throws(LoopError) {
        loop.preconditionInEventLoop()
        guard ticker == nil, !closed else { return }
        ticker = try loop.scheduleTimer(after: .milliseconds(50), repeating: .milliseconds(50)) { [unowned self] _ in
            tick()
        }
        shutdownHook = loop.addShutdownHook { [unowned self] in close() }
        connect()
    }

    /// Sends one command (argv form: no protocol is written by hand).
    /// `completion` runs on the loop thread exactly once. Loop thread only.
    public func command(_ arguments: [String], completion: @escaping (Result<RedisValue, RedisError>) -> Void) {
        loop.preconditionInEventLoop()
        guard !closed else { return completion(.failure(RedisError(code: .closed, message: "client closed"))) }
        guard case .connected(let context) = lifecycle else {
            return completion(.failure(RedisError(code: .disconnected, message: "not connected to \(endpoint)")))
        }
        let id = nextID
        nextID += 1
        pending[id] = (loop.nowMilliseconds + Self.ms(configuration.commandTimeout), completion)
        let rc = Self.send(context, arguments, id: id)
        if rc != Int32(RK_REDIS_OK) {
            pending.removeValue(forKey: id)
            completion(.failure(RedisError(code: .disconnected, message: "redisAsyncCommandArgv failed")))
        }
    }

    /// Subscribes this connection to `channels` (it can then send no other
    /// command: Redis's subscriber mode). `onMessage` runs on the loop thread
    /// for each reply hiredis hands the subscription: the `subscribe`
    /// confirmations, then every `message`, as the array Redis sends
    /// (`["message", channel, payload]`). A lost connection ends the
    /// subscription (not renewed on reconnect). Returns false when not
    /// connected. Loop thread only.
    @discardableResult
    public func subscribe(_ channels: [String], onMessage: @escaping (RedisValue) -> Void) -> Bool {
        loop.preconditionInEventLoop()
        guard case .connected(let context) = lifecycle, !channels.isEmpty else { return false }
        let id = nextID
        nextID += 1
        subscriptions[id] = onMessage
        if Self.send(context, ["SUBSCRIBE"] + channels, id: id) != Int32(RK_REDIS_OK) {
            subscriptions.removeValue(forKey: id)
            return false
        }
        return true
    }

    /// Closes the connection; pending commands fail with `.closed`. Idempotent. Loop thread only.
    public func close() {
        loop.assertInEventLoop()
        guard !closed else { return }
        let ac = context
        lifecycle = .closed
        ticker?.cancel()
        ticker = nil
        if let hook = shutdownHook {
            shutdownHook = nil
            loop.removeShutdownHook(hook)
        }
        if let ac { redisAsyncFree(ac) }  // its callbacks see no context of ours
        failAll(RedisError(code: .closed, message: "client closed"))
    }

    // MARK: Connection

    private func connect() {
        switch lifecycle {
        case .idle, .waiting: break
        case .connecting, .connected, .closed: return
        }
        lifecycle = .idle
        guard let ac = redisAsyncConnect(endpoint.host, Int32(endpoint.port)) else {
            return scheduleReconnect("redisAsyncConnect returned nil")
        }
        if ac.pointee.err != 0 {
            let message = Self.errorText(ac)
            redisAsyncFree(ac)
            return scheduleReconnect(message)
        }
        guard rk_redis_attach_uv(ac, loop.uvLoopPointer) == Int32(RK_REDIS_OK) else {
            redisAsyncFree(ac)
            return scheduleReconnect("could not attach to the loop")
        }
        ac.pointee.data = Unmanaged.passUnretained(self).toOpaque()
        redisAsyncSetConnectCallback(ac) { ac, status in
            guard let ac, let data = ac.pointee.data else { return }
            Unmanaged<RedisClient>.fromOpaque(data).takeUnretainedValue().didConnect(ac, status: status)
        }
        redisAsyncSetDisconnectCallback(ac) { ac, status in
            guard let ac, let data = ac.pointee.data else { return }
            Unmanaged<RedisClient>.fromOpaque(data).takeUnretainedValue().didDisconnect(ac, status: status)
        }
        lifecycle = .connecting(ac, since: loop.nowMilliseconds)
    }

    private func didConnect(_ ac: UnsafePointer<redisAsyncContext>, status: Int32) {
        guard case .connecting(let context, _) = lifecycle, UnsafePointer(context) == ac else { return }
        if status != Int32(RK_REDIS_OK) {
            // hiredis frees the context after this callback.
            lifecycle = .idle
            return scheduleReconnect(Self.errorText(ac))
        }
        guard let password = endpoint.password else { return ready() }
        // AUTH first: nothing else may go before it (Redis answers NOAUTH).
        let id = nextID
        nextID += 1
        pending[id] = (loop.nowMilliseconds + Self.ms(configuration.commandTimeout), { [self] result in
            switch result {
            case .success(.error(let text)):
                if logsThisAttempt {
                    logger.error("redis AUTH refused; check the user and password", metadata: [
                        "redis": "\(endpoint)", "user": "\(endpoint.username ?? "default")", "error": "\(text)",
                        "attempt": "\(failedAttempts + 1)"])
                }
                // That line says why: no second one for the reconnect it leads to.
                drop(RedisError(code: .server, message: "AUTH refused by \(endpoint): \(text)"), quietly: true)
            case .success:
                ready()
            case .failure:
                break  // the connection is gone; it reconnects (and authenticates) again
            }
        })
        let rc = Self.send(context, ["AUTH"] + (endpoint.username.map { [$0] } ?? []) + [password], id: id)
        if rc != Int32(RK_REDIS_OK) {
            pending.removeValue(forKey: id)
            drop(RedisError(code: .disconnected, message: "redisAsyncCommandArgv failed for AUTH"))
        }
    }

    /// Connected (and authenticated): selects the database, then tells `onConnect`.
    private func ready() {
        guard case .connecting(let context, _) = lifecycle else { return }
        lifecycle = .connected(context)
        failedAttempts = 0
        logger.info("redis connected", metadata: ["redis": "\(endpoint)"])
        if endpoint.database != 0 {
            command(["SELECT", String(endpoint.database)]) { [logger] result in
                if case .success(.error(let text)) = result {
                    logger.error("redis SELECT failed", metadata: ["error": "\(text)"])
                }
            }
        }
        onConnect?()
    }

    private func didDisconnect(_ ac: UnsafePointer<redisAsyncContext>, status: Int32) {
        guard let context, UnsafePointer(context) == ac else { return }
        // hiredis frees the context after this callback; it already failed
        // the pending callbacks (with no reply), which removed them.
        let wasReady = isConnected
        lifecycle = .idle
        let error = RedisError(code: .disconnected, message: "connection to \(endpoint) lost")
        failAll(error)
        scheduleReconnect(Self.errorText(ac))
        if wasReady { onDisconnect?(error) }
    }

    /// Frees the context now (no waiting for replies, unlike redisAsyncDisconnect)
    /// and fails everything pending with `error`.
    private func drop(_ error: RedisError, quietly: Bool = false) {
        guard !closed else { return }
        let ac = context
        let wasReady = isConnected
        lifecycle = .idle
        if let ac { redisAsyncFree(ac) }  // its callbacks see no context of ours
        failAll(error)
        scheduleReconnect(error.message, quietly: quietly)
        if wasReady { onDisconnect?(error) }
    }

    /// Whether the current failed attempt is logged, by the engine's rule
    /// (`Backoff.reportsFailure`): the first of a streak, each one that moves
    /// the backoff up a step, then attempts 2^k once at the cap (a Redis down
    /// for an hour, or refusing the password, costs a few lines, not one or
    /// two per retry). Each line carries its `attempt`.
    private var logsThisAttempt: Bool { backoff.reportsFailure(ofAttempt: failedAttempts) }

    private func failAll(_ error: RedisError) {
        subscriptions = [:]
        let failed = pending
        pending = [:]
        for id in failed.keys.sorted() { failed[id]?.completion(.failure(error)) }
    }

    private func scheduleReconnect(_ why: String, quietly: Bool = false) {
        switch lifecycle {
        case .idle:
            if !quietly, logsThisAttempt {
                logger.warning("redis unavailable; reconnecting", metadata: [
                    "redis": "\(endpoint)", "error": "\(why)", "attempt": "\(failedAttempts + 1)"])
            }
            let delay = UInt64(backoff.ceiling(attempt: failedAttempts))
            failedAttempts += 1
            lifecycle = .waiting(until: loop.nowMilliseconds + delay)
        case .connecting, .connected, .waiting, .closed:
            break
        }
    }

    /// Deadlines hiredis does not keep: connect, commands, reconnect.
    private func tick() {
        let now = loop.nowMilliseconds
        if case .connecting(_, let since) = lifecycle, now - since >= Self.ms(configuration.connectTimeout) {
            return drop(RedisError(code: .timedOut, message: "connect to \(endpoint) timed out"))
        }
        if let expired = pending.first(where: { $0.value.deadline <= now }) {
            pending.removeValue(forKey: expired.key)
            expired.value.completion(.failure(RedisError(code: .timedOut, message: "no reply from \(endpoint)")))
            return drop(RedisError(code: .disconnected, message: "connection to \(endpoint) dropped after a timeout"))
        }
        if case .waiting(let until) = lifecycle, now >= until {
            connect()
        }
    }

    fileprivate func replied(id: UInt, reply: UnsafeMutableRawPointer?) {
        if let subscription = subscriptions[id] {
            guard let reply else { subscriptions.removeValue(forKey: id); return }
            return subscription(RedisValue(reply: reply.assumingMemoryBound(to: redisReply.self)))
        }
        guard let entry = pending.removeValue(forKey: id) else { return }
        guard let reply else {
            return entry.completion(.failure(RedisError(code: .disconnected, message: "connection to \(endpoint) lost")))
        }
        entry.completion(.success(RedisValue(reply: reply.assumingMemoryBound(to: redisReply.self))))
    }

    private static func send(_ ac: UnsafeMutablePointer<redisAsyncContext>, _ arguments: [String], id: UInt) -> Int32 {
        let buffers = arguments.map { Array($0.utf8) }
        var pointers: [UnsafePointer<CChar>?] = []
        var lengths: [Int] = []
        let storage = buffers.map { bytes -> UnsafeMutablePointer<CChar> in
            let pointer = UnsafeMutablePointer<CChar>.allocate(capacity: max(bytes.count, 1))
            bytes.withUnsafeBufferPointer { source in
                source.withMemoryRebound(to: CChar.self) { chars in
                    if let base = chars.baseAddress { pointer.update(from: base, count: bytes.count) }
                }
            }
            return pointer
        }
        defer { storage.forEach { $0.deallocate() } }
        for (index, pointer) in storage.enumerated() {
            pointers.append(UnsafePointer(pointer))
            lengths.append(buffers[index].count)
        }
        // hiredis formats the command into its own buffer before returning.
        return redisAsyncCommandArgv(ac, { ac, reply, privdata in
            guard let ac, let data = ac.pointee.data else { return }
            let client = Unmanaged<RedisClient>.fromOpaque(data).takeUnretainedValue()
            client.replied(id: UInt(bitPattern: privdata), reply: reply)
        }, UnsafeMutableRawPointer(bitPattern: id), Int32(arguments.count), &pointers, lengths)
    }

    private static func errorText(_ ac: UnsafePointer<redisAsyncContext>) -> String {
        guard let text = ac.pointee.errstr else { return "error \(ac.pointee.err)" }
        return String(cString: text)
    }

    static func ms(_ duration: Duration) -> UInt64 {
        let (seconds, attoseconds) = duration.components
        return UInt64(max(0, seconds)) * 1000 + UInt64(max(0, attoseconds) / 1_000_000_000_000_000)
    }
}
