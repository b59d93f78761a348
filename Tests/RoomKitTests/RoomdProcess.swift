import Foundation
import XCTest

/// A real `roomd` child process (for kill -9 and restart tests).
final class RoomdProcess {
    let port: Int
    let dataDirectory: String
    let secret: String
    private var process: Process?
    private let extraArguments: [String]

    /// The `roomd` binary built next to the test bundle.
    static var binary: String? {
        var directory = URL(fileURLWithPath: CommandLine.arguments.first ?? "").deletingLastPathComponent()
        for _ in 0..<4 {
            let candidate = directory.appendingPathComponent("roomd").path
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
            directory = directory.deletingLastPathComponent()
        }
        let bundle = Bundle.main.bundleURL.deletingLastPathComponent().appendingPathComponent("roomd").path
        return FileManager.default.isExecutableFile(atPath: bundle) ? bundle : nil
    }

    /// A free port: bind to 0, read it, close.
    static func freePort() -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        _ = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    init(secret: String, arguments: [String] = []) {
        port = Self.freePort()
        self.secret = secret
        dataDirectory = FileManager.default.temporaryDirectory.appendingPathComponent("roomd-\(UUID().uuidString)").path
        extraArguments = arguments
    }

    /// Starts (or restarts, keeping the data) and waits for `listening on`.
    func start() throws {
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

    /// SIGKILL: no chance to flush anything.
    func kill9() {
        guard let process else { return }
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        self.process = nil
    }

    func stop() {
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
