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
        host?.transportDidClose(connection, why: "\(event)")
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
    func linkClosed(_ why: String) {
        perform(link.closed(why, now: nowMonotonic, random: Double.random(in: 0..<1, using: &random)))
    }

    func linkHelloAnswered(interval: Int64, timeout: Int64) {
        switch link.helloAnswered(interval: interval, timeout: timeout, now: nowMonotonic) {
        case .becameReady:
            logger.debug("connection ready", metadata: ["server": "\(url)"])
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
            if drop.lost {
                logger.info("connection lost", metadata: ["why": "\(drop.why)"])
                failPending(RoomError.interrupted("a request"))
                for record in Array(sessions.values) { sessionConnectionLost(record, why: drop.why) }
            }
        case .none:
            break
        }
    }

    private func connect() {
        do {
            connection = try environment.connect(to: url, for: self)
        } catch {
            logger.error("cannot create the WebSocket client", metadata: ["error": "\(error)"])
            return linkClosed("\(error)")
        }
    }

    private func sendHello() {
        // The hello bypasses pacing and the outbox: nothing else may go first.
        let id = nextRequestID
        nextRequestID += 1
        pending[id] = PendingRequest(room: nil, deadline: nil) { [self] result in
            switch result {
            case .success(let fields):
                let interval = fields["heartbeatInterval"]?.int64Value ?? 10_000
                let timeout = fields["heartbeatTimeout"]?.int64Value ?? 90_000
                adoptPacing(burst: fields["requestBurst"]?.doubleValue, perSecond: fields["requestsPerSecond"]?.doubleValue)
                linkHelloAnswered(interval: interval, timeout: timeout)
            case .failure(let error):
                if error.code != .connectionInterrupted {
                    linkClosed("hello refused: \(error)")
                    connection?.abort()
                }
            }
        }
        var hello: [String: JSON] = ["op": "hello", "id": .int(id), "client": .string(configuration.clientName)]
        if let token = configuration.serviceToken { hello["token"] = .string(token) }
        // A new connection gets a fresh server-side bucket; the hello uses one token of it.
        pacing = (configuration.requestBurst, configuration.requestsPerSecond)
        bucket = pacing.burst - 1
        lastRefill = environment.nowMilliseconds
        connection?.send(WebSocketFrame(bytes: JSON.object(hello).serialized()))
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
