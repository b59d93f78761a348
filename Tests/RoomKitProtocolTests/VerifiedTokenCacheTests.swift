import Foundation
import XCTest

@testable import RoomKitProtocol
@testable import RoomKitTokens

/// roomd's cache of verified tokens: a kept token is refused again exactly
/// as `TokenSigner.verify` refuses it once its times no longer hold, a bad
/// token is never kept, and the cache stays within its bound.
final class VerifiedTokenCacheTests: XCTestCase {
    private let signer = TokenSigner(secret: "roomkit-test-secret")
    private let now: Int64 = 1_732_147_200

    private func reason(_ body: () throws(TokenError) -> TokenClaims) -> TokenError.Reason? {
        do {
            _ = try body()
            return nil
        } catch {
            return error.reason
        }
    }

    func testCachedToken_isRefusedOnceExpired_exactlyAsVerifyRefusesIt() throws {
        let cache = VerifiedTokenCache(signer: signer)
        let token = signer.sign(TokenClaims(sub: "bot", room: "*", role: .writer, exp: now + 60, iat: now))
        XCTAssertEqual(try cache.verify(token, now: now).sub, "bot")
        XCTAssertEqual(cache.count, 1)
        XCTAssertEqual(try cache.verify(token, now: now + 59).sub, "bot", "still valid one second before exp")
        XCTAssertEqual(reason { () throws(TokenError) in try cache.verify(token, now: now + 60) }, .expired)
        XCTAssertEqual(reason { () throws(TokenError) in try signer.verify(token, now: now + 60) }, .expired)
        XCTAssertEqual(try cache.verify(token, now: now + 70, leeway: 11).sub, "bot", "the leeway applies as in verify")
        XCTAssertEqual(reason { () throws(TokenError) in try cache.verify(token, now: now + 71, leeway: 11) }, .expired)
    }

    func testCachedToken_whoseNotBeforeIsAhead_ofAnEarlierClock_isRefused() throws {
        let cache = VerifiedTokenCache(signer: signer)
        let token = signer.sign(TokenClaims(sub: "bot", room: "*", role: .writer, exp: now + 600, iat: now, nbf: now))
        XCTAssertEqual(reason { () throws(TokenError) in try cache.verify(token, now: now - 1) }, .notYetValid)
        XCTAssertEqual(cache.count, 0, "a refused token is not kept")
        XCTAssertEqual(try cache.verify(token, now: now).sub, "bot")
        XCTAssertEqual(reason { () throws(TokenError) in try cache.verify(token, now: now - 1) }, .notYetValid,
                       "the clock went back: checked again on every use")
    }

    func testBadTokens_areNeverKept_andRefusedWithVerifysReason() {
        let cache = VerifiedTokenCache(signer: signer)
        let other = TokenSigner(secret: "another-secret").sign(TokenClaims(sub: "bot", room: "*", role: .writer, exp: now + 60, iat: now))
        for _ in 0..<2 {
            XCTAssertEqual(reason { () throws(TokenError) in try cache.verify(other, now: now) }, .badSignature)
            XCTAssertEqual(reason { () throws(TokenError) in try cache.verify("a.b", now: now) }, .malformed)
        }
        XCTAssertEqual(cache.count, 0)
    }

    func testCache_staysWithinItsCapacity() throws {
        let cache = VerifiedTokenCache(signer: signer, capacity: 4)
        for user in 0..<10 {
            let token = signer.sign(TokenClaims(sub: "u\(user)", room: "*", role: .writer, exp: now + 60, iat: now))
            XCTAssertEqual(try cache.verify(token, now: now).sub, "u\(user)")
            XCTAssertLessThanOrEqual(cache.count, 4)
        }
    }
}
