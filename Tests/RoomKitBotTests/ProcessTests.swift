import Foundation
import RoomKit
import RoomKitProtocol
import RoomKitTestSupport
import XCTest

final class ProcessTests: XCTestCase {
    /// Reads the child's stderr until "control on PORT" appears.
    private func controlPort(_ child: ChildProcess) throws -> Int {
        let deadline = Date().addingTimeInterval(10)
        var seen = ""
        while Date() < deadline {
            let chunk = child.errors.fileHandleForReading.availableData
            if chunk.isEmpty { usleep(20_000); continue }
            seen += String(decoding: chunk, as: UTF8.self)
            if let range = seen.range(of: "control on ") {
                let digits = seen[range.upperBound...].prefix { $0.isNumber }
                if let port = Int(digits), seen[range.upperBound...].contains("\n") { return port }
            }
        }
        XCTFail("no control port in: \(seen)")
        return 0
    }

    func testSIGTERM_logsOutOfEveryRoom_othersSeeTheUserLeaveAtOnce_andExits0() async throws {
        let harness = try BotHarness(heartbeatTimeout: .seconds(30))
        let watcher = try Watcher(url: harness.serverURL)
        for room in ["lobby", "room-2"] {
            try await watcher.host.loginRoom(room, user: LoginUser(id: "watcher"), token: harness.token("watcher"))
        }
        let path = try harness.writeConfig(harness.standardConfig(rooms: ["lobby", "room-2"]))
        let bot = try ChildProcess("roombot", ["run", "--config", path, "--log-level", "warning"])
        _ = try controlPort(bot)
        await eventually(5, "bot joined both rooms") {
            watcher.events.all.filter { if case .userUpdate(_, .add, let u) = $0 { return u.contains { $0.userId == "bot-1" } }; return false }.count == 2
        }
        bot.signal(SIGTERM)
        let started = Date()
        await eventually(2, "deletes seen at once, not after the 30 s heartbeat timeout") { watcher.deletes(of: "bot-1") == 2 }
        XCTAssertLessThan(Date().timeIntervalSince(started), 2)
        let (status, _, _) = bot.finish()
        XCTAssertEqual(status, 0)
        let log = try String(contentsOfFile: harness.directory + "/events.ndjson", encoding: .utf8)
        XCTAssertEqual(log.components(separatedBy: #""reason":"LOGOUT""#).count - 1, 2, "every room reaches LOGOUT")
        XCTAssertTrue(log.hasSuffix("}\n"), "flushed whole lines")
        try await watcher.close()
        try harness.close()
    }

    func testRestart_rejoinsConfiguredRoomsAndRoomsJoinedThroughTheControlAPI() async throws {
        let harness = try BotHarness()
        let path = try harness.writeConfig(harness.standardConfig(rooms: ["lobby"]))
        let first = try ChildProcess("roombot", ["run", "--config", path, "--log-level", "warning"])
        var port = try controlPort(first)
        XCTAssertEqual(http(port, "POST", "/v1/rooms/joined-later/login", "{}").0, 200)
        first.signal(SIGTERM)
        XCTAssertEqual(first.finish().0, 0)

        let second = try ChildProcess("roombot", ["run", "--config", path, "--log-level", "warning"])
        port = try controlPort(second)
        // The control API is up before the logins: wait until the bot is ready.
        let secondPort = port
        await eventually(10, "ready") { http(secondPort, "GET", "/readyz").0 == 200 }
        let rooms = try JSON.parse(http(port, "GET", "/v1/rooms").1).arrayValue ?? []
        let logined = rooms.filter { $0["reason"] == "LOGINED" }.compactMap { $0["room"]?.stringValue }.sorted()
        XCTAssertEqual(logined, ["joined-later", "lobby"])
        second.signal(SIGTERM)
        XCTAssertEqual(second.finish().0, 0)
        try harness.close()
    }
}
