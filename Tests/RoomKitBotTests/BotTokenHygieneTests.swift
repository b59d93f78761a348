import Foundation
import RoomKitProtocol
import RoomKitTokens
import RoomKitTestSupport
import XCTest

/// Security review: tokens are never logged. roombot runs at trace level
/// with a good and an expired token; neither its output nor its event log
/// may hold a token or a token signature.
final class BotTokenHygieneTests: XCTestCase {
    func testRoombotAtTraceLevel_writesNoTokenToItsOutputOrEventLog() async throws {
        let harness = try BotHarness()
        defer { try? harness.close() }
        let now = Int64(Date().timeIntervalSince1970)
        let good = harness.token("bot-1")
        let expired = TokenSigner(secret: harness.secret).sign(TokenClaims(sub: "bot-1", room: "*", role: .writer, exp: now - 60, iat: now - 120))
        guard case .object(var config) = harness.standardConfig(rooms: ["lobby", "denied"]) else { return XCTFail("config") }
        config["auth"] = ["tokens": ["lobby": .string(good), "denied": .string(expired)]]
        let path = try harness.writeConfig(.object(config))
        let bot = try ChildProcess("roombot", ["run", "--config", path, "--log-level", "trace"])
        var output = ""
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline, !output.contains("control on ") {
            let chunk = bot.errors.fileHandleForReading.availableData
            if chunk.isEmpty { usleep(20_000) } else { output += String(decoding: chunk, as: UTF8.self) }
        }
        let eventsPath = harness.directory + "/events.ndjson"
        await eventually(10, "lobby LOGINED and denied LOGIN_FAILED in the event log") {
            let log = fileText(eventsPath) ?? ""
            return log.contains(#""reason":"LOGINED""#) && log.contains(#""reason":"LOGIN_FAILED""#)
        }
        bot.signal(SIGTERM)
        let (status, standardOutput, standardError) = bot.finish()
        XCTAssertEqual(status, 0)
        output += standardOutput + standardError
        let events = fileText(eventsPath) ?? ""
        for (name, text) in [("output", output), ("event log", events)] {
            XCTAssertFalse(text.isEmpty, "\(name) is empty")
            XCTAssertNil(text.range(of: #"eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{16,}"#, options: .regularExpression),
                         "a token in roombot's \(name)")
            for token in [good, expired] {
                XCTAssertFalse(text.contains(String(token.split(separator: ".").last ?? "")), "a token signature in roombot's \(name)")
            }
        }
    }
}
