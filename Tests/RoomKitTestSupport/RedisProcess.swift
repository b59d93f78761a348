import Foundation
import XCTest

/// A real `redis-server` child on a free loopback port, in its own
/// directory, without persistence unless asked (`--save ''`,
/// `--appendonly no`). It can be killed with -9 and restarted on the same
/// port (keeping its data only when `persistent`).
public final class RedisProcess: ChildServer {
    public let port: Int
    public let directory: String
    public let persistent: Bool
    /// The running child (nil before start and after a stop or kill).
    public var process: Process?
    /// More redis-server arguments (`--requirepass`, `--user`, …).
    public let extraArguments: [String]

    /// The `redis-server` binary on PATH or in /usr/bin.
    public static var binary: String? {
        for candidate in ["/usr/bin/redis-server", "/usr/local/bin/redis-server"]
        where FileManager.default.isExecutableFile(atPath: candidate) {
            return candidate
        }
        return nil
    }

    public init(persistent: Bool = false, arguments: [String] = []) {
        extraArguments = arguments
        port = freePort()
        self.persistent = persistent
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("redis-\(UUID().uuidString)").path
    }

    /// `redis://127.0.0.1:<port>/0`.
    public var url: String { "redis://127.0.0.1:\(port)/0" }
    public var logPath: String { directory + "/redis.log" }

    /// Starts (or restarts) and waits until it answers PING. Skips the test
    /// when redis-server is not installed (scripts/bootstrap.sh installs it).
    public func start() throws {
        guard let binary = Self.binary else {
            throw XCTSkip("redis-server is not installed (run scripts/bootstrap.sh)")
        }
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: binary)
        var arguments = ["--port", "\(port)", "--bind", "127.0.0.1", "--dir", directory,
                         "--logfile", logPath, "--daemonize", "no", "--protected-mode", "yes"]
        if persistent {
            arguments += ["--appendonly", "yes", "--appendfsync", "always", "--save", ""]
        } else {
            arguments += ["--save", "", "--appendonly", "no"]
        }
        process.arguments = arguments + extraArguments
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        self.process = process
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline {
            if ping() { return }
            if !process.isRunning { break }
            usleep(20_000)
        }
        throw XCTSkip("redis-server did not start on \(port): \(fileText(logPath) ?? "")")
    }

    /// Whether the server answers `PING` with `+PONG` (RESP inline command;
    /// a probe for tests, not a client).
    public func ping() -> Bool {
        let answer = rawExchange(port: port, "PING\r\n", timeout: 1)
        // A server that wants AUTH first is up too.
        return answer.hasPrefix("+PONG") || answer.hasPrefix("-NOAUTH")
    }

    /// Runs one inline command with `redis-cli` and returns its raw output.
    @discardableResult
    public func cli(_ arguments: [String]) -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/redis-cli")
        process.arguments = ["-h", "127.0.0.1", "-p", "\(port)", "--no-raw"] + arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        guard (try? process.run()) != nil else { return "" }
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return String(decoding: data, as: UTF8.self)
    }



    deinit {
        kill9()
        try? FileManager.default.removeItem(atPath: directory)
    }
}
