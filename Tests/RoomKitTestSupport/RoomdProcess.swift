import Foundation
import XCTest

/// A real `roomd` child process (for kill -9 and restart tests).
public final class RoomdProcess {
    public let port: Int
    public let dataDirectory: String
    public let secret: String
    private var process: Process?
    private let extraArguments: [String]

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

    public init(secret: String, arguments: [String] = []) {
        port = Self.freePort()
        self.secret = secret
        dataDirectory = FileManager.default.temporaryDirectory.appendingPathComponent("roomd-\(UUID().uuidString)").path
        extraArguments = arguments
    }

    /// Starts (or restarts, keeping the data) and waits for `listening on`.
    public func start() throws {
        guard let binary = Self.binary else {
            throw XCTSkip("roomd binary not built next to the tests (run `swift build --build-tests`)")
        }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: binary)
        process.arguments = ["serve", "--listen", "127.0.0.1:\(port)", "--secret", secret, "--data", dataDirectory,
                             "--log-level", "warning"] + extraArguments
        let output = Pipe()
        process.standardOutput = output
        let errors = Pipe()
        process.standardError = errors
        try process.run()
        self.process = process
        let deadline = Date().addingTimeInterval(10)
        var seen = Data()
        while Date() < deadline {
            let chunk = output.fileHandleForReading.availableData
            if chunk.isEmpty {
                if !process.isRunning { break }
                usleep(20_000)
                continue
            }
            seen.append(chunk)
            if String(decoding: seen, as: UTF8.self).contains("listening on 127.0.0.1:\(port)") { return }
        }
        let status = process.isRunning ? "running" : "exited \(process.terminationStatus): "
            + String(decoding: errors.fileHandleForReading.availableData, as: UTF8.self)
        throw XCTSkip("roomd (\(binary)) did not start (\(status)): \(String(decoding: seen, as: UTF8.self))")
    }

    /// The running child's process ID, if any.
    public var pid: Int32? { process?.processIdentifier }

    /// SIGKILL: no chance to flush anything.
    public func kill9() {
        guard let process else { return }
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        self.process = nil
    }

    public func stop() {
        guard let process else { return }
        process.terminate()
        process.waitUntilExit()
        self.process = nil
    }

    deinit {
        kill9()
        if ProcessInfo.processInfo.environment["KEEP_ROOMD_DATA"] == nil { try? FileManager.default.removeItem(atPath: dataDirectory) } else { print("ROOMD DATA", dataDirectory) }
    }
}
