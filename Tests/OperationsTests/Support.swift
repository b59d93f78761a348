import Foundation
import RoomKitTestSupport
import XCTest

/// A finished run of a built product.
struct Finished {
    var status: Int32
    var stdout: String
    var stderr: String
}

/// Runs the built product `name` with `arguments` and an environment of
/// this process's plus `environment`, waits for it to exit (killing it after
/// `timeout`), and returns its status and output.
func runProduct(_ name: String, _ arguments: [String], environment: [String: String] = [:],
                timeout: TimeInterval = 30) throws -> Finished {
    let child = try startProduct(name, arguments, environment: environment)
    return child.finish(timeout: timeout)
}

/// Starts the built product `name`; stdout and stderr go to files, so a
/// chatty child never blocks on a full pipe.
func startProduct(_ name: String, _ arguments: [String], environment: [String: String] = [:]) throws -> Spawned {
    try Spawned(path: try builtProduct(name), arguments: arguments, environment: environment)
}

/// A child process whose output is collected in temporary files.
final class Spawned {
    let process = Process()
    let outPath: String
    let errPath: String

    init(path: String, arguments: [String], environment: [String: String]) throws {
        let base = FileManager.default.temporaryDirectory.appendingPathComponent("ops-\(UUID().uuidString)").path
        outPath = base + ".out"
        errPath = base + ".err"
        _ = FileManager.default.createFile(atPath: outPath, contents: nil)
        _ = FileManager.default.createFile(atPath: errPath, contents: nil)
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = arguments
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        process.standardOutput = FileHandle(forWritingAtPath: outPath)
        process.standardError = FileHandle(forWritingAtPath: errPath)
        process.standardInput = FileHandle.nullDevice
        try process.run()
    }

    var stdout: String { fileText(outPath) ?? "" }
    var stderr: String { fileText(errPath) ?? "" }

    /// Waits until `text` appears in stdout or stderr, or the process exits.
    @discardableResult
    func waitFor(_ text: String, timeout: TimeInterval = 20) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if stdout.contains(text) || stderr.contains(text) { return true }
            if !process.isRunning { return stdout.contains(text) || stderr.contains(text) }
            usleep(20_000)
        }
        return false
    }

    func signal(_ number: Int32) { kill(process.processIdentifier, number) }

    func finish(timeout: TimeInterval = 30) -> Finished {
        let deadline = Date().addingTimeInterval(timeout)
        while process.isRunning && Date() < deadline { usleep(20_000) }
        if process.isRunning { process.terminate(); process.waitUntilExit() }
        return Finished(status: process.terminationStatus, stdout: stdout, stderr: stderr)
    }

    deinit {
        if process.isRunning { process.terminate(); process.waitUntilExit() }
        try? FileManager.default.removeItem(atPath: outPath)
        try? FileManager.default.removeItem(atPath: errPath)
    }
}

/// The repository's root (two levels above Tests/OperationsTests/).
let repositoryRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
    .deletingLastPathComponent().deletingLastPathComponent().path

/// Runs a tool from PATH; nil when it cannot be started.
func runTool(_ arguments: [String], directory: String? = nil, environment: [String: String] = [:]) -> Finished? {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    process.arguments = arguments
    if let directory { process.currentDirectoryURL = URL(fileURLWithPath: directory) }
    process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
    let out = Pipe(), err = Pipe()
    process.standardOutput = out
    process.standardError = err
    guard (try? process.run()) != nil else { return nil }
    // Read both pipes while the tool runs, so a large output cannot block it.
    let errData = LockedData()
    let reader = Thread { errData.set(err.fileHandleForReading.readDataToEndOfFile()) }
    reader.start()
    let outData = out.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    while !errData.done { usleep(1000) }
    return Finished(status: process.terminationStatus, stdout: String(decoding: outData, as: UTF8.self),
                    stderr: String(decoding: errData.value, as: UTF8.self))
}

/// A data buffer filled by another thread.
final class LockedData: @unchecked Sendable {
    // @unchecked Sendable: every access goes through `lock`.
    private let lock = NSLock()
    private var data = Data()
    private var finished = false
    func set(_ value: Data) { lock.lock(); data = value; finished = true; lock.unlock() }
    var done: Bool { lock.lock(); defer { lock.unlock() }; return finished }
    var value: Data { lock.lock(); defer { lock.unlock() }; return data }
}

/// A fresh temporary directory.
func temporaryDirectory(_ prefix: String) throws -> String {
    let path = FileManager.default.temporaryDirectory.appendingPathComponent("\(prefix)-\(UUID().uuidString)").path
    try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    return path
}
