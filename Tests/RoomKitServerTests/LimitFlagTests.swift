import Foundation
import XCTest

/// The `roomd serve` flags of issue 27 §3 (docs/CLI.md): a value out of
/// range is one line naming the flag, exit 2.
final class LimitFlagTests: ServerTestCase {
    private func assertFlagError(_ arguments: [String], names flag: String, file: StaticString = #filePath,
                                 line: UInt = #line) throws {
        let result = try runRoomd(arguments, file: file, line: line)
        XCTAssertEqual(result.status, 2, "\(arguments): stderr \(result.stderr)", file: file, line: line)
        XCTAssertEqual(result.stderr.split(separator: "\n").count, 1, "one line: \(result.stderr)", file: file, line: line)
        XCTAssertTrue(result.stderr.contains(flag), "'\(result.stderr)' names \(flag)", file: file, line: line)
    }

    func testServe_limitFlagsOutOfRange_exit2NamingTheFlag() throws {
        let base = ["serve", "--secret", "s", "--data", try temporaryDirectory()]
        try assertFlagError(base + ["--max-recording-downloads", "0"], names: "--max-recording-downloads")
        try assertFlagError(base + ["--max-recording-downloads", "lots"], names: "--max-recording-downloads")
        try assertFlagError(base + ["--recording-buffer-bytes", "100"], names: "--recording-buffer-bytes")
        try assertFlagError(base + ["--recovery-bytes-per-room=-1"], names: "--recovery-bytes-per-room")
        try assertFlagError(base + ["--recovery-bytes-total=-1"], names: "--recovery-bytes-total")
    }

    /// `--commit-deadline` (issue 26): seconds from 0 to 1.
    func testServe_commitDeadlineOutOfRange_exit2NamingTheFlag() throws {
        let base = ["serve", "--secret", "s", "--data", try temporaryDirectory()]
        try assertFlagError(base + ["--commit-deadline", "2"], names: "--commit-deadline")
        try assertFlagError(base + ["--commit-deadline=-0.001"], names: "--commit-deadline")
        try assertFlagError(base + ["--commit-deadline", "nan"], names: "--commit-deadline")
        try assertFlagError(base + ["--commit-deadline", "soon"], names: "--commit-deadline")
    }
}
