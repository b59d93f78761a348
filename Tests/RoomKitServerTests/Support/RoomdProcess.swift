import Foundation
import XCTest

/// Reads a file handle to EOF on a background thread, keeping what it read.
final class OutputCollector: @unchecked Sendable {
    // @unchecked Sendable: `data` and `finished` are guarded by `lock`.
    private let lock = NSLock()
    private var data = Data()
    private var finished = false

    init(_ handle: FileHandle) {
        Thread.detachNewThread { [self] in
            while true {
                let chunk = handle.availableData
                lock.lock()
                if chunk.isEmpty { finished = true } else { data.append(chunk) }
                lock.unlock()
                if chunk.isEmpty { return }
            }
        }
    }

    var text: String {
        lock.lock()
        defer { lock.unlock() }
        return String(decoding: data, as: UTF8.self)
    }

    var isFinished: Bool {
        lock.lock()
        defer { lock.unlock() }
        return finished
    }
}

/// The built `roomd` executable: next to the test bundle (both are products
/// of the same `swift build --build-tests`), or `$ROOMD_PATH`.
func roomdExecutable(file: StaticString = #filePath, line: UInt = #line) throws -> String {
    var directories: [URL] = []
    if let executable = Bundle.main.executableURL { directories.append(executable.deletingLastPathComponent()) }
    directories.append(Bundle.main.bundleURL)
    directories.append(Bundle.main.bundleURL.deletingLastPathComponent())
    for bundle in Bundle.allBundles where bundle.bundlePath.hasSuffix(".xctest") {
        directories.append(bundle.bundleURL.deletingLastPathComponent())
    }
    if let arg0 = CommandLine.arguments.first {
        directories.append(URL(fileURLWithPath: arg0).resolvingSymlinksInPath().deletingLastPathComponent())
    }
    var candidates = directories.map { $0.appendingPathComponent("roomd").path }
    if let explicit = ProcessInfo.processInfo.environment["ROOMD_PATH"] { candidates.insert(explicit, at: 0) }
    if let found = candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0) }) {
        return found
    }
    let message = "roomd executable not found (looked at \(candidates)); build it with the tests: "
        + "swift build --build-tests, or set ROOMD_PATH"
    XCTFail(message, file: file, line: line)
    throw TestTimeout(description: message)
}

/// A finished `roomd` run.
struct CommandResult {
    var status: Int32
    var stdout: String
    var stderr: String
}

/// Runs `roomd` with `arguments` to completion (killed after `timeout`).
func runRoomd(_ arguments: [String], timeout: TimeInterval = 10, file: StaticString = #filePath,
              line: UInt = #line) throws -> CommandResult {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: try roomdExecutable(file: file, line: line))
    process.arguments = arguments
    let out = Pipe(), err = Pipe()
    process.standardOutput = out
    process.standardError = err
    process.standardInput = FileHandle.nullDevice
    try process.run()
    let stdout = OutputCollector(out.fileHandleForReading)
    let stderr = OutputCollector(err.fileHandleForReading)
    let deadline = Date().addingTimeInterval(timeout)
    while process.isRunning && Date() < deadline { usleep(5_000) }
    if process.isRunning {
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        XCTFail("roomd \(arguments) did not finish within \(timeout) s", file: file, line: line)
    }
    process.waitUntilExit()
    while !(stdout.isFinished && stderr.isFinished) && Date() < deadline.addingTimeInterval(2) { usleep(2_000) }
    return CommandResult(status: process.terminationStatus, stdout: stdout.text, stderr: stderr.text)
}

/// A `roomd serve` child process on a free port.
final class RoomdProcess: @unchecked Sendable {
    // @unchecked Sendable: used by the test thread only.
    let process = Process()
    let dataDirectory: String
    private(set) var port = 0
    private(set) var host = ""
    let stdout: OutputCollector
    let stderr: OutputCollector

    /// Starts `roomd serve --listen 127.0.0.1:0 --secret … --data DIR` plus
    /// `extra`, and waits for its `listening on HOST:PORT` line.
    /// With `signalsBlocked`, the child is spawned from a thread that blocks
    /// SIGINT and SIGTERM (as a dispatch worker or a supervisor might), so it
    /// inherits that mask.
    init(dataDirectory: String, extra: [String] = [], signalsBlocked: Bool = false, file: StaticString = #filePath,
         line: UInt = #line) throws {
        self.dataDirectory = dataDirectory
        process.executableURL = URL(fileURLWithPath: try roomdExecutable(file: file, line: line))
        process.arguments = ["serve", "--listen", "127.0.0.1:0", "--secret", testSecret, "--data", dataDirectory,
                             "--log-level", "warning"] + extra
        let out = Pipe(), err = Pipe()
        process.standardOutput = out
        process.standardError = err
        process.standardInput = FileHandle.nullDevice
        if signalsBlocked {
            try Self.spawnWithStopSignalsBlocked(process)
        } else {
            try process.run()
        }
        stdout = OutputCollector(out.fileHandleForReading)
        stderr = OutputCollector(err.fileHandleForReading)
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline {
            let text = stdout.text
            if let newline = text.firstIndex(of: "\n") {
                let first = String(text[..<newline])
                let prefix = "listening on "
                if first.hasPrefix(prefix), let colon = first.lastIndex(of: ":"),
                   let port = Int(first[first.index(after: colon)...]) {
                    self.host = String(first[first.index(first.startIndex, offsetBy: prefix.count)..<colon])
                    self.port = port
                    return
                }
                XCTFail("roomd printed '\(first)' instead of 'listening on HOST:PORT'", file: file, line: line)
                break
            }
            if !process.isRunning { break }
            usleep(5_000)
        }
        let message = "roomd did not start: status \(process.isRunning ? "running" : "\(process.terminationStatus)"), "
            + "stdout '\(stdout.text)', stderr '\(stderr.text)'"
        killHard()
        XCTFail(message, file: file, line: line)
        throw TestTimeout(description: message)
    }

    /// Runs `process` from a fresh thread whose signal mask blocks SIGINT and SIGTERM.
    private static func spawnWithStopSignalsBlocked(_ process: Process) throws {
        final class Outcome: @unchecked Sendable {
            // @unchecked Sendable: written by the spawning thread before `done` is signalled.
            let process: Process
            var error: (any Error)?
            let done = DispatchSemaphore(value: 0)
            init(_ process: Process) { self.process = process }
        }
        let outcome = Outcome(process)
        Thread.detachNewThread {
            var signals = sigset_t()
            sigemptyset(&signals)
            sigaddset(&signals, SIGINT)
            sigaddset(&signals, SIGTERM)
            pthread_sigmask(SIG_BLOCK, &signals, nil)
            do { try outcome.process.run() } catch { outcome.error = error }
            outcome.done.signal()
        }
        outcome.done.wait()
        if let error = outcome.error { throw error }
    }

    /// `kill -9`: no chance to flush or close anything.
    func killHard() {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
    }

    /// Sends `signal` and waits (up to `timeout`) for the exit status; nil if it did not exit.
    func stop(signal: Int32 = SIGTERM, timeout: TimeInterval = 5) -> Int32? {
        if process.isRunning { kill(process.processIdentifier, signal) }
        let deadline = Date().addingTimeInterval(timeout)
        while process.isRunning && Date() < deadline { usleep(5_000) }
        if process.isRunning { return nil }
        process.waitUntilExit()
        return process.terminationStatus
    }
}
