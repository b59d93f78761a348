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
        guard let host, connection === host.connection else { return connection.abort() }
        host.drive(.opened)
    }

    func webSocket(_ connection: WebSocketConnection, didReceive message: WebSocketMessage) {
        guard let host, connection === host.connection else { return }
        host.received(message)
    }

    func webSocket(_ connection: WebSocketConnection, didCloseWith event: WebSocketCloseEvent) {
        guard let host, connection === host.connection else { return }
        host.connection = nil
        host.drive(.closed("\(event)"))
    }
}

extension RoomHost {
    // MARK: Connection machine

    func updateConnectionWanted() {
        let wanted = sessions.values.contains { $0.machine.isLoggedIn }
        if wanted != link.wanted { drive(wanted ? .wanted : .unwanted) }
    }

    func drive(_ input: ConnectionMachine.Input) {
        // Only a tick or a close can start a backoff that needs the jitter; a
        // draw from the system generator (a getrandom syscall) for every
        // received message was about 5% of the engine's CPU under load.
        let jitter: Double
        switch input {
        case .tick, .closed: jitter = Double.random(in: 0..<1, using: &random)
        default: jitter = 0
        }
        let actions = link.handle(input, now: nowMonotonic, random: jitter)
        for action in actions {
            switch action {
            case .connect:
                connect()
            case .sendHello:
                sendHello()
            case .sendPing:
                connection?.send(WebSocketFrame(bytes: JSON.object(["op": "ping", "t": .int(wallMilliseconds())]).serialized()))
            case .abort(let why):
                logger.info("dropping connection", metadata: ["why": "\(why)"])
                let dropped = connection
                connection = nil
                dropped?.abort()
            case .becameReady:
                logger.debug("connection ready", metadata: ["server": "\(url)"])
                flushOutbox()
                for record in Array(sessions.values) { run(.connectionReady, on: record) }
            case .lost(let why):
                logger.info("connection lost", metadata: ["why": "\(why)"])
                failPending(RoomError.interrupted("a request"))
                for record in Array(sessions.values) { run(.connectionLost(why), on: record) }
            }
        }
    }

    private func connect() {
        do {
            if client == nil {
                // One long-lived client per loop (see WebSocketClient.shared): hosts
                // come and go without destroying lws contexts.
                client = try WebSocketClient.shared(on: loop, configuration: configuration.transport)
            }
        } catch {
            logger.error("cannot create the WebSocket client", metadata: ["error": "\(error)"])
            return drive(.closed("\(error)"))
        }
        connection = client!.connect(to: url, subprotocol: "room.v1", delegate: HostConnectionDelegate(host: self))
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
                drive(.helloAnswered(interval: interval, timeout: timeout))
            case .failure(let error):
                if error.code != .connectionInterrupted {
                    drive(.closed("hello refused: \(error)"))
                    connection?.abort()
                }
            }
        }
        var hello: [String: JSON] = ["op": "hello", "id": .int(id), "client": .string(configuration.clientName)]
        if let token = configuration.serviceToken { hello["token"] = .string(token) }
        // A new connection gets a fresh server-side bucket; the hello uses one token of it.
        pacing = (configuration.requestBurst, configuration.requestsPerSecond)
        bucket = pacing.burst - 1
        lastRefill = loop.nowMilliseconds
        connection?.send(WebSocketFrame(bytes: JSON.object(hello).serialized()))
    }

    // MARK: Ticks

    func ensureTicker() {
        guard ticker == nil, !isShutDown else { return }
        do {
            ticker = try loop.scheduleTimer(after: configuration.tick, repeating: configuration.tick) { [weak self] timer in
                // A host dropped without shutdown() stops its timer here.
                guard let self else { return timer.cancel() }
                tick()
            }
        } catch {
            logger.error("cannot start the engine timer", metadata: ["error": "\(error)"])
        }
    }

    private func tick() {
        let now = nowMonotonic
        drive(.tick)
        for (roomID, generation) in deadlines.popDue(now) {
            guard let record = sessions[roomID], record.generation == generation else { continue }
            run(.deadlinePassed, on: record)
        }
        if !pending.isEmpty {
            let expired = pending.filter { $0.value.deadline.map { $0 <= UInt64(now) } ?? false }
            for (id, request) in expired {
                pending.removeValue(forKey: id)
                request.completion(.failure(RoomError(code: .timedOut, message: "no reply within \(configuration.requestTimeout)")))
            }
        }
        flushOutbox()
    }

}
