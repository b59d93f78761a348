import Foundation
import RoomKitProtocol
import RoomKitTokens
import RoomKitTestSupport
import XCTest

/// `roombot replay` progress: without a terminal, a line every
/// `--progress-interval` and one at the end, with position, duration and
/// speed; stdout stays the event log.
final class ReplayProgressTests: XCTestCase {
    /// A room recorded for about 1.5 s: a bot posts magix events through its control API.
    private func recordRoom(_ roomd: RoomdProcess, directory: String) async throws {
        try """
            {"server": "ws://127.0.0.1:\(roomd.port)/v1/rooms", "user": {"id": "rec"},
             "auth": {"secret": "progress-secret"}, "rooms": ["talk"], "control": "127.0.0.1:0"}
            """.write(toFile: directory + "/bot.json", atomically: true, encoding: .utf8)
        let bot = try startProduct("roombot", ["run", "--config", directory + "/bot.json"])
        defer {
            bot.signal(SIGTERM)
            _ = bot.finish()
        }
        XCTAssertTrue(bot.waitFor("control on "), bot.stderr)
        let control = try XCTUnwrap(bot.stderr.split(separator: "\n").first { $0.hasPrefix("control on ") }
            .flatMap { Int($0.dropFirst("control on ".count)) })
        await eventually(15, "talk LOGINED") { http(control, "GET", "/v1/rooms").1.contains(#""reason":"LOGINED""#) }
        for i in 0..<4 {
            XCTAssertEqual(http(control, "POST", "/v1/rooms/talk/magix", #"{"event":"tick","payload":\#(i)}"#).0, 200)
            try await Task.sleep(for: .milliseconds(500))
        }
    }

    func testReplay_withoutATerminal_printsPeriodicProgressLinesAndAFinalOne() async throws {
        let roomd = RoomdProcess(secret: "progress-secret")
        try roomd.start()
        defer { roomd.stop() }
        let directory = try temporaryDirectory("progress")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try await recordRoom(roomd, directory: directory)
        let now = Int64(Date().timeIntervalSince1970)
        let token = TokenSigner(secret: "progress-secret").sign(TokenClaims(sub: "viewer", room: "talk", role: .reader, exp: now + 60, iat: now))
        let run = try runProduct("roombot", ["replay", "--server", "ws://127.0.0.1:\(roomd.port)/v1/rooms", "--room", "talk",
                                             "--speed", "2", "--progress-interval", "0.2"],
                                 environment: ["ROOMBOT_TOKEN": token], timeout: 60)
        XCTAssertEqual(run.status, 0, run.stderr)
        let pattern = #"^roombot: replay talk: ([0-9]+\.[0-9]) s / ([0-9]+\.[0-9]) s \(([0-9]+)%\) at 2x$"#
        let regex = try NSRegularExpression(pattern: pattern)
        var positions: [Double] = []
        var last: (Double, Double, Int)?
        for line in run.stderr.split(separator: "\n").map(String.init) {
            guard let match = regex.firstMatch(in: line, range: NSRange(line.startIndex..., in: line)) else {
                XCTFail("unexpected stderr line: \(line)")
                continue
            }
            func group(_ i: Int) -> String { String(line[Range(match.range(at: i), in: line)!]) }
            positions.append(Double(group(1))!)
            last = (Double(group(1))!, Double(group(2))!, Int(group(3))!)
        }
        // About 1.5 s of recording at 2x: ~0.75 s of playback, a line per 0.2 s, plus the last.
        XCTAssertGreaterThanOrEqual(positions.count, 3, run.stderr)
        XCTAssertEqual(positions, positions.sorted(), "the position never goes back: \(positions)")
        let final = try XCTUnwrap(last)
        XCTAssertEqual(final.2, 100, run.stderr)
        XCTAssertEqual(final.0, final.1, "the last line is at the end")
        XCTAssertGreaterThan(final.1, 1.0, "the recording lasts over a second: \(run.stderr)")
        // stdout is the event log, untouched.
        for line in run.stdout.split(separator: "\n") { XCTAssertNoThrow(try JSON.parse(String(line)), String(line)) }
        XCTAssertTrue(run.stdout.contains(#""magixEvent":"tick""#), run.stdout)
    }

    func testReplay_progressIntervalZero_printsNoProgress() async throws {
        let roomd = RoomdProcess(secret: "progress-secret")
        try roomd.start()
        defer { roomd.stop() }
        let directory = try temporaryDirectory("progress0")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try await recordRoom(roomd, directory: directory)
        let now = Int64(Date().timeIntervalSince1970)
        let token = TokenSigner(secret: "progress-secret").sign(TokenClaims(sub: "viewer", room: "talk", role: .reader, exp: now + 60, iat: now))
        let run = try runProduct("roombot", ["replay", "--server", "ws://127.0.0.1:\(roomd.port)/v1/rooms", "--room", "talk",
                                             "--speed", "16", "--progress-interval", "0", "--events", directory + "/events"],
                                 environment: ["ROOMBOT_TOKEN": token], timeout: 60)
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertEqual(run.stderr, "")
    }

    func testReplay_onATerminal_redrawsOneLineInPlace() async throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/script") else { throw XCTSkip("no script(1) for a pty") }
        let roomd = RoomdProcess(secret: "progress-secret")
        try roomd.start()
        defer { roomd.stop() }
        let directory = try temporaryDirectory("progress-tty")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try await recordRoom(roomd, directory: directory)
        let now = Int64(Date().timeIntervalSince1970)
        let token = TokenSigner(secret: "progress-secret").sign(TokenClaims(sub: "viewer", room: "talk", role: .reader, exp: now + 60, iat: now))
        let command = [try builtProduct("roombot"), "replay", "--server", "ws://127.0.0.1:\(roomd.port)/v1/rooms", "--room", "talk",
                       "--speed", "2", "--events", directory + "/events"].map { "'\($0)'" }.joined(separator: " ")
        // script(1) runs the command on a pseudo-terminal and copies what it writes.
        let run = try XCTUnwrap(runTool(["script", "-qfec", command, "/dev/null"], environment: ["ROOMBOT_TOKEN": token, "TERM": "xterm"]))
        XCTAssertEqual(run.status, 0, run.stdout)
        let redraws = run.stdout.components(separatedBy: "\r\u{1B}[Kreplay talk: ").count - 1
        XCTAssertGreaterThanOrEqual(redraws, 2, "redrawn 4 times a second for ~0.75 s: \(run.stdout.debugDescription)")
        XCTAssertFalse(run.stdout.contains("roombot: replay talk:"), "no periodic lines on a terminal")
        let lastLine = try XCTUnwrap(run.stdout.components(separatedBy: "\r\u{1B}[K").last)
        XCTAssertTrue(lastLine.hasPrefix("replay talk: ") && lastLine.contains("(100%) at 2x"), lastLine.debugDescription)
        XCTAssertEqual(run.stdout.filter { $0 == "\n" || $0 == "\r\n" }.count, 1, "one line, ended once: \(run.stdout.debugDescription)")
        XCTAssertTrue(fileText(directory + "/events")?.contains(#""magixEvent":"tick""#) ?? false)
    }
}
