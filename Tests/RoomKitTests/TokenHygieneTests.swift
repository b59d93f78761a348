import Foundation
import RoomKit
import RoomKitLoop
import RoomKitProtocol
import RoomKitTokens
import RoomKitTestSupport
import XCTest

/// A compact JWT anywhere in a text (three base64url parts, JSON header).
let jwtPattern = #"eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{16,}"#

/// Security review: tokens are never logged. roomd runs at trace level
/// through good, bad, expired and renewed tokens and the admin API; its whole
/// output must hold no token, no token signature and not the secret.
final class TokenHygieneTests: XCTestCase {
    func testRoomdAtTraceLevel_logsNoTokenAndNotTheSecret() async throws {
        let secret = "hygiene-\(UUID().uuidString)"
        let roomd = RoomdProcess(secret: secret, logLevel: "trace")
        try roomd.start()
        let signer = TokenSigner(secret: secret)
        let now = Int64(Date().timeIntervalSince1970)
        func token(_ user: String, role: TokenRole = .writer, exp: Int64 = 3600, signer: TokenSigner = signer) -> String {
            signer.sign(TokenClaims(sub: user, room: "*", role: role, exp: now + exp, iat: now))
        }
        let good = token("alice")
        let renewed = token("alice", exp: 7200)
        let expired = token("bob", exp: -60)
        let forged = token("mallory", signer: TokenSigner(secret: "not-the-secret"))
        let admin = token("ops", role: .admin)
        let tokens = [good, renewed, expired, forged, admin]

        let loop = try EventLoop(name: "hygiene")
        var configuration = RoomHostConfiguration(serverURL: "ws://127.0.0.1:\(roomd.port)/v1/rooms")
        configuration.loginTimeout = .seconds(5)
        let host = try RoomHost(loop: loop, configuration: configuration)
        try await host.loginRoom("lobby", user: LoginUser(id: "alice"), token: good)
        try await host.renewToken("lobby", token: renewed)
        for bad in [expired, forged] {
            do {
                try await host.loginRoom("other-\(bad.count % 97)", user: LoginUser(id: "bob"), token: bad)
                XCTFail("a bad token logged in")
            } catch {}
        }
        XCTAssertTrue(http(roomd.port, "GET", "/v1/admin/rooms", headers: ["Authorization: Bearer \(admin)"]).0 == 200)
        XCTAssertEqual(http(roomd.port, "GET", "/v1/admin/rooms", headers: ["Authorization: Bearer \(forged)"]).0, 401)
        XCTAssertEqual(http(roomd.port, "POST", "/v1/admin/rooms/lobby/kick", #"{"user":"alice"}"#,
                            headers: ["Authorization: Bearer \(admin)"]).0, 200)
        await host.shutdown()
        try loop.shutdown()
        roomd.stop()

        let log = roomd.log
        XCTAssertTrue(log.contains("connection"), "trace logging was on and wrote something: \(log.prefix(300))")
        XCTAssertNil(log.range(of: jwtPattern, options: .regularExpression), "a token in roomd's log")
        for token in tokens {
            let signature = String(token.split(separator: ".").last ?? "")
            XCTAssertFalse(log.contains(signature), "a token signature in roomd's log")
        }
        XCTAssertFalse(log.contains(secret), "the secret in roomd's log")
    }
}
