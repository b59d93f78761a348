import BenchSupport
import Foundation
import Logging
import RoomKitLoop
import RoomKitRedis

/// `roomkit-bench redis-sink`: the receiving side of the Redis anchor
/// (workload 4), built like `sink` (one RoomKitLoop event loop, messages
/// counted, not parsed further) but on RoomKitRedis: `--connections`
/// hiredis connections on that loop, each subscribed to `--channel`. So
/// roomd's raw members and Redis's subscribers are the same kind of
/// receiver, and deliveries/s of the two servers compare. Same stdin
/// commands and JSON lines as `sink`.
func runRedisSink(_ options: Options) async throws {
    let loop = try EventLoop(name: "redis-sink")
    let endpoint = RedisEndpoint(host: "127.0.0.1", port: options.int("port", 6379))
    let count = options.int("connections", 100)
    let channel = options.string("channel", "room-0")
    let tally = SinkTally()
    let logger = {
        var logger = Logger(label: "redis-sink")
        logger.logLevel = .warning
        return logger
    }()
    let started = monotonicNanos()
    let clients = try await loop.submit { () -> [RedisClient] in
        try (0..<count).map { _ in
            let client = RedisClient(loop: loop, endpoint: endpoint, logger: logger)
            client.onConnect = { [unowned client] in
                let subscribed = client.subscribe([channel]) { value in
                    let kind = value.array.first?.string
                    if kind == "message" {
                        tally.frames += 1
                        let now = monotonicNanos()
                        if tally.first == 0 { tally.first = now }
                        tally.last = now
                    } else if kind == "subscribe" {
                        tally.ready += 1
                    }
                }
                if !subscribed { note("redis-sink: SUBSCRIBE could not be sent") }
            }
            try client.start()
            return client
        }
    }
    while try await loop.submit({ tally.ready }) < count { try await Task.sleep(for: .milliseconds(20)) }
    let elapsed = Double(monotonicNanos() - started) / 1e9
    report(["phase": "ready", "sessions": .int(Int64(count)), "failed": 0, "connections": .int(Int64(count)),
            "login_s": .double(elapsed), "logins_per_s": .double(Double(count) / elapsed)])
    try await serveSinkCommands(loop: loop, tally: tally)
    withExtendedLifetime(clients) {}  // hiredis holds them unretained: alive until the sink ends
}
