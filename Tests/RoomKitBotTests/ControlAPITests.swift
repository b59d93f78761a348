import Foundation
import Logging
import RoomKit
import RoomKitBot
import RoomKitProtocol
import RoomKitTestSupport
import XCTest

final class ControlAPITests: XCTestCase {
    func testEveryControlEndpoint_answersOnceTheOutcomeIsKnown() async throws {
        let harness = try BotHarness()
        let rewrite = try builtProduct("liburl-rewrite.so")
        let manifest = try harness.writeConfig(["manifestVersion": 1, "plugins": [
            ["name": "url-rewrite", "library": .string(rewrite), "abi": 1, "hooks": ["urlInterrupter"],
             "config": ["from": "http://", "to": "https://cdn.example/"]],
        ]], name: "plugins.json")
        var json = harness.standardConfig(rooms: ["lobby"])
        if case .object(var fields) = json { fields["manifest"] = "plugins.json"; json = .object(fields) }
        let path = try harness.writeConfig(json)
        _ = manifest
        var logger = Logger(label: "test.bot")
        logger.logLevel = .error
        let runner = try BotRunner(config: try BotConfig(path: path), logger: logger)
        try await runner.start()
        let port = try XCTUnwrap(runner.controlPort)

        var (status, body) = http(port, "GET", "/v1/rooms")
        XCTAssertEqual(status, 200)
        let rooms = try JSON.parse(body).arrayValue ?? []
        XCTAssertEqual(rooms.first?["reason"], "LOGINED")
        XCTAssertEqual(rooms.first?["phase"], "connected")

        (status, body) = http(port, "POST", "/v1/rooms/extra/login", "{}")
        XCTAssertEqual(status, 200, body)
        XCTAssertEqual(try JSON.parse(body)["reason"], "LOGINED")
        (status, body) = http(port, "POST", "/v1/rooms/denied/login", #"{"token":"not-a-jwt"}"#)
        XCTAssertEqual(status, 409)
        XCTAssertEqual(try JSON.parse(body)["reason"], "LOGIN_FAILED")
        XCTAssertEqual(try JSON.parse(body)["errorCode"], 1002033)
        (status, body) = http(port, "POST", "/v1/rooms/nowhere/logout")
        XCTAssertEqual(status, 404)
        XCTAssertEqual(try JSON.parse(body), ["reason": "LOGOUT_FAILED", "errorCode": 1002002])

        (status, body) = http(port, "POST", "/v1/rooms/lobby/state", #"{"patch":{"globalState":{"topic":"x"}}}"#)
        XCTAssertEqual(status, 200, body)
        XCTAssertNotNil(try JSON.parse(body)["seq"]?.int64Value)
        (status, body) = http(port, "POST", "/v1/rooms/lobby/magix", #"{"event":"chat","payload":"hi"}"#)
        XCTAssertEqual(status, 200, body)
        (status, body) = http(port, "POST", "/v1/rooms/lobby/images", #"{"uuid":"i1","url":"http://img/1.png","x":0,"y":0,"width":1,"height":1}"#)
        XCTAssertEqual(status, 200, body)
        XCTAssertEqual(try JSON.parse(body)["url"], "https://cdn.example/img/1.png", "url after the URL interrupters")
        (status, body) = http(port, "POST", "/v1/rooms/lobby/scenes", #"{"dir":"/deck","scenes":[{"name":"p1","ppt":{"src":"http://p/1.png","width":4,"height":3}}]}"#)
        XCTAssertEqual(status, 200, body)
        (status, body) = http(port, "POST", "/v1/rooms/lobby/state", #"{"patch":{"nope":1}}"#)
        XCTAssertEqual(status, 400)
        XCTAssertEqual(try JSON.parse(body)["code"], 1009006)
        (status, body) = http(port, "POST", "/v1/rooms/ghost/magix", #"{"event":"x","payload":1}"#)
        XCTAssertEqual(status, 404)
        XCTAssertEqual(try JSON.parse(body)["code"], 1009005)
        (status, _) = http(port, "POST", "/v1/rooms/lobby/magix", "not json")
        XCTAssertEqual(status, 400)

        (status, body) = http(port, "POST", "/v1/rooms/extra/switch", #"{"to":"other"}"#)
        XCTAssertEqual(status, 200, body)
        XCTAssertEqual(try JSON.parse(body)["room"], "other")
        XCTAssertEqual(runner.host.room("extra")?.reason, .logout)
        XCTAssertEqual(runner.store.joinedRooms, ["other"])

        (status, body) = http(port, "GET", "/v1/plugins")
        XCTAssertEqual(status, 200)
        XCTAssertEqual(try JSON.parse(body)[0]?["name"], "url-rewrite")
        XCTAssertEqual(try JSON.parse(body)[0]?["status"], "loaded")
        XCTAssertEqual(try JSON.parse(body)[0]?["isolation"], "process")
        XCTAssertEqual(try JSON.parse(body)[0]?["process"]?["state"], "running")
        XCTAssertEqual(try JSON.parse(body)[0]?["process"]?["crashes"], 0)
        (status, body) = http(port, "POST", "/v1/plugins/url-rewrite/reload")
        XCTAssertEqual(status, 200, body)
        XCTAssertEqual(try JSON.parse(body)["status"], "loaded")
        XCTAssertEqual(http(port, "POST", "/v1/plugins/nope/reload").0, 404)
        XCTAssertEqual(runner.host.room("lobby")?.phase, .connected, "a reload touches no room")
        XCTAssertEqual(http(port, "GET", "/healthz").1, "ok")
        let metrics = http(port, "GET", "/metrics").1
        for name in ["roombot_sessions{reason=\"LOGINED\"}", "roombot_events_total",
                     "roombot_plugin_calls_total{plugin=\"url-rewrite\"}", "roombot_plugin_failures_total",
                     "roomkit_plugin_call_seconds_bucket{", "roombot_event_loop_lag_seconds",
                     "roomkit_connection_up{server=", "roombot_plugin_queue_depth{plugin=\"url-rewrite\"}"] {
            XCTAssertTrue(metrics.contains(name), "metrics lack \(name)")
        }
        XCTAssertEqual(http(port, "GET", "/v1/nope").0, 404)

        (status, body) = http(port, "POST", "/v1/logout")
        XCTAssertEqual(status, 200)
        XCTAssertEqual(try JSON.parse(body)["rooms"], ["lobby", "other"])
        await runner.stop()

        // The event log: one JSON object per line, ts and event first, in order.
        let log = try String(contentsOfFile: harness.directory + "/events.ndjson", encoding: .utf8)
        let lines = log.split(separator: "\n").map(String.init)
        XCTAssertTrue(lines.allSatisfy { $0.hasPrefix(#"{"ts":"#) && $0.contains(#","event":""#) })
        let parsed = try lines.map { try JSON.parse($0) }
        XCTAssertTrue(parsed.contains { $0["event"] == "plugin" && $0["status"] == "loaded" && $0["plugin"] == "url-rewrite" })
        let lobby = parsed.filter { $0["event"] == "roomStateChanged" && $0["room"] == "lobby" }.compactMap { $0["reason"]?.stringValue }
        XCTAssertEqual(lobby, ["LOGINING", "LOGINED", "LOGOUT"])
        XCTAssertTrue(parsed.contains { $0["event"] == "roomStateChanged" && $0["reason"] == "LOGOUT_FAILED" && $0["errorCode"] == 1002002 })
        try harness.close()
    }
}
