import BenchSupport
import Foundation
import RoomKitLoop
import RoomKitProtocol

/// `roomkit-bench firehose`: an event source that is not the bottleneck, for
/// measuring a client engine on its own. A small server on RoomKitLoop that
/// speaks enough of the protocol for a bot (hello, login with an empty
/// snapshot, pong) and, once `--delay` seconds have passed without a new
/// login, pushes pre-encoded `magix` events round-robin into every room each
/// connection logged in to, as fast as the socket takes them (it keeps
/// `--queue` bytes queued per connection), for `--duration` seconds. Nothing
/// is stored; every frame is encoded before the run. Prints
/// `listening on 127.0.0.1:PORT` first, like roomd, then one JSON line when
/// the run ends. Benchmarks only; never shipped.
final class Firehose: WebServerDelegate, @unchecked Sendable {
    // @unchecked Sendable: every field is touched on the loop thread only.
    let loop: EventLoop
    let duration: Int64
    let delay: Int64
    let queueBytes: Int
    var server: WebServer?
    var streams: [FirehoseStream] = []
    var lastLogin: Int64 = 0
    var started: Int64 = 0
    var finished = false
    var timer: LoopTimer?
    let done: DispatchSemaphore

    init(loop: EventLoop, options: Options, done: DispatchSemaphore) {
        self.loop = loop
        duration = Int64(options.double("duration", 5) * 1e9)
        delay = Int64(options.double("delay", 1) * 1e9)
        queueBytes = options.int("queue", 1 << 20)
        self.done = done
    }

    func start(port: Int) throws {
        var configuration = WebServerConfiguration()
        configuration.port = port
        configuration.maxConnectionsPerAddress = 100_000
        configuration.maxConnections = 100_000
        let server = try WebServer(loop: loop, configuration: configuration, delegate: self)
        self.server = server
        FileHandle.standardOutput.write(Data("listening on 127.0.0.1:\(server.port)\n".utf8))
        timer = try loop.scheduleTimer(after: .milliseconds(1), repeating: .milliseconds(1)) { [self] _ in tick() }
    }

    func webServer(_ server: WebServer, didAccept connection: WebSocketConnection) {
        let stream = FirehoseStream(connection: connection, firehose: self)
        connection.delegate = stream
        streams.append(stream)
    }

    func webServer(_ server: WebServer, didReceive request: HTTPRequest, responder: HTTPResponder) {
        responder.respond(status: 404, contentType: "text/plain", text: "firehose: WebSocket only")
    }

    /// Every millisecond: start once logins have settled, top every queue up,
    /// stop after the duration.
    private func tick() {
        let now = monotonicNanos()
        if started == 0 {
            guard lastLogin > 0, now - lastLogin >= delay else { return }
            started = now
            for stream in streams { stream.prepare() }
        }
        if now - started >= duration {
            return finish()
        }
        for stream in streams { stream.fill(upTo: queueBytes) }
    }

    private func finish() {
        guard !finished else { return }
        finished = true
        timer?.cancel()
        let pushed = streams.reduce(0) { $0 + $1.pushed }
        let elapsed = Double(monotonicNanos() - started) / 1e9
        report(["pushed": .int(Int64(pushed)), "elapsed_s": .double(elapsed),
                "pushed_per_s": .double(Double(pushed) / max(elapsed, 1e-9))])
        done.signal()
    }
}

/// One client connection of the firehose: answers its requests, then pushes.
final class FirehoseStream: WebSocketDelegate, @unchecked Sendable {
    // @unchecked Sendable: loop thread only.
    let connection: WebSocketConnection
    unowned let firehose: Firehose
    var rooms: [String] = []
    /// Per room: the encoded push up to its `seq` value (keys are sorted, so
    /// `seq` is the last field), and the next seq.
    var prefixes: [[UInt8]] = []
    var seqs: [Int64] = []
    var next = 0
    var pushed = 0

    init(connection: WebSocketConnection, firehose: Firehose) {
        self.connection = connection
        self.firehose = firehose
    }

    func webSocket(_ connection: WebSocketConnection, didReceive message: WebSocketMessage) {
        guard let json = try? JSON.parse(message.bytes), case .success(let envelope) = ClientEnvelope.decode(json) else {
            return
        }
        let id = envelope.id ?? 0
        switch envelope.request {
        case .hello:
            let hello = HelloReply(connection: "c-firehose", serverTime: Int64(Date().timeIntervalSince1970 * 1000))
            send(ServerMessage.reply(id: id, hello: hello))
        case .ping(let t):
            send(ServerMessage.pong(t: t, serverTime: Int64(Date().timeIntervalSince1970 * 1000)))
        case .login:
            guard let room = envelope.room else { return }
            rooms.append(room)
            let reply = LoginReply(session: "s-\(room)", memberId: 1, seq: 0, recovered: false, writable: true,
                                   expiresAt: Int64(Date().timeIntervalSince1970 * 1000) + 3_600_000,
                                   snapshot: RoomSnapshot(state: .initial))
            send(ServerMessage.reply(id: id, login: reply))
            firehose.lastLogin = monotonicNanos()
        default:
            send(ServerMessage.reply(id: id, [:]))
        }
    }

    func webSocket(_ connection: WebSocketConnection, didCloseWith event: WebSocketCloseEvent) {}

    private func send(_ json: JSON) {
        _ = connection.send(WebSocketFrame(bytes: json.serialized()))
    }

    /// Encodes each room's magix push once (~100 bytes, `payload: {"t": …}`
    /// like the sender's); only the seq digits are appended per push, so
    /// every push has the next seq (clients drop a seq they have seen).
    func prepare() {
        for room in rooms {
            let push = ServerMessage.magix(room: room, seq: 0, from: 2, event: "bench",
                                           payload: ["t": .int(1_000_000_000_000)])
            var bytes = push.serialized(sortedKeys: true)
            let tail = Array(#""seq":0}"#.utf8)
            precondition(bytes.suffix(tail.count).elementsEqual(tail), "seq is the last key of a sorted push")
            bytes.removeLast(2)
            prefixes.append(bytes)
            seqs.append(0)
        }
    }

    /// Queues pushes round-robin over the rooms until `limit` bytes are waiting.
    func fill(upTo limit: Int) {
        guard !prefixes.isEmpty else { return }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(160)
        while connection.bufferedAmount < limit {
            seqs[next] += 1
            bytes.removeAll(keepingCapacity: true)
            bytes.append(contentsOf: prefixes[next])
            bytes.append(contentsOf: String(seqs[next]).utf8)
            bytes.append(UInt8(ascii: "}"))
            guard connection.send(WebSocketFrame(bytes: bytes)) else { return }
            next = next + 1 == prefixes.count ? 0 : next + 1
            pushed += 1
        }
    }
}

func runFirehose(_ options: Options) throws {
    let loop = try EventLoop(name: "firehose")
    let done = DispatchSemaphore(value: 0)
    let firehose = Firehose(loop: loop, options: options, done: done)
    try loop.runAndWait { try firehose.start(port: options.int("port", 0)) }
    done.wait()
    Thread.sleep(forTimeInterval: 0.5)
    try loop.runAndWait { firehose.server?.stop() }
    try loop.shutdown()
}
