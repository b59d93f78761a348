import Foundation
import RoomKitProtocol
import RoomKitTokens
import RoomKitTestSupport
import XCTest

/// Issue 27 §4 as an operator meets it: a real roombot whose `tokenFile`
/// token has less than the 30 s notice left, against roomd. It wrote over
/// 1,100 `tokenWillExpire` lines in 5 s and roomd counted as many
/// `renewToken` requests (roomd re-warned after each renewal with the same
/// token, and the bot renewed at once each time).
final class BotRenewalStormTests: XCTestCase {
    private func lines(_ path: String, containing text: String) -> Int {
        (fileText(path) ?? "").split(separator: "\n").filter { $0.contains(text) }.count
    }

    func testTokenFileInsideTheNotice_oneWarning_noRenewalWithTheSameToken_thenOneWithANewToken() async throws {
        // A token inside roomd's notice from the start, but far from its
        // expiry: the test does not race the token's death, however slowly
        // a loaded (or sanitized) machine runs it. (With the default 30 s
        // notice and a 20 s token, a slow start left less time than the
        // bot's next recheck, so it rightly stopped asking.)
        let harness = try BotHarness { $0.tokenExpiryNotice = .seconds(300) }
        defer { try? harness.close() }
        let dir = harness.directory
        let now = Int64(Date().timeIntervalSince1970)
        let signer = TokenSigner(secret: harness.secret)
        let expiring = signer.sign(TokenClaims(sub: "bot-1", room: "*", role: .writer, exp: now + 240, iat: now))
        let tokenFile = dir + "/tokens.json"
        try Data(JSON.object(["*": .string(expiring)]).serialized()).write(to: URL(fileURLWithPath: tokenFile))
        guard case .object(var config) = harness.standardConfig(rooms: ["lobby"], control: nil) else { return XCTFail("config") }
        config["auth"] = ["tokenFile": .string(tokenFile)]
        let bot = try ChildProcess("roombot", ["run", "--config", try harness.writeConfig(.object(config)),
                                               "--log-level", "warning"])
        let events = dir + "/events.ndjson"
        await eventually(10, "LOGINED") { self.lines(events, containing: #""reason":"LOGINED""#) == 1 }
        await eventually(5, "the warning") { self.lines(events, containing: #""event":"tokenWillExpire""#) >= 1 }
        try await Task.sleep(for: .seconds(3))
        XCTAssertEqual(lines(events, containing: #""event":"tokenWillExpire""#), 1, "once per token")
        XCTAssertEqual(renewals(harness), 0, "never renewed with the token it already has")

        // The operator updates the file: the bot's next look (backoff, ≤ 30 s, here ~4 s) renews once.
        let fresh = signer.sign(TokenClaims(sub: "bot-1", room: "*", role: .writer, exp: now + 3600, iat: now))
        try Data(JSON.object(["*": .string(fresh)]).serialized()).write(to: URL(fileURLWithPath: tokenFile))
        await eventually(35, "one renewal with the new token") { self.renewals(harness) == 1 }
        try await Task.sleep(for: .seconds(1))
        XCTAssertEqual(renewals(harness), 1)
        XCTAssertEqual(lines(events, containing: #""event":"tokenWillExpire""#), 1)
        bot.signal(SIGTERM)
        XCTAssertEqual(bot.finish().0, 0)
    }

    /// `renewToken` requests roomd handled (its request histogram's count).
    private func renewals(_ harness: BotHarness) -> Int {
        let metrics = http(harness.server.port, "GET", "/metrics").1
        return metrics.split(separator: "\n")
            .first { $0.hasPrefix(#"roomd_request_duration_seconds_count{op="renewToken"}"#) }
            .flatMap { Int(Double($0.split(separator: " ").last ?? "") ?? -1) } ?? 0
    }
}
