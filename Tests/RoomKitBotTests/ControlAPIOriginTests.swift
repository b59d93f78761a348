import Foundation
import RoomKitProtocol
import RoomKitTestSupport
import XCTest

/// A control API without a `controlToken` listens on loopback, where any web
/// page the operator opens can reach it by DNS rebinding (`Host:` the page's
/// own name) or a cross-site form POST (`Origin:` the page's origin). The real
/// `roombot` refuses both and still serves local tools and its own dashboard.
final class ControlAPIOriginTests: XCTestCase {
    private func startBot(token: String?) throws -> (ChildProcess, Int, String) {
        let directory = NSTemporaryDirectory() + "roomkit-origin-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        // No rooms and a server nobody listens on: only the control API matters here.
        var config: [String: JSON] = [
            "server": "ws://127.0.0.1:9/v1/rooms", "user": ["id": "bot-1"], "auth": ["secret": "origin-secret"],
            "rooms": [], "control": "127.0.0.1:0", "events": .string(directory + "/events.ndjson"),
        ]
        if let token { config["controlToken"] = .string(token) }
        let path = directory + "/bot.json"
        try Data(JSON.object(config).serialized()).write(to: URL(fileURLWithPath: path))
        let bot = try ChildProcess("roombot", ["run", "--config", path, "--log-level", "warning"])
        let seen = ChildProcess.read(bot.errors, until: "control on ", while: { bot.process.isRunning })
        let digits = seen.components(separatedBy: "control on ").last?.prefix { $0.isNumber } ?? ""
        return (bot, try XCTUnwrap(Int(digits), seen), directory)
    }

    func testWithoutToken_refusesForeignHostAndOrigin_servesLoopback() throws {
        let (bot, port, directory) = try startBot(token: nil)
        defer { bot.signal(SIGTERM); _ = bot.finish(); try? FileManager.default.removeItem(atPath: directory) }

        // Loopback names, with and without a port, and the dashboard's own origin.
        for host in ["127.0.0.1", "127.0.0.1:\(port)", "localhost:\(port)", "[::1]:\(port)"] {
            XCTAssertTrue(httpRequest(port: port, "GET", "/v1/rooms", host: host).hasPrefix("HTTP/1.1 200"), host)
        }
        let sameOrigin = httpRequest(port: port, "POST", "/v1/logout", headers: ["Origin: http://127.0.0.1:\(port)"])
        XCTAssertTrue(sameOrigin.hasPrefix("HTTP/1.1 200"), sameOrigin)

        // DNS rebinding: the page's own name in Host, on every path, the page included.
        for path in ["/v1/rooms", "/", "/metrics"] {
            let rebound = httpRequest(port: port, "GET", path, host: "evil.example:\(port)")
            XCTAssertTrue(rebound.hasPrefix("HTTP/1.1 403"), rebound)
            XCTAssertTrue(rebound.contains(#""code":1009003"#), rebound)
            XCTAssertTrue(rebound.contains("Host: evil.example:\(port)"), rebound)
        }
        // A name that merely starts like loopback is not loopback.
        XCTAssertTrue(httpRequest(port: port, "GET", "/v1/rooms", host: "127.0.0.1.evil.example").hasPrefix("HTTP/1.1 403"))
        // A cross-site form POST: loopback Host, foreign Origin; and an opaque origin.
        let csrf = httpRequest(port: port, "POST", "/v1/rooms/lobby/login", headers: ["Origin: https://evil.example"])
        XCTAssertTrue(csrf.hasPrefix("HTTP/1.1 403"), csrf)
        XCTAssertTrue(csrf.contains("Origin: https://evil.example"), csrf)
        XCTAssertTrue(httpRequest(port: port, "POST", "/v1/logout", headers: ["Origin: null"]).hasPrefix("HTTP/1.1 403"))

        // Nothing refused reached the bot: the login above never started a session.
        let rooms = httpRequest(port: port, "GET", "/v1/rooms")
        XCTAssertFalse(rooms.contains("lobby"), rooms)
    }

    func testWithToken_theTokenIsTheCheck_anyHostName() throws {
        let token = "origin-control-token-0123"
        let (bot, port, directory) = try startBot(token: token)
        defer { bot.signal(SIGTERM); _ = bot.finish(); try? FileManager.default.removeItem(atPath: directory) }
        // A bot reached by its DNS name through a proxy: the bearer token decides.
        let named = httpRequest(port: port, "GET", "/v1/rooms", token: token, host: "bot.internal.example")
        XCTAssertTrue(named.hasPrefix("HTTP/1.1 200"), named)
        XCTAssertTrue(httpRequest(port: port, "GET", "/v1/rooms", host: "bot.internal.example").hasPrefix("HTTP/1.1 401"))
    }
}
