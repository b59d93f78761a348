import Foundation
import RoomKitTestSupport
import XCTest

/// The progress line counts rooms, not attempts (issue #26: "526390 of
/// 300000 done"): against a roomd whose request bucket makes the logins
/// wait longer than the login timeout, `done` never exceeds the total and
/// the last line has every room in.
final class LoginProgressRoomsTests: XCTestCase {
    func testRun_whenLoginsMustWaitTheirTurn_theProgressCountsRooms() throws {
        // 600 logins at 142/s take 4 s, twice the login timeout. (A 1 s
        // timeout at twice the rate was too short for one reply on a
        // loaded machine under TSan: 9 rooms tried twice.)
        let roomd = RoomdProcess(secret: "rooms-secret", arguments: ["--rate-limit", "150", "--rate-limit-burst", "15"])
        try roomd.start()
        defer { roomd.stop() }
        let directory = try temporaryDirectory("progress-rooms")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let rooms = 600
        let list = (0..<rooms).map { "\"room-\($0)\"" }.joined(separator: ",")
        try """
            {"server": "ws://127.0.0.1:\(roomd.port)/v1/rooms", "user": {"id": "many"},
             "auth": {"secret": "rooms-secret"}, "rooms": [\(list)], "loginTimeout": 2}
            """.write(toFile: directory + "/bot.json", atomically: true, encoding: .utf8)
        let bot = try startProduct("roombot", ["run", "--config", directory + "/bot.json", "--events", "-",
                                               "--progress-interval", "0.1"])
        XCTAssertTrue(bot.waitFor("logins: \(rooms) of \(rooms) done", timeout: 60), bot.stderr)
        bot.signal(SIGTERM)
        let run = bot.finish(timeout: 60)
        let regex = try NSRegularExpression(pattern: #"^roombot: logins: (\d+) of (\d+) done \((\d+) LOGINED, (\d+) LOGIN_FAILED\)$"#)
        var lines: [[Int]] = []
        for line in run.stderr.split(separator: "\n").map(String.init) {
            guard let match = regex.firstMatch(in: line, range: NSRange(line.startIndex..., in: line)) else { continue }
            lines.append((1...4).map { Int(line[Range(match.range(at: $0), in: line)!])! })
        }
        XCTAssertEqual(lines.last, [rooms, rooms, rooms, 0], run.stderr)
        XCTAssertTrue(lines.allSatisfy { $0[0] <= $0[1] && $0[1] == rooms }, "done never exceeds the rooms: \(lines)")
        XCTAssertEqual(run.stdout.components(separatedBy: #""reason":"LOGINING""#).count - 1, rooms, "one attempt per room")
    }
}
