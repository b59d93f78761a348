import Foundation
import RoomKit
import RoomKitBot
import RoomKitProtocol
import RoomKitTokens
@testable import RoomKitServer
import RoomKitTestSupport
import XCTest

/// A service token for roombot (docs/CLI.md: `serviceToken` in bot.json, or
/// `--service-token-file` / `ROOMBOT_SERVICE_TOKEN`): the bot's one
/// connection says `hello` with it, and roomd gives that connection its
/// service request bucket (docs/PROTOCOL.md "Service connections") instead
/// of the ordinary 200/s one.
final class BotServiceTokenTests: XCTestCase {
    private let serviceBurst = 4_321.0

    private func harness() throws -> BotHarness {
        let burst = serviceBurst
        return try BotHarness { configuration in
            configuration.serviceRateLimitBurst = burst
            configuration.serviceRateLimitPerSecond = burst
        }
    }

    private func token(_ harness: BotHarness, role: TokenRole) -> String {
        let now = Int64(Date().timeIntervalSince1970)
        return TokenSigner(secret: harness.secret).sign(TokenClaims(sub: "bot-1", room: "*", role: role, exp: now + 3600, iat: now))
    }

    /// The request-bucket burst of each connection roomd holds.
    private func bursts(_ harness: BotHarness) throws -> [Double] {
        let server = harness.server
        return try harness.serverLoop.runAndWait { server.links.values.map { $0.requests.limits.burst } }
    }

    private func config(_ harness: BotHarness, rooms: Int, serviceToken: String?) throws -> String {
        var json = harness.standardConfig(rooms: (0..<rooms).map { "room-\($0)" })
        if case .object(var fields) = json, let serviceToken {
            fields["serviceToken"] = .string(serviceToken)
            json = .object(fields)
        }
        return try harness.writeConfig(json)
    }

    private func logined(_ runner: BotRunner) -> Int { runner.host.allRooms.filter { $0.reason == .logined }.count }

    func testServiceTokenInBotJSON_theBotsConnectionGetsTheServiceBucket() async throws {
        let harness = try harness()
        let path = try config(harness, rooms: 250, serviceToken: token(harness, role: .service))
        let runner = try BotRunner(config: try BotConfig(path: path), logger: .init(label: "t"))
        XCTAssertNotNil(runner.config.serviceToken)
        try await runner.start()
        await eventually(30, "every room LOGINED") { self.logined(runner) == 250 }
        XCTAssertEqual(try bursts(harness), [serviceBurst], "one connection, on the service bucket")
        let server = harness.server
        XCTAssertEqual(try harness.serverLoop.runAndWait { server.metrics.requestsOverLimit }, 0)
        await runner.stop()
        try harness.close()
    }

    func testWithoutServiceToken_theBotsConnectionKeepsTheOrdinaryBucket() async throws {
        let harness = try harness()
        let path = try config(harness, rooms: 3, serviceToken: nil)
        let runner = try BotRunner(config: try BotConfig(path: path), logger: .init(label: "t"))
        try await runner.start()
        await eventually(30, "every room LOGINED") { self.logined(runner) == 3 }
        XCTAssertEqual(try bursts(harness), [200], "roomd's default ordinary bucket")
        await runner.stop()
        try harness.close()
    }

    func testServiceTokenFileFlag_overridesBotJSON_inTheRoombotProcess() async throws {
        let harness = try harness()
        // The config's token has role writer, which roomd refuses in hello:
        // only the flag's service token lets the bot in at all.
        let path = try config(harness, rooms: 5, serviceToken: token(harness, role: .writer))
        let file = harness.directory + "/service.token"
        try (token(harness, role: .service) + "\n").write(toFile: file, atomically: true, encoding: .utf8)
        let bot = try ChildProcess("roombot", ["run", "--config", path, "--service-token-file", file, "--log-level", "warning"])
        await eventually(30, "roomd holds the bot's connection on the service bucket") {
            (try? self.bursts(harness)) == [self.serviceBurst]
        }
        await eventually(30, "every room LOGINED") {
            let log = (try? String(contentsOfFile: harness.directory + "/events.ndjson", encoding: .utf8)) ?? ""
            return log.components(separatedBy: #""reason":"LOGINED""#).count - 1 == 5
        }
        bot.signal(SIGTERM)
        XCTAssertEqual(bot.finish().0, 0)
        try harness.close()
    }

    func testServiceToken_thatIsNotAJWT_isAConfigErrorNamingTheField() {
        let json: JSON = ["server": "ws://127.0.0.1:1/v1/rooms", "user": ["id": "b"], "auth": ["secret": "s"],
                          "serviceToken": "not a token"]
        XCTAssertThrowsError(try BotConfig(json: json, path: "/tmp/bot.json")) { error in
            XCTAssertEqual((error as? ConfigErrors)?.errors.map(\.description),
                           ["bot.json: serviceToken: must be a JWT (header.claims.signature) with role service"])
        }
    }
}
