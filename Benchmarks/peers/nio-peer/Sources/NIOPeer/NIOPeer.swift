#if canImport(Glibc)
import Glibc
#endif
import Foundation
import NIOCore
import NIOPosix

/// The second peer of the RoomKit benchmarks: a room.v1 client on SwiftNIO
/// and Vapor's websocket-kit, as a performance-minded Swift user would write
/// it (one single-threaded EventLoopGroup for every connection, Codable
/// messages, handlers called inline). Same options, stdin commands (mark,
/// report, await-reconnect, quit) and JSON lines as `roomkit-bench client`
/// and peers/roomkit_peer.py, so Benchmarks/bench.py drives all three alike.
///
///     nio-peer client --url ws://127.0.0.1:PORT/v1/rooms --tokens-file F
///         --connections 8 --rooms 1000 [--shared 1] [--plugins 3] [--latency 1]
///
/// Tokens are minted by the harness (one line per connection in
/// `--tokens-file`): signing is not part of any figure, and this keeps
/// swift-crypto's second BoringSSL out of the build.
@main
struct NIOPeer {
    static func main() throws {
        let arguments = Array(CommandLine.arguments.dropFirst())
        guard arguments.first == "client" || arguments.first == "plugins" else {
            note("usage: nio-peer client|plugins [--option value ...]")
            exit(2)
        }
        var options: [String: String] = [:]
        var index = 1
        while index + 1 < arguments.count {
            if arguments[index].hasPrefix("--") { options[String(arguments[index].dropFirst(2))] = arguments[index + 1] }
            index += 2
        }
        if arguments.first == "plugins" {
            try HandlerCalls.run(iterations: Int(options["iterations"] ?? "2000000") ?? 2_000_000)
        } else {
            try client(options)
        }
    }

    static func client(_ options: [String: String]) throws {
        let url = options["url"] ?? "ws://127.0.0.1:7700/v1/rooms"
        let count = Int(options["connections"] ?? "8") ?? 8
        let roomsPerConnection = Int(options["rooms"] ?? "1000") ?? 1000
        let shared = options["shared"] == "1"
        let window = Int(options["window"] ?? "1000") ?? 1000
        let service = options["service"] == "1"
        guard let tokensPath = options["tokens-file"],
              let tokens = try? String(contentsOfFile: tokensPath, encoding: .utf8).split(separator: "\n").map(String.init),
              tokens.count >= (shared ? count : 1) else {
            note("--tokens-file: one token per connection (user bot-<index>), or one for user bot")
            exit(2)
        }
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let loop = group.next()
        let stats = Stats(recordLatency: options["latency"] == "1")
        let plugins = makePlugins(Int(options["plugins"] ?? "3") ?? 3, stats: stats)
        let connections = (0..<count).map { index in
            Connection(loop: loop, url: url, user: shared ? "bot-\(index)" : "bot", token: tokens[shared ? index : 0],
                       rooms: (0..<roomsPerConnection).map { shared ? "room-\($0)" : "s\(index)-\($0)" },
                       plugins: plugins, stats: stats, window: window, service: service)
        }
        let before = residentBytes()
        let started = monotonicNanos()
        let cpuBefore = processCPUNanos()
        let allIn = loop.makePromise(of: Void.self)
        try loop.submit {
            var waiting = connections.count
            for connection in connections {
                connection.onLoggedIn = {
                    waiting -= 1
                    if waiting == 0 { allIn.succeed(()) }
                }
                connection.connect()
            }
        }.wait()
        try allIn.futureResult.wait()
        let elapsed = Double(monotonicNanos() - started) / 1e9
        let loginCPU = processCPUNanos() - cpuBefore
        let failures = try loop.submit { connections.reduce(0) { $0 + $1.loginFailures } }.wait()
        let sessions = count * roomsPerConnection - failures
        Thread.sleep(forTimeInterval: 1)
        let after = residentBytes()
        trimHeap()
        let trimmed = residentBytes()
        emit(["phase": "ready", "sessions": sessions, "failed": failures, "connections": count, "login_s": elapsed,
              "logins_per_s": Double(sessions) / elapsed, "rss_before": before, "rss_after": after,
              "rss_trimmed": trimmed, "cpu_ns": loginCPU])
        var markedCPU = processCPUNanos()
        while let command = readLine() {
            switch command.trimmingCharacters(in: .whitespaces) {
            case "mark":
                try loop.submit { stats.reset() }.wait()
                markedCPU = processCPUNanos()
                emit(["phase": "marked"])
            case "report":
                var previous = -1
                var quietSince = monotonicNanos()
                var reading = (0, Int64(0), Int64(0))
                while true {
                    reading = try loop.submit { (stats.events, stats.first, stats.last) }.wait()
                    if reading.0 != previous {
                        previous = reading.0
                        quietSince = monotonicNanos()
                    } else if monotonicNanos() - quietSince > 500_000_000 {
                        break
                    }
                    Thread.sleep(forTimeInterval: 0.02)
                }
                let cpu = processCPUNanos() - markedCPU
                let latencies = try loop.submit { stats.latencies }.wait()
                let span = Double(reading.2 - reading.1) / 1e9
                emit(["phase": "report", "events": reading.0, "first_ns": reading.1, "last_ns": reading.2,
                      "events_per_s": span > 0 ? Double(reading.0) / span : 0,
                      "latency": latencySummary(latencies), "cpu_ns": cpu])
            case "await-reconnect":
                let deadline = monotonicNanos() + 180_000_000_000
                while try loop.submit({ stats.reconnected }).wait() < sessions && monotonicNanos() < deadline {
                    Thread.sleep(forTimeInterval: 0.005)
                }
                let (reconnected, first, last, lost, times) = try loop.submit {
                    (stats.reconnected, stats.firstReconnected, stats.lastReconnected, stats.firstLost,
                     stats.reconnectTimes)
                }.wait()
                emit(["phase": "recovered", "reconnected": reconnected, "first_ns": first, "last_ns": last,
                      "lost_ns": lost, "times": times])
            case "quit":
                exit(0)
            default:
                note("unknown command '\(command)'")
            }
        }
    }
}

func emit(_ fields: [String: Any]) {
    guard let data = try? JSONSerialization.data(withJSONObject: fields, options: [.sortedKeys]) else { return }
    FileHandle.standardOutput.write(data + Data("\n".utf8))
}

/// glibc's malloc_trim(0), so the RSS after it shows live memory. Looked up
/// at run time (the Glibc module does not export it).
func trimHeap() {
    typealias Trim = @convention(c) (Int) -> Int32
    guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "malloc_trim") else { return }
    _ = unsafeBitCast(symbol, to: Trim.self)(0)
}

func note(_ message: String) {
    FileHandle.standardError.write(Data("[nio-peer] \(message)\n".utf8))
}
