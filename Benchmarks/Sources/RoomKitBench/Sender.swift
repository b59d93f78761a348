import BenchSupport
import Foundation
import RoomKitLoop
import RoomKitProtocol

/// `roomkit-bench send`: the event source of the throughput and fan-out
/// workloads, the same process for RoomKit and for the Python peer. One raw
/// connection (no engine) logs in to the rooms as user `sender`, then sends
/// `magix` requests round-robin, each stamped with CLOCK_MONOTONIC in its
/// payload: either as fast as roomd answers (`--window` requests in flight)
/// or at `--rate` requests per second.
final class Sender: WebSocketDelegate, @unchecked Sendable {
    // @unchecked Sendable: every field is touched on the loop thread only.
    let loop: EventLoop
    let rooms: [String]
    let token: String
    let window: Int
    let rate: Double
    let duration: Int64
    let done: DispatchSemaphore
    var connection: WebSocketConnection?
    var client: WebSocketClient?
    var nextID: Int64 = 1
    var pendingLogins = 0
    var started: Int64 = 0
    var sent = 0
    var acked = 0
    var refused = 0
    var inFlight = 0
    var finished = false
    var pacer: LoopTimer?

    init(loop: EventLoop, options: Options, done: DispatchSemaphore) {
        self.loop = loop
        rooms = (0..<options.int("rooms", 1)).map { "\(options.string("prefix", "room"))-\($0)" }
        token = benchToken(secret: options.string("secret", "bench-secret"), user: "sender")
        window = options.int("window", 1000)
        rate = options.double("rate", 0)
        duration = Int64(options.double("duration", 5) * 1e9)
        self.done = done
    }

    func start(url: String) throws {
        let client = try WebSocketClient(loop: loop)
        self.client = client
        connection = client.connect(to: try WebSocketURL(url), subprotocol: "room.v1", delegate: self)
    }

    private func send(_ text: String) {
        _ = connection?.send(WebSocketFrame(bytes: Array(text.utf8)))
    }

    private func request(_ body: String) {
        send("{\"op\":" + body + ",\"id\":\(nextID)}")
        nextID += 1
    }

    func webSocketDidOpen(_ connection: WebSocketConnection) {
        send("{\"op\":\"hello\",\"id\":\(nextID),\"client\":\"roomkit-bench-sender\"}")
        nextID += 1
    }

    func webSocket(_ connection: WebSocketConnection, didReceive message: WebSocketMessage) {
        guard let json = try? JSON.parse(message.bytes), json["op"]?.stringValue == "reply" else { return }
        let ok = json["ok"]?.boolValue == true
        if started == 0 {
            guard ok else {
                note("sender: refused during setup: \(json.jsonString)")
                return finish()
            }
            if pendingLogins == 0 && json["id"]?.int64Value == 1 {
                pendingLogins = rooms.count
                for room in rooms {
                    request("\"login\",\"room\":\"\(room)\",\"token\":\"\(token)\",\"user\":{\"id\":\"sender\"}")
                }
                return
            }
            pendingLogins -= 1
            if pendingLogins == 0 { begin() }
            return
        }
        inFlight -= 1
        if ok { acked += 1 } else { refused += 1 }
        if rate == 0 { fill() }
    }

    func webSocket(_ connection: WebSocketConnection, didCloseWith event: WebSocketCloseEvent) {
        note("sender: connection closed: \(event)")
        finish()
    }

    private func begin() {
        started = monotonicNanos()
        if rate == 0 {
            fill()
        } else {
            pacer = try? loop.scheduleTimer(after: .milliseconds(1), repeating: .milliseconds(1)) { [self] _ in pace() }
        }
    }

    private func magix() {
        let room = rooms[sent % rooms.count]
        request("\"magix\",\"room\":\"\(room)\",\"event\":\"bench\",\"payload\":{\"t\":\(monotonicNanos())}")
        sent += 1
        inFlight += 1
    }

    /// Flood mode: keep `window` requests in flight until the duration ends.
    private func fill() {
        if monotonicNanos() - started >= duration {
            if inFlight == 0 { finish() }
            return
        }
        while inFlight < window { magix() }
    }

    /// Rate mode: send what is due every millisecond.
    private func pace() {
        let elapsed = monotonicNanos() - started
        if elapsed >= duration {
            pacer?.cancel()
            pacer = nil
            loop.schedule(after: .seconds(1)) { [self] in finish() }
            return
        }
        let due = Int(Double(elapsed) / 1e9 * rate)
        while sent < due { magix() }
    }

    private func finish() {
        guard !finished else { return }
        finished = true
        let elapsed = Double(monotonicNanos() - started) / 1e9
        report(["sent": .int(Int64(sent)), "acked": .int(Int64(acked)), "refused": .int(Int64(refused)),
                "elapsed_s": .double(elapsed), "events_per_s": .double(Double(acked) / max(elapsed, 1e-9))])
        connection?.close()
        done.signal()
    }
}

func runSender(_ options: Options) throws {
    let loop = try EventLoop(name: "sender")
    let done = DispatchSemaphore(value: 0)
    let sender = Sender(loop: loop, options: options, done: done)
    try loop.runAndWait { try sender.start(url: options.string("url", "ws://127.0.0.1:7700/v1/rooms")) }
    done.wait()
    Thread.sleep(forTimeInterval: 0.1)
    try loop.shutdown()
}
