import Foundation
import XCTest

/// A binary SwiftPM built next to the test bundle (roomd, roombot, the
/// example, plugin libraries), or an XCTSkip saying how to build it.
public func builtProduct(_ name: String) throws -> String {
    var directory = URL(fileURLWithPath: CommandLine.arguments.first ?? "").deletingLastPathComponent()
    for _ in 0..<4 {
        let candidate = directory.appendingPathComponent(name).path
        if FileManager.default.fileExists(atPath: candidate) { return candidate }
        directory = directory.deletingLastPathComponent()
    }
    throw XCTSkip("\(name) is not built next to the tests (run `swift build --build-tests`)")
}

/// A spawned child process with its stdout and stderr piped.
public final class ChildProcess {
    public let process = Process()
    public let output = Pipe()
    public let errors = Pipe()

    /// Starts the built product `name` with `arguments`, and `environment` added to ours.
    public init(_ name: String, _ arguments: [String], environment: [String: String] = [:]) throws {
        process.executableURL = URL(fileURLWithPath: try builtProduct(name))
        process.arguments = arguments
        if !environment.isEmpty {
            process.environment = ProcessInfo.processInfo.environment.merging(environment) { _, new in new }
        }
        process.standardOutput = output
        process.standardError = errors
        try process.run()
    }

    /// Waits for exit (terminating after `timeout`); returns (status, stdout, stderr).
    public func finish(timeout: TimeInterval = 20) -> (Int32, String, String) {
        let deadline = Date().addingTimeInterval(timeout)
        while process.isRunning && Date() < deadline { usleep(20_000) }
        if process.isRunning { process.terminate(); process.waitUntilExit() }
        let out = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        let err = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        return (process.terminationStatus, out, err)
    }

    public func signal(_ signal: Int32) { kill(process.processIdentifier, signal) }

    /// Reads `pipe` (polling: availableData may not block here) until `marker` appears.
    public static func read(_ pipe: Pipe, until marker: String, timeout: TimeInterval = 10, while running: () -> Bool) -> String {
        let deadline = Date().addingTimeInterval(timeout)
        var seen = ""
        while Date() < deadline {
            let chunk = pipe.fileHandleForReading.availableData
            if chunk.isEmpty {
                if !running() { break }
                usleep(20_000)
                continue
            }
            seen += String(decoding: chunk, as: UTF8.self)
            if seen.contains(marker) { break }
        }
        return seen
    }
}

/// Compiles a C plugin against RoomKit's ABI header with the system C compiler.
public func compilePlugin(_ name: String, source: String, in directory: String) throws -> String {
    let repo = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    let include = repo.appendingPathComponent("Sources/CRoomKitPluginABI/include").path
    let sourcePath = directory + "/\(name).c"
    let library = directory + "/lib\(name).so"
    try source.write(toFile: sourcePath, atomically: true, encoding: .utf8)
    let cc = Process()
    cc.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    cc.arguments = ["cc", "-shared", "-fPIC", "-O1", "-I", include, sourcePath, "-o", library]
    let errors = Pipe()
    cc.standardError = errors
    try cc.run()
    cc.waitUntilExit()
    guard cc.terminationStatus == 0 else {
        throw XCTSkip("cc failed: \(String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self))")
    }
    return library
}
