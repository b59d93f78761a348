import Foundation
import RoomKitProtocol
import RoomKitTokens
import RoomKitTestSupport
import XCTest

/// The dashboard as an operator meets it: the real `roombot` binary on a real
/// `roomd` binary, over real sockets.
final class DashboardProcessTests: XCTestCase {
    func testRunningRoombot_servesThePage_andStreamsAKickFromRoomd() throws {
        let secret = "dashboard-process-secret"
        let roomd = RoomdProcess(secret: secret)
        try roomd.start()
        defer { roomd.stop() }
        let directory = roomd.dataDirectory + "-bot"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let controlToken = "process-control-token-0123"
        let config: JSON = [
            "server": .string("ws://127.0.0.1:\(roomd.port)/v1/rooms"), "user": ["id": "bot-1", "name": "Helper"],
            "auth": ["secret": .string(secret)], "rooms": ["lobby", "hall"], "control": "127.0.0.1:0",
            "controlToken": .string(controlToken), "events": .string(directory + "/events.ndjson"),
        ]
        let path = directory + "/bot.json"
        try Data(config.serialized()).write(to: URL(fileURLWithPath: path))
        let bot = try ChildProcess("roombot", ["run", "--config", path, "--log-level", "warning"])
        let seen = ChildProcess.read(bot.errors, until: "control on ", while: { bot.process.isRunning })
        let digits = seen.components(separatedBy: "control on ").last?.prefix { $0.isNumber } ?? ""
        let port = try XCTUnwrap(Int(digits), seen)

        // The control API serves before the first logins: wait until both rooms are in.
        let deadline = Date().addingTimeInterval(20)
        while Date() < deadline {
            let listing = httpRequest(port: port, "GET", "/v1/rooms", token: controlToken)
            if listing.components(separatedBy: #""reason":"LOGINED""#).count - 1 == 2 { break }
            usleep(20_000)
        }
        let page = httpRequest(port: port, "GET", "/")
        XCTAssertTrue(page.hasPrefix("HTTP/1.1 200"), page)
        XCTAssertTrue(page.contains("<title>roombot dashboard</title>"))
        XCTAssertTrue(httpRequest(port: port, "GET", "/v1/events/stream").hasPrefix("HTTP/1.1 401"))

        let stream = try StreamReader(port: port, token: controlToken)
        XCTAssertTrue(stream.read { $0.contains("roombot event stream") }, stream.text)
        let now = Int64(Date().timeIntervalSince1970)
        let admin = TokenSigner(secret: secret).sign(TokenClaims(sub: "ops", room: "*", role: .admin, exp: now + 600, iat: now))
        let kick = httpRequest(port: roomd.port, "POST", "/v1/admin/rooms/hall/kick", token: admin, body: #"{"user":"bot-1"}"#)
        XCTAssertTrue(kick.contains(#""kicked":1"#), kick)
        XCTAssertTrue(stream.read { _ in stream.events.contains { $0.contains(#""event":"kickedWithReason""#) } }, stream.text)
        let kicks = stream.events.filter { $0.contains(#""reason":"KICK_OUT""#) && $0.contains(#""event":"roomStateChanged""#) }
        XCTAssertEqual(kicks.count, 1, stream.text)
        XCTAssertTrue(kicks.first?.contains(#""room":"hall""#) == true)

        let rooms = try JSON.parse(httpRequest(port: port, "GET", "/v1/rooms?filter=KICK_OUT", token: controlToken)
            .components(separatedBy: "\r\n\r\n").dropFirst().joined())
        XCTAssertEqual(rooms["rooms"]?.arrayValue?.compactMap { $0["room"]?.stringValue }, ["hall"])
        XCTAssertEqual(rooms["total"], 2)

        bot.signal(SIGTERM)
        XCTAssertEqual(bot.finish().0, 0, "a bot with an open stream still stops cleanly")
        XCTAssertTrue(stream.read { _ in false } == false, "the stream ends when the bot stops")
        XCTAssertEqual(stream.text.components(separatedBy: #""reason":"LOGOUT""#).count - 1, 1,
                       "the bot's own logout from lobby (hall was already kicked) reached the stream before it ended")
    }
}
