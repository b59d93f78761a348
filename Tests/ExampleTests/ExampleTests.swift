import Foundation
import Synchronization
import XCTest

/// The example multi-room bot, run end to end as a user would: the built
/// `multiroom-bot` binary with `--quick`, no TTY (plain lines), against its
/// embedded roomd. Its output must show the whole tour and the summary.
final class ExampleTests: XCTestCase {
    static let reasons = ["LOGINING", "LOGINED", "LOGIN_FAILED", "RECONNECTING", "RECONNECTED", "RECONNECT_FAILED",
                          "KICK_OUT", "LOGOUT", "LOGOUT_FAILED"]

    func testMultiRoomBot_quickHeadlessRun_playsTheWholeTourAndPrintsTheSummary() throws {
        let run = try Self.runExample(["--quick"], timeout: 60)
        let output = run.output
        XCTAssertEqual(run.status, 0, "multiroom-bot --quick exited \(run.status):\n\(output)")

        // Every reason is raised by the engine for some room (a narrated "[ t ]   room  REASON (code)" line).
        for reason in Self.reasons {
            XCTAssertTrue(Self.matches(#"(?m)^\[\s*[0-9.]+s\]\s+\S+\s+\#(reason)( \(\d+\))?$"#, in: output),
                          "no room reported \(reason):\n\(output)")
        }
        XCTAssertTrue(output.contains("every reason seen: all 9"), output)

        // The forced drop: RECONNECTING, then RECONNECTED, and the missed events arrive.
        let reconnecting = try XCTUnwrap(output.range(of: "RECONNECTING (1002051)"), output)
        let reconnected = try XCTUnwrap(output.range(of: "RECONNECTED\n"), output)
        XCTAssertLessThan(reconnecting.lowerBound, reconnected.lowerBound)
        let recovered = try XCTUnwrap(Self.firstCapture(#"recovered (\d+) missed events"#, in: output).flatMap { Int($0) }, output)
        XCTAssertGreaterThan(recovered, 0, output)
        XCTAssertTrue(output.contains("0 duplicates"), output)

        // The plugins: pong from the C plugin, the URL rewritten by the URL plugin.
        XCTAssertTrue(output.contains(#"echo-commands (C): {"text":"pong","to":"#), output)
        XCTAssertTrue(output.contains("C plugin echo-commands: !ping → {\"text\":\"pong\""), output)
        XCTAssertTrue(output.contains("http://img.example.com/tour/roomkit.png → https://cdn.example.net/img/tour/roomkit.png"), output)

        // The summary, with the replay hint.
        XCTAssertTrue(output.contains("══ summary ══"), output)
        XCTAssertTrue(output.contains("tour: all 9 steps done"), output)
        XCTAssertTrue(Self.matches(#"events: \d+ received by the bot in [0-9.]+ s"#, in: output), output)
        XCTAssertTrue(Self.matches(#"roombot replay --server ws://127\.0\.0\.1:\d+/v1/rooms --room \S+ --token \S+"#, in: output),
                      output)

        // No token is ever printed (a JWT starts with the base64 of '{"').
        XCTAssertFalse(Self.matches(#"eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\."#, in: output), "a token was printed:\n\(output)")
        // Without a TTY there are no terminal control sequences.
        XCTAssertFalse(output.contains("\u{1B}["), "escape sequences without a TTY")
    }

    func testMultiRoomBot_serverWithoutSecret_isAUsageError() throws {
        let run = try Self.runExample(["--server", "ws://127.0.0.1:9/v1/rooms"], timeout: 20)
        XCTAssertNotEqual(run.status, 0)
        XCTAssertTrue(run.output.contains("--server and --secret go together"), run.output)
    }

    // MARK: Support

    /// The built example, next to the test bundle (`.build/<triple>/debug/`).
    static func exampleBinary() throws -> String {
        let starts = [CommandLine.arguments.first ?? "", Bundle.main.bundlePath, Bundle(for: ExampleTests.self).bundlePath]
        for start in starts where !start.isEmpty {
            var directory = URL(fileURLWithPath: start).deletingLastPathComponent()
            for _ in 0..<4 {
                let candidate = directory.appendingPathComponent("multiroom-bot").path
                if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
                directory = directory.deletingLastPathComponent()
            }
        }
        throw XCTSkip("multiroom-bot is not built next to the tests: run `swift build --build-tests` first")
    }

    /// Runs the example with `arguments`, stdin from /dev/null and stdout+stderr
    /// to a pipe (no TTY); kills it after `timeout` seconds.
    static func runExample(_ arguments: [String], timeout: TimeInterval) throws -> (status: Int32, output: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: try exampleBinary())
        process.arguments = arguments
        process.standardInput = FileHandle.nullDevice
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        let exited = DispatchSemaphore(value: 0)
        process.terminationHandler = { _ in exited.signal() }
        let collected = Mutex(Data())
        let drained = DispatchSemaphore(value: 0)
        let reader = pipe.fileHandleForReading
        try process.run()
        DispatchQueue.global().async {
            let data = reader.readDataToEndOfFile()
            collected.withLock { $0 = data }
            drained.signal()
        }
        if exited.wait(timeout: .now() + timeout) == .timedOut {
            process.terminate()
            _ = exited.wait(timeout: .now() + 5)
            _ = drained.wait(timeout: .now() + 5)
            let partial = String(decoding: collected.withLock { $0 }, as: UTF8.self)
            XCTFail("multiroom-bot \(arguments.joined(separator: " ")) did not exit within \(timeout) s:\n\(partial)")
            return (-1, partial)
        }
        _ = drained.wait(timeout: .now() + 10)
        return (process.terminationStatus, String(decoding: collected.withLock { $0 }, as: UTF8.self))
    }

    static func matches(_ pattern: String, in text: String) -> Bool {
        text.range(of: pattern, options: .regularExpression) != nil
    }

    static func firstCapture(_ pattern: String, in text: String) -> String? {
        guard let regex = try? NSRegularExpression(pattern: pattern),
              let match = regex.firstMatch(in: text, range: NSRange(text.startIndex..., in: text)),
              let range = Range(match.range(at: 1), in: text) else { return nil }
        return String(text[range])
    }
}
