import Foundation
import Logging
import RoomKit
import RoomKitBot
import RoomKitProtocol
import RoomKitTokens
import RoomKitTestSupport
import XCTest

/// Issue 20 items 7, 9, 13, 15 and 16 through the control API of a bot
/// (real HTTP on 127.0.0.1) against a roomd on its own loop.
final class ControlAPILifecycleTests: XCTestCase {
    private func runner(_ harness: BotHarness, _ config: JSON) throws -> BotRunner {
        let path = try harness.writeConfig(config)
        var logger = Logger(label: "test.bot")
        logger.logLevel = .critical
        return try BotRunner(config: try BotConfig(path: path), logger: logger)
    }

    private func config(_ harness: BotHarness, rooms: [String], auth: JSON? = nil) -> JSON {
        guard case .object(var fields) = harness.standardConfig(rooms: rooms) else { return .null }
        if let auth { fields["auth"] = auth }
        return .object(fields)
    }

    /// The event log's reasons for `room`, in order.
    private func loggedReasons(_ harness: BotHarness, _ room: String) throws -> [String] {
        let text = fileText(harness.directory + "/events.ndjson") ?? ""
        return try text.split(separator: "\n").map { try JSON.parse(Array($0.utf8)) }
            .filter { $0["event"] == "roomStateChanged" && $0["room"] == .string(room) }
            .compactMap { line in line["reason"]?.stringValue.map { "\($0) \(line["errorCode"]?.int64Value ?? -1)" } }
    }

    /// The rooms joined at run time, as the bot's store (BotStore) holds them.
    private func stateFile(_ harness: BotHarness) -> [String] {
        guard let store = try? BotStore(path: harness.directory + "/bot.state.sqlite", logger: Logger(label: "test")) else {
            XCTFail("cannot open the bot's store")
            return []
        }
        defer { store.close() }
        return store.rooms(configured: []).sorted()
    }

    private func adminToken(_ harness: BotHarness) -> String {
        let now = Int64(Date().timeIntervalSince1970)
        return TokenSigner(secret: harness.secret).sign(TokenClaims(sub: "ops", room: "*", role: .admin, exp: now + 3600, iat: now))
    }

    func testSwitch_refusedLocally_leavesTheSourceJoined_andTheStateFileFollowsEveryOutcome() async throws {
        let harness = try BotHarness()
        let bot = try runner(harness, config(harness, rooms: ["lobby"]))
        try await bot.start()
        let port = try XCTUnwrap(bot.controlPort)
        XCTAssertEqual(http(port, "POST", "/v1/rooms/extra/login", "{}").0, 200)
        XCTAssertEqual(stateFile(harness), ["extra"])

        for (target, code) in [("bad id", 1_009_006), ("lobby", 1_009_007), ("extra", 1_009_007)] {
            let (status, body) = http(port, "POST", "/v1/rooms/extra/switch", #"{"to":"\#(target)"}"#)
            XCTAssertEqual(status, 409, body)
            XCTAssertEqual(try JSON.parse(body)["reason"], "LOGIN_FAILED", body)
            XCTAssertEqual(try JSON.parse(body)["errorCode"]?.intValue, code, body)
            XCTAssertEqual(bot.host.room("extra")?.reason, .logined, "switch to '\(target)' must not leave the source")
            XCTAssertEqual(stateFile(harness), ["extra"], "after the switch to '\(target)'")
        }
        XCTAssertEqual(try loggedReasons(harness, "extra"), ["LOGINING 0", "LOGINED 0"])

        // The target's own login fails: the source stays left, and is forgotten.
        var (status, body) = http(port, "POST", "/v1/rooms/extra/switch", #"{"to":"other","token":"not-a-jwt"}"#)
        XCTAssertEqual(status, 409, body)
        XCTAssertEqual(try JSON.parse(body)["errorCode"], 1_002_033)
        XCTAssertEqual(bot.host.room("extra")?.reason, .logout)
        XCTAssertEqual(stateFile(harness), [])

        // A switch that works moves the state file along.
        XCTAssertEqual(http(port, "POST", "/v1/rooms/extra/login", "{}").0, 200)
        (status, body) = http(port, "POST", "/v1/rooms/extra/switch", #"{"to":"other"}"#)
        XCTAssertEqual(status, 200, body)
        XCTAssertEqual(stateFile(harness), ["other"])
        await bot.stop()
        XCTAssertEqual(stateFile(harness), ["other"], "a shutdown keeps the rooms a restart rejoins")
        try harness.close()
    }

    func testLogin_withNoTokenAvailable_answers409LoginFailed_andTheLogShowsLoginingThenLoginFailed() async throws {
        let harness = try BotHarness()
        let auth: JSON = ["tokens": ["lobby": .string(harness.token("bot-1"))]]
        let bot = try runner(harness, config(harness, rooms: ["lobby"], auth: auth))
        try await bot.start()
        let port = try XCTUnwrap(bot.controlPort)
        let (status, body) = http(port, "POST", "/v1/rooms/elsewhere/login", "{}")
        XCTAssertEqual(status, 409, body)
        XCTAssertEqual(try JSON.parse(body)["reason"], "LOGIN_FAILED")
        XCTAssertEqual(try JSON.parse(body)["errorCode"], 1_002_033)
        XCTAssertNil(try JSON.parse(body)["code"], "not the generic error shape")

        // A switch to a room with no token is refused before leaving the source.
        let (switched, answer) = http(port, "POST", "/v1/rooms/lobby/switch", #"{"to":"elsewhere"}"#)
        XCTAssertEqual(switched, 409, answer)
        XCTAssertEqual(try JSON.parse(answer)["errorCode"], 1_002_033)
        XCTAssertEqual(bot.host.room("lobby")?.reason, .logined)
        await bot.stop()
        XCTAssertEqual(try loggedReasons(harness, "lobby"), ["LOGINING 0", "LOGINED 0", "LOGOUT 0"], "left only at the stop")
        XCTAssertEqual(try loggedReasons(harness, "elsewhere"), ["LOGINING 0", "LOGIN_FAILED 1002033"])
        try harness.close()
    }

    func testReadyz_is503ListingTheRoomsNotIn_until200_andHealthzStaysOk() async throws {
        let harness = try BotHarness()
        let auth: JSON = ["tokens": ["lobby": .string(harness.token("bot-1")), "room-2": "not-a-jwt"]]
        let bot = try runner(harness, config(harness, rooms: ["lobby", "room-2"], auth: auth))
        try await bot.start()
        let port = try XCTUnwrap(bot.controlPort)
        var (status, body) = http(port, "GET", "/readyz")
        XCTAssertEqual(status, 503, body)
        XCTAssertEqual(try JSON.parse(body), ["ready": false, "notReady": [
            ["room": "room-2", "reason": "LOGIN_FAILED", "errorCode": 1_002_033],
        ]])
        XCTAssertEqual(http(port, "GET", "/healthz").0, 200, "liveness does not depend on the rooms")
        XCTAssertEqual(http(port, "GET", "/healthz").1, "ok")

        (status, body) = http(port, "POST", "/v1/rooms/room-2/login", #"{"token":"\#(harness.token("bot-1"))"}"#)
        XCTAssertEqual(status, 200, body)
        (status, body) = http(port, "GET", "/readyz")
        XCTAssertEqual(status, 200, body)
        XCTAssertEqual(body, "ready")

        // A configured room that is kicked is not ready any more.
        let answer = httpRequest(port: harness.server.port, "POST", "/v1/admin/rooms/lobby/kick", token: adminToken(harness),
                                 body: #"{"user":"bot-1","reason":"test"}"#)
        XCTAssertTrue(answer.hasSuffix(#"{"kicked":1}"#), answer)
        await eventually(3, "KICK_OUT") { bot.host.room("lobby")?.reason == .kickOut }
        (status, body) = http(port, "GET", "/readyz")
        XCTAssertEqual(status, 503)
        XCTAssertEqual(try JSON.parse(body)["notReady"]?[0]?["reason"], "KICK_OUT")
        await bot.stop()
        try harness.close()
    }

    func testRooms_listsNoRoomNeverJoined_andAKickedRoomIsNotWritable() async throws {
        let harness = try BotHarness()
        let bot = try runner(harness, config(harness, rooms: ["lobby"]))
        try await bot.start()
        let port = try XCTUnwrap(bot.controlPort)
        for room in ["nowhere", "ghost", "nowhere"] {
            XCTAssertEqual(http(port, "POST", "/v1/rooms/\(room)/logout").0, 404)
        }
        XCTAssertEqual(http(port, "POST", "/v1/rooms/denied/login", #"{"token":"not-a-jwt"}"#).0, 409)
        var rooms = try JSON.parse(http(port, "GET", "/v1/rooms").1).arrayValue ?? []
        XCTAssertEqual(rooms.compactMap { $0["room"]?.stringValue }, ["lobby"])
        XCTAssertEqual(rooms.first?["writable"], true)

        let answer = httpRequest(port: harness.server.port, "POST", "/v1/admin/rooms/lobby/kick", token: adminToken(harness),
                                 body: #"{"user":"bot-1","reason":"test"}"#)
        XCTAssertTrue(answer.hasSuffix(#"{"kicked":1}"#), answer)
        await eventually(3, "KICK_OUT") { bot.host.room("lobby")?.reason == .kickOut }
        rooms = try JSON.parse(http(port, "GET", "/v1/rooms").1).arrayValue ?? []
        XCTAssertEqual(rooms.count, 1)
        XCTAssertEqual(rooms.first?["reason"], "KICK_OUT")
        XCTAssertEqual(rooms.first?["writable"], false)
        await bot.stop()
        try harness.close()
    }

    func testMetrics_areCountersWithHelp_andAScrapeChangesNothing() async throws {
        let harness = try BotHarness()
        let bot = try runner(harness, config(harness, rooms: ["lobby", "room-2"]))
        try await bot.start()
        let port = try XCTUnwrap(bot.controlPort)
        func eventsTotal(_ text: String) -> Double? {
            text.split(separator: "\n").first { $0.hasPrefix("roombot_events_total ") }
                .flatMap { Double($0.split(separator: " ").last ?? "") }
        }
        let first = http(port, "GET", "/metrics").1
        let second = http(port, "GET", "/metrics").1
        XCTAssertFalse(first.contains("per_second"), "rates are Prometheus's job")
        let lines = second.split(separator: "\n")
        let families = lines.filter { $0.hasPrefix("# TYPE ") }.map { $0.split(separator: " ")[2] }
        let helped = Set(lines.filter { $0.hasPrefix("# HELP ") }.map { $0.split(separator: " ")[2] })
        XCTAssertFalse(families.isEmpty)
        for family in families { XCTAssertTrue(helped.contains(family), "\(family) has no # HELP line") }
        XCTAssertTrue(second.contains("# TYPE roombot_events_total counter"))
        // Two rooms joined: LOGINING, phase, LOGINED, writable, ... each; no event between the scrapes.
        let total = try XCTUnwrap(eventsTotal(first))
        XCTAssertGreaterThanOrEqual(total, 8)
        XCTAssertEqual(eventsTotal(second), total, "a scrape neither resets nor moves a counter")
        XCTAssertEqual(http(port, "POST", "/v1/rooms/lobby/logout").0, 200)
        let third = try XCTUnwrap(eventsTotal(http(port, "GET", "/metrics").1))
        XCTAssertGreaterThan(third, total, "the counter only grows")
        await bot.stop()
        try harness.close()
    }
}
