import Foundation
import RoomKitProtocol
import RoomKitTokens
import RoomKitTestSupport
import XCTest

/// Issue #27 §5: roomd logs each token it rejects at info, with its reason,
/// rate-limited (docs/SECURITY.md "Limits"); before, it logged nothing even
/// at trace.
final class TokenRejectionLogTests: ServerTestCase {
    func testRejectedTokens_areLoggedAtInfoWithTheirReason_atMostTenPerInterval() throws {
        let roomd = try startRoomd(dataDirectory: try temporaryDirectory(), extra: ["--log-level", "info"])
        let expired = TokenSigner(secret: testSecret).sign(TokenClaims(sub: "u", room: "*", role: .admin, exp: 1000, iat: 900))
        let first = httpRequest(port: roomd.port, "GET", "/v1/rooms/lobby/recording", token: expired)
        XCTAssertTrue(first.hasPrefix("HTTP/1.1 401"), first)
        for _ in 0..<29 {
            _ = httpRequest(port: roomd.port, "GET", "/v1/rooms/lobby/recording", token: "not-a-token")
        }
        var lines: [String] = []
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline {
            lines = roomd.stderr.text.split(separator: "\n").map(String.init).filter { $0.contains("token rejected") }
            if lines.count >= 10 { break }
            usleep(20_000)
        }
        XCTAssertEqual(lines.count, 10, "30 rejections within one interval: 10 lines\n\(roomd.stderr.text)")
        let line = try XCTUnwrap(lines.first)
        XCTAssertTrue(line.contains("info"), line)
        XCTAssertTrue(line.contains("expired"), "names the reason: \(line)")
        XCTAssertTrue(line.contains("room=lobby"), line)
        XCTAssertTrue(line.contains("/v1/rooms/lobby/recording"), line)
        XCTAssertFalse(line.contains(expired), "never the token itself")
    }
}
