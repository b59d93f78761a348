import BenchSupport
import Foundation
import RoomKitLoop
import RoomKitProtocol

/// `roomkit-bench sink`: roomd's side of the fan-out workload on its own.
/// `--connections` raw WebSocket connections (no engine: frames are counted,
/// not parsed) log in to the same `--rooms` rooms, one member each, so the
/// deliveries/s they see is what roomd sends rather than what a client
/// engine can digest. Same stdin commands as `client` (mark, report, quit).
/// `--batch 1`: the hello asks for batched messages (docs/PROTOCOL.md
/// "Batched messages"), and each message counts as the pushes it holds (one
/// more than its line feeds: still counted, not parsed).
final class SinkConnection: WebSocketDelegate, @unchecked Sendable {
    // @unchecked Sendable: loop thread only.
    let rooms: [String]
    let user: String
    let token: String
    let tally: SinkTally
    let batch: Bool
    var connection: WebSocketConnection?
    var pendingLogins = -1
    var nextID: Int64 = 1

    init(rooms: [String], user: String, secret: String, tally: SinkTally, batch: Bool) {
        self.batch = batch
        self.rooms = rooms
        self.user = user
        token = benchToken(secret: secret, user: user)
        self.tally = tally
    }

    private func send(_ text: String) {
        _ = connection?.send(WebSocketFrame(bytes: Array(text.utf8)))
        nextID += 1
    }

    func webSocketDidOpen(_ connection: WebSocketConnection) {
        send("{\"op\":\"hello\",\"id\":\(nextID),\"client\":\"roomkit-bench-sink\"\(batch ? ",\"batch\":true" : "")}")
    }

    func webSocket(_ connection: WebSocketConnection, didReceive message: WebSocketMessage) {
        if pendingLogins == 0 {
            tally.frames += batch ? MessageBatch.count(in: message.bytes) : 1
            let now = monotonicNanos()
            if tally.first == 0 { tally.first = now }
            tally.last = now
            return
        }
        if pendingLogins < 0 {
            pendingLogins = rooms.count
            for room in rooms {
                send("{\"op\":\"login\",\"id\":\(nextID),\"room\":\"\(room)\",\"token\":\"\(token)\",\"user\":{\"id\":\"\(user)\"}}")
            }
            return
        }
        // Replies to the logins (pushes of other members' logins may mix in: not counted).
        let replies = batch ? (message.text ?? "").components(separatedBy: "\"reply\"").count - 1
            : (message.bytes.starts(with: Array("{\"op\":\"reply\"".utf8)) || message.text?.contains("\"reply\"") == true ? 1 : 0)
        if replies > 0 {
            pendingLogins = max(0, pendingLogins - replies)
            if pendingLogins == 0 { tally.ready += 1 }
        }
    }

    func webSocket(_ connection: WebSocketConnection, didCloseWith event: WebSocketCloseEvent) {
        note("sink: connection closed: \(event)")
    }
}

/// Counters of every sink connection. Loop thread only.
final class SinkTally: @unchecked Sendable {
    // @unchecked Sendable: loop thread only; read through `loop.submit`.
    var frames = 0
    var first: Int64 = 0
    var last: Int64 = 0
    var ready = 0
}

func runSink(_ options: Options) async throws {
    let loop = try EventLoop(name: "sink")
    let url = try WebSocketURL(options.string("url", "ws://127.0.0.1:7700/v1/rooms"))
    let count = options.int("connections", 10)
    let rooms = (0..<options.int("rooms", 20)).map { "room-\($0)" }
    let secret = options.string("secret", "bench-secret")
    let tally = SinkTally()
    let started = monotonicNanos()
    let sinks = try await loop.submit { () -> [SinkConnection] in
        let client = try WebSocketClient(loop: loop)
        return (0..<count).map { index in
            let sink = SinkConnection(rooms: rooms, user: "sink-\(index)", secret: secret, tally: tally,
                                      batch: options.int("batch", 0) == 1)
            sink.connection = client.connect(to: url, subprotocol: "room.v1", delegate: sink)
            return sink
        }
    }
    while try await loop.submit({ tally.ready }) < count { try await Task.sleep(for: .milliseconds(20)) }
    let elapsed = Double(monotonicNanos() - started) / 1e9
    report(["phase": "ready", "sessions": .int(Int64(count * rooms.count)), "failed": 0, "connections": .int(Int64(count)),
            "login_s": .double(elapsed), "logins_per_s": .double(Double(count * rooms.count) / elapsed)])
    try await serveSinkCommands(loop: loop, tally: tally)
    _ = sinks
}

/// The stdin commands of a sink (mark, report, quit), on `tally`; shared by
/// `sink` and `redis-sink`, so both receivers count and report alike.
func serveSinkCommands(loop: EventLoop, tally: SinkTally) async throws {
    var markedCPU = processCPUNanos()
    for await command in stdinLines() {
        switch command {
        case "mark":
            try await loop.submit { tally.frames = 0; tally.first = 0; tally.last = 0 }
            markedCPU = processCPUNanos()
            report(["phase": "marked"])
        case "report":
            var previous = -1
            var quietSince = monotonicNanos()
            var reading = (0, Int64(0), Int64(0))
            while true {
                reading = try await loop.submit { (tally.frames, tally.first, tally.last) }
                if reading.0 != previous {
                    previous = reading.0
                    quietSince = monotonicNanos()
                } else if monotonicNanos() - quietSince > 500_000_000 {
                    break
                }
                try await Task.sleep(for: .milliseconds(20))
            }
            let span = Double(reading.2 - reading.1) / 1e9
            report(["phase": "report", "events": .int(Int64(reading.0)), "first_ns": .int(reading.1), "last_ns": .int(reading.2),
                    "events_per_s": .double(span > 0 ? Double(reading.0) / span : 0),
                    "cpu_ns": .int(processCPUNanos() - markedCPU)])
        case "quit":
            exit(0)
        default:
            note("sink: unknown command '\(command)'")
        }
    }
}
