import Foundation
import RoomKitLoop
import RoomKitProtocol

/// Forwards the shared connection's events to the host (the host keeps no
/// strong reference cycle through its connection). Loop thread only.
final class HostConnectionDelegate: WebSocketDelegate {
    /// Weak: a host dropped without `shutdown()` must not be kept alive (or
    /// read after free) by its connection.
    weak var host: RoomHost?
    init(host: RoomHost) { self.host = host }

    func webSocketDidOpen(_ connection: WebSocketConnection) {
        guard let host else { return connection.abort() }
        host.transportDidOpen(connection)
    }

    func webSocket(_ connection: WebSocketConnection, didReceive message: WebSocketMessage) {
        host?.transportDidReceive(connection, message)
    }

    func webSocket(_ connection: WebSocketConnection, didCloseWith event: WebSocketCloseEvent) {
        // In words (`closed by the peer with 1001 (…)`): WebSocketCloseEvent.description.
        host?.transportDidClose(connection, why: "\(event)", kind: event.kind)
    }
}

extension RoomHost {
    // MARK: Connection machine

    func updateConnectionWanted() {
        let wanted = sessions.values.contains { $0.machine.isLoggedIn }
        guard wanted != link.isWanted else { return }
        if wanted {
            switch link.wanted() {
            case .connect: connect()
            case .none: break
            }
        } else {
            // Closed on purpose: not a loss to count.
            metrics.pendingLossKind = RoomHostMetrics.unwanted
            defer { metrics.pendingLossKind = nil }
            perform(link.unwanted())
        }
    }

    func linkOpened() {
        switch link.opened(now: nowMonotonic) {
        case .sendHello: sendHello()
        case .none: break
        }
    }

    /// The connection closed or failed. Only a close or a tick can start a
    /// backoff that needs the jitter; a draw from the system generator (a
    /// getrandom syscall) for every received message was about 5% of the
    /// engine's CPU under load.
    /// The link closed; `kind` is one word for the metrics' `reason` label.
    func linkClosed(_ why: String, kind: String) {
        metrics.pendingLossKind = kind
        defer { metrics.pendingLossKind = nil }
        perform(link.closed(why, now: nowMonotonic, random: Double.random(in: 0..<1, using: &random)))
    }

    func linkHelloAnswered(interval: Int64, timeout: Int64) {
        switch link.helloAnswered(interval: interval, timeout: timeout, now: nowMonotonic) {
        case .becameReady:
            logger.debug("connection ready", metadata: ["server": "\(url)"])
            metrics.connection(up: true)
            flushOutbox()
            for record in Array(sessions.values) { sessionConnectionReady(record) }
        case .none:
            break
        }
    }

    /// A gap between two runs of the engine's timer longer than this (ms)
    /// is a stall of the loop, not silence of the server.
    static let stallAllowance: Int64 = 1000

    private func linkTick() {
        let now = nowMonotonic
        if let last = lastTickAt, now - last > Self.stallAllowance {
            // The loop did not poll meanwhile: what the server sent is unread.
            link.loopStalled(for: now - last, now: now)
        }
        lastTickAt = now
        switch link.tick(now: now, random: Double.random(in: 0..<1, using: &random)) {
        case .connect:
            connect()
        case .sendPing:
            connection?.send(WebSocketFrame(bytes: JSON.object(["op": "ping", "t": .int(environment.wallMilliseconds)]).serialized()))
        case .drop(let drop):
            perform(.drop(drop))
        case .none:
            break
        }
    }

    private func perform(_ action: ConnectionMachine.DropAction) {
        switch action {
        case .drop(let drop):
            if drop.abort {
                logger.info("dropping connection", metadata: ["why": "\(drop.why)"])
                let dropped = connection
                connection = nil
                dropped?.abort()
            }
            metrics.connection(up: false)
            if drop.lost {
                logger.info("connection lost", metadata: ["why": "\(drop.why)"])
                let kind = metrics.pendingLossKind ?? "timeout"
                if kind != RoomHostMetrics.unwanted { metrics.connectionLost(kind: kind) }
                failPending(RoomError.interrupted("a request"))
                for record in Array(sessions.values) { sessionConnectionLost(record, why: drop.why) }
            } else {
                reportFailedAttempt(drop.why)
            }
        case .none:
            break
        }
    }

    /// A connection attempt failed (refused, timed out, DNS, a bad upgrade
    /// answer, no hello reply) and the machine is backing off: say so at
    /// warning, naming the URL, on the first failure and then once per
    /// backoff step (`Backoff.reportsFailure`), never once per retry.
    private func reportFailedAttempt(_ why: String) {
        guard case .backingOff(let until) = link.state else { return }  // unwanted: nothing to retry
        let failed = link.attempt - 1
        guard link.backoff.reportsFailure(ofAttempt: failed) else { return }
        logger.warning("cannot connect to the server; retrying", metadata: [
            "url": "\(url)", "error": "\(why)", "attempt": "\(failed + 1)",
            "retryInMs": "\(max(0, until - nowMonotonic))", "backoffCeilingMs": "\(link.backoff.ceiling(attempt: failed))"])
    }

    private func connect() {
        do {
            connection = try environment.connect(to: url, for: self)
        } catch {
            logger.error("cannot create the WebSocket client", metadata: ["error": "\(error)"])
            return linkClosed("\(error)", kind: "connect_failed")
        }
    }

    private func sendHello() {
        // The hello bypasses pacing and the outbox: nothing else may go first.
        let id = nextRequestID
        nextRequestID += 1
        pending[id] = PendingRequest(room: nil, deadline: nil) { [self] result in
            switch result {
            case .success(let fields):
                let heartbeat: (interval: Int64, timeout: Int64)
                do throws(ProtocolError) {
                    heartbeat = try HelloReply.heartbeat(fields: fields)
                } catch {
                    // A server's numbers are outside input too: out of range is
                    // a protocol error that drops this connection, not a trap.
                    logger.warning("bad hello reply", metadata: ["server": "\(url)", "error": "\(error)"])
                    emit(.throwError(domain: "protocol", code: error.code, message: "bad hello reply: \(error.message)"), room: nil)
                    linkClosed("bad hello reply: \(error)", kind: "bad_hello")
                    connection?.abort()
                    return
                }
                // Batches start with the message after this reply (PROTOCOL.md "Batched messages").
                receivesBatches = configuration.batchesMessages && HelloReply.confirmsBatching(fields: fields)
                adoptPacing(burst: fields["requestBurst"]?.doubleValue, perSecond: fields["requestsPerSecond"]?.doubleValue)
                linkHelloAnswered(interval: heartbeat.interval, timeout: heartbeat.timeout)
            case .failure(let error):
                if error.code != .connectionInterrupted {
                    linkClosed("hello refused: \(error)", kind: "hello_refused")
                    connection?.abort()
                    if error.code == .tokenInvalid, configuration.serviceToken != nil { serviceTokenRefused(error) }
                }
            }
        }
        var hello: [String: JSON] = ["op": "hello", "id": .int(id), "client": .string(configuration.clientName)]
        if let token = configuration.serviceToken { hello["token"] = .string(token) }
        if configuration.batchesMessages { hello["batch"] = true }
        receivesBatches = false
        // A new connection gets a fresh server-side bucket; the hello uses one token of it.
        pacing = (configuration.requestBurst, configuration.requestsPerSecond)
        bucket = pacing.burst - 1
        lastRefill = environment.nowMilliseconds
        connection?.send(WebSocketFrame(bytes: JSON.object(hello).serialized()))
    }

    /// roomd refused the hello's service token (1002033): no retry with the
    /// same token can succeed, so every login and resume waiting for the
    /// connection fails now with 1002033 and roomd's reason, instead of
    /// timing out later as 1002053 with no reason at all.
    private func serviceTokenRefused(_ error: RoomError) {
        let message = "roomd refused the service token: \(error.message)"
        logger.error("roomd refused the service token (1002033); check serviceToken or --service-token-file",
                     metadata: ["url": "\(url)", "reason": "\(error.message)"])
        for record in Array(sessions.values) {
            switch record.machine.state {
            case .logining, .reconnecting: sessionFailed(record, code: .tokenInvalid, message: message)
            case .idle, .active, .disconnecting: break
            }
        }
    }

    // MARK: Ticks

    func ensureTicker() {
        guard ticker == nil, !isShutDown else { return }
        do {
            ticker = try environment.scheduleRepeating(every: configuration.tick) { [weak self] in
                // A host dropped without shutdown() stops its timer here.
                guard let self else { return }
                tick()
            }
        } catch {
            logger.error("cannot start the engine timer", metadata: ["error": "\(error)"])
        }
    }

    private func tick() {
        let now = nowMonotonic
        linkTick()
        for (roomID, generation) in deadlines.popDue(now) {
            guard let record = sessions[roomID], record.generation == generation else { continue }
            sessionDeadlinePassed(record)
        }
        // Only requests with a deadline are looked at: a reconnect keeps
        // every session's resume pending (300,000), which have none, and
        // filtering them all on every tick (50 a second) is O(sessions).
        for id in Array(timedRequests) {
            guard let request = pending[id], let deadline = request.deadline else {
                timedRequests.remove(id)  // answered (or failed) since
                continue
            }
            if deadline <= UInt64(now) {
                timedRequests.remove(id)
                pending.removeValue(forKey: id)
                request.completion(.failure(RoomError(code: .timedOut, message: "no reply within \(configuration.requestTimeout)")))
            }
        }
        flushOutbox()
    }

}
