import Foundation
import Logging
import RoomKit
@testable import RoomKitBot
import RoomKitProtocol
import RoomKitTokens
import RoomKitTestSupport
import XCTest

/// The dashboard's identity and room detail routes (docs/DASHBOARD.md):
/// `GET /v1/bot` and `GET /v1/rooms/{id}`, against a running bot on a real roomd.
final class DashboardBotTests: XCTestCase {
    private let controlToken = "dashboard-bot-token-0123"

    private func startBot(_ harness: BotHarness, rooms: [String]) async throws -> BotRunner {
        var json = harness.standardConfig(rooms: rooms)
        if case .object(var fields) = json {
            fields["controlToken"] = .string(controlToken)
            fields["user"] = ["id": "bot-1", "name": "Helper"]
            json = .object(fields)
        }
        let path = try harness.writeConfig(json)
        var logger = Logger(label: "test.bot")
        logger.logLevel = .critical
        let runner = try BotRunner(config: try BotConfig(path: path), logger: logger, build: ("9.9.9-test", "abc123"))
        try await runner.start()
        return runner
    }

    private func get(_ port: Int, _ path: String, token: String?) throws -> (Int, JSON) {
        let text = httpRequest(port: port, "GET", path, token: token)
        let status = Int(text.split(separator: " ").dropFirst().first ?? "") ?? 0
        let body = text.components(separatedBy: "\r\n\r\n").dropFirst().joined(separator: "\r\n\r\n")
        return (status, try JSON.parse(body))
    }

    private func adminToken(_ harness: BotHarness) -> String {
        let now = Int64(Date().timeIntervalSince1970)
        return TokenSigner(secret: harness.secret).sign(TokenClaims(sub: "ops", room: "*", role: .admin, exp: now + 3600, iat: now))
    }

    func testBot_namesItself_andItsConnectionGoesDownWithTheServer() async throws {
        let harness = try BotHarness()
        let runner = try await startBot(harness, rooms: ["lobby"])
        let port = try XCTUnwrap(runner.controlPort)
        XCTAssertEqual(httpRequest(port: port, "GET", "/v1/bot", token: nil).split(separator: " ").dropFirst().first, "401")

        let (status, bot) = try get(port, "/v1/bot", token: controlToken)
        XCTAssertEqual(status, 200)
        XCTAssertEqual(bot["user"]?["id"]?.stringValue, "bot-1")
        XCTAssertEqual(bot["user"]?["name"]?.stringValue, "Helper")
        XCTAssertEqual(bot["version"]?.stringValue, "9.9.9-test")
        XCTAssertEqual(bot["revision"]?.stringValue, "abc123")
        XCTAssertEqual(bot["fleet"]?.boolValue, false)
        XCTAssertGreaterThanOrEqual(bot["uptimeSeconds"]?.intValue ?? -1, 0)
        XCTAssertEqual(bot["errorCodes"]?["1002055"]?.stringValue, "kickedByAdmin")
        XCTAssertEqual(bot["errorCodes"]?.objectValue?.count, ErrorCode.allKnown.count)
        let server = try XCTUnwrap(bot["servers"]?.arrayValue?.first)
        XCTAssertEqual(server["url"]?.stringValue, harness.serverURL)
        XCTAssertEqual(server["state"]?.stringValue, "ready")
        XCTAssertEqual(server["ready"]?.boolValue, true)

        // roomd goes away: the bot's connection is no longer ready, and says why.
        let roomd = harness.server
        try harness.serverLoop.runAndWait { roomd.stop(gracePeriod: .zero) }
        var seen = ""
        await eventually(15, "the server's connection leaves ready") {
            guard let answer = try? get(port, "/v1/bot", token: controlToken).1,
                  let state = answer["servers"]?[0]?["state"]?.stringValue else { return false }
            seen = state
            return answer["servers"]?[0]?["ready"]?.boolValue == false && state != "ready"
        }
        XCTAssertTrue(["connecting", "greeting", "backingOff"].contains(seen), seen)

        await runner.stop()
        try harness.close()
    }

    func testRoomDetail_hasMembersAndTheRoomsOwnLastEvents() async throws {
        let harness = try BotHarness()
        let runner = try await startBot(harness, rooms: ["lobby", "other"])
        let port = try XCTUnwrap(runner.controlPort)

        await eventually(10, "lobby's LOGINED line is kept") {
            let events = (try? get(port, "/v1/rooms/lobby", token: controlToken).1)?["events"]?.arrayValue ?? []
            return events.contains { $0["event"]?.stringValue == "roomStateChanged" && $0["reason"]?.stringValue == "LOGINED" }
        }
        let (status, detail) = try get(port, "/v1/rooms/lobby", token: controlToken)
        XCTAssertEqual(status, 200)
        XCTAssertEqual(detail["room"]?.stringValue, "lobby")
        XCTAssertEqual(detail["reason"]?.stringValue, "LOGINED")
        XCTAssertEqual(detail["errorName"]?.stringValue, "success")
        let members = detail["memberList"]?.arrayValue ?? []
        XCTAssertEqual(members.compactMap { $0["userId"]?.stringValue }, ["bot-1"])
        XCTAssertEqual(members.first?["name"]?.stringValue, "Helper")
        let events = detail["events"]?.arrayValue ?? []
        XCTAssertFalse(events.isEmpty)
        XCTAssertTrue(events.allSatisfy { $0["room"]?.stringValue == "lobby" }, "only lobby's lines: \(events)")

        // Kicked: no session, so no members listed (as `members`), and the code named.
        let kick = httpRequest(port: harness.server.port, "POST", "/v1/admin/rooms/lobby/kick", token: adminToken(harness),
                               body: #"{"user":"bot-1","reason":"detail test"}"#)
        XCTAssertTrue(kick.contains(#""kicked":1"#), kick)
        await eventually(10, "lobby shows KICK_OUT") {
            (try? get(port, "/v1/rooms/lobby", token: controlToken).1)?["reason"]?.stringValue == "KICK_OUT"
        }
        let kicked = try get(port, "/v1/rooms/lobby", token: controlToken).1
        XCTAssertEqual(kicked["errorName"]?.stringValue, "kickedByAdmin")
        XCTAssertEqual(kicked["members"]?.intValue, 0)
        XCTAssertEqual(kicked["memberList"]?.arrayValue?.count, 0)
        XCTAssertTrue((kicked["events"]?.arrayValue ?? []).contains { $0["event"]?.stringValue == "kickedWithReason" })

        let (missing, error) = try get(port, "/v1/rooms/never-here", token: controlToken)
        XCTAssertEqual(missing, 404)
        XCTAssertEqual(error["code"]?.intValue, ErrorCode.roomNotLoggedIn.rawValue)
        XCTAssertTrue(error["message"]?.stringValue?.contains("never-here") == true)
        XCTAssertEqual(httpRequest(port: port, "GET", "/v1/rooms/lobby", token: nil).split(separator: " ").dropFirst().first, "401")

        await runner.stop()
        try harness.close()
    }

    func testRecentLines_keepTheNewestAcrossTheWrap_perRoom() {
        var ring = RecentLines()
        for i in 0..<25 {
            let room = i % 2 == 0 ? "even" : "odd"
            ring.append(EventLogLine(ts: Int64(i), event: "e", room: room, line: Array("\(i)\n".utf8)), limit: 10)
        }
        // The last 10 lines are 15…24; even's are 16, 18, 20, 22, 24.
        XCTAssertEqual(ring.lines(of: "even", limit: 50).map(\.ts), [16, 18, 20, 22, 24])
        XCTAssertEqual(ring.lines(of: "odd", limit: 2).map(\.ts), [21, 23])
        XCTAssertEqual(ring.lines(of: "none", limit: 5).count, 0)
    }
}
