import Foundation
import RoomKitTestSupport
import XCTest

/// `roombot run` joining more than 100 rooms reports its logins as they
/// advance, and ends with the full count; with fewer it stays silent.
final class LoginProgressTests: XCTestCase {
    private func runBot(rooms: Int, arguments: [String] = []) throws -> Finished {
        let roomd = RoomdProcess(secret: "many-secret")
        try roomd.start()
        defer { roomd.stop() }
        let directory = try temporaryDirectory("logins")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let list = (0..<rooms).map { "\"room-\($0)\"" }.joined(separator: ",")
        try """
            {"server": "ws://127.0.0.1:\(roomd.port)/v1/rooms", "user": {"id": "many"},
             "auth": {"secret": "many-secret"}, "rooms": [\(list)], "control": "127.0.0.1:0"}
            """.write(toFile: directory + "/bot.json", atomically: true, encoding: .utf8)
        let bot = try startProduct("roombot", ["run", "--config", directory + "/bot.json", "--events", "-"] + arguments)
        XCTAssertTrue(bot.waitFor("control on ", timeout: 60), bot.stderr)
        // The control API is up before the logins: wait until every room is in.
        let deadline = Date().addingTimeInterval(60)
        while bot.stdout.components(separatedBy: #""reason":"LOGINED""#).count - 1 < rooms, Date() < deadline {
            usleep(20_000)
        }
        XCTAssertEqual(bot.stdout.components(separatedBy: #""reason":"LOGINED""#).count - 1, rooms, bot.stderr)
        if rooms > 100 { XCTAssertTrue(bot.waitFor("logins: \(rooms) of \(rooms) done", timeout: 10), bot.stderr) }
        bot.signal(SIGTERM)
        return bot.finish(timeout: 60)
    }

    func testRun_withMoreThan100Rooms_reportsLoginsAsTheyAdvance() throws {
        let run = try runBot(rooms: 120, arguments: ["--progress-interval", "0.05"])
        XCTAssertEqual(run.status, 0, run.stderr)
        let regex = try NSRegularExpression(pattern: #"^roombot: logins: (\d+) of (\d+) done \((\d+) LOGINED, (\d+) LOGIN_FAILED\)$"#)
        var lines: [[Int]] = []
        for line in run.stderr.split(separator: "\n").map(String.init) {
            guard let match = regex.firstMatch(in: line, range: NSRange(line.startIndex..., in: line)) else { continue }
            lines.append((1...4).map { Int(line[Range(match.range(at: $0), in: line)!])! })
        }
        let last = try XCTUnwrap(lines.last, run.stderr)
        XCTAssertEqual(last, [120, 120, 120, 0], "the last line counts every room: \(run.stderr)")
        XCTAssertEqual(lines.map { $0[0] }, lines.map { $0[0] }.sorted(), "counts only grow")
        XCTAssertTrue(lines.allSatisfy { $0[0] == $0[2] + $0[3] && $0[1] <= 120 }, "\(lines)")
        XCTAssertEqual(Set(lines.dropLast().map { $0[0] }).count, lines.count - 1, "a periodic line only when the count moved")
    }

    func testRun_with100RoomsOrFewer_printsNoLoginProgress() throws {
        let run = try runBot(rooms: 100, arguments: ["--progress-interval", "0.05"])
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertFalse(run.stderr.contains("logins:"), run.stderr)
    }
}
