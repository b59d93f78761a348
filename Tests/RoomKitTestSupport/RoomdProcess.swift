import Foundation
import XCTest

/// A real `roomd` child process (for kill -9 and restart tests).
public final class RoomdProcess: ChildServer {
    public let port: Int
    public let dataDirectory: String
    public let secret: String
    /// The running child (nil before start and after a stop or kill).
    public var process: Process?
    private let extraArguments: [String]
    private let logLevel: String

    /// The `roomd` binary built next to the test bundle.
    public static var binary: String? {
        var directory = URL(fileURLWithPath: CommandLine.arguments.first ?? "").deletingLastPathComponent()
        for _ in 0..<4 {
            let candidate = directory.appendingPathComponent("roomd").path
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
            directory = directory.deletingLastPathComponent()
        }
        let bundle = Bundle.main.bundleURL.deletingLastPathComponent().appendingPathComponent("roomd").path
        return FileManager.default.isExecutableFile(atPath: bundle) ? bundle : nil
    }

    /// A free port (see `freePort()`).
    public static func freePort() -> Int { RoomKitTestSupport.freePort() }

    public init(secret: String, arguments: [String] = [], logLevel: String = "warning") {
        self.logLevel = logLevel
        port = Self.freePort()
        self.secret = secret
        dataDirectory = FileManager.default.temporaryDirectory.appendingPathComponent("roomd-\(UUID().uuidString)").path
        extraArguments = arguments
    }

    /// Everything roomd wrote (stdout and stderr, all runs), kept next to
    /// its data directory so a chatty roomd never blocks on a full pipe.
    public var logPath: String { dataDirectory + ".log" }
    public var log: String { fileText(logPath) ?? "" }

    /// Starts (or restarts, keeping the data) and waits for `listening on`.
    public func start() throws {
        guard let binary = Self.binary else {
            throw XCTSkip("roomd binary not built next to the tests (run `swift build --build-tests`)")
        }
        if !FileManager.default.fileExists(atPath: logPath) {
            _ = FileManager.default.createFile(atPath: logPath, contents: nil)
        }
        guard let logFile = FileHandle(forWritingAtPath: logPath) else { throw XCTSkip("cannot write \(logPath)") }
        defer { try? logFile.close() }
        let offset = logFile.seekToEndOfFile()
        let process = Process()
        process.executableURL = URL(fileURLWithPath: binary)
        process.arguments = ["serve", "--listen", "127.0.0.1:\(port)", "--secret", secret, "--data", dataDirectory,
                             "--log-level", logLevel] + extraArguments
        process.standardOutput = logFile
        process.standardError = logFile
        try process.run()
        self.process = process
        let deadline = Date().addingTimeInterval(10)
        var thisRun = ""
        while Date() < deadline {
            thisRun = String(log.utf8.dropFirst(Int(offset))) ?? ""
            if thisRun.contains("listening on 127.0.0.1:\(port)") { return }
            if !process.isRunning { break }
            usleep(20_000)
        }
        let status = process.isRunning ? "running" : "exited \(process.terminationStatus)"
        throw XCTSkip("roomd (\(binary)) did not start (\(status)): \(thisRun)")
    }



    deinit {
        kill9()
        if ProcessInfo.processInfo.environment["KEEP_ROOMD_DATA"] == nil {
            try? FileManager.default.removeItem(atPath: dataDirectory)
            try? FileManager.default.removeItem(atPath: logPath)
        } else {
            print("ROOMD DATA", dataDirectory, "log", logPath)
        }
    }
}
