import Foundation
import RoomKitTestSupport
import XCTest

@testable import RoomKitProtocol
@testable import RoomKitTokens

final class TokenTests: XCTestCase {
    private let signer = TokenSigner(secret: "roomkit-test-secret")
    private let now: Int64 = 1_732_147_200
    private let claims = TokenClaims(sub: "u1", room: "r1", role: .writer, exp: 1_732_150_800, iat: 1_732_147_200)

    /// Computed independently with Python's hmac/hashlib/base64 (sorted,
    /// compact JSON payload; header {"alg":"HS256","typ":"JWT"}).
    private let knownToken =
        "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9"
        + ".eyJleHAiOjE3MzIxNTA4MDAsImlhdCI6MTczMjE0NzIwMCwicm9sZSI6IndyaXRlciIsInJvb20iOiJyMSIsInN1YiI6InUxIn0"
        + ".q75VsJMbK69Kx70iFBVTVGfLjWeZPNSL9w33JQyBoBs"

    /// Also from Python: header with other key order and spaces, fractional
    /// times, nbf, app, an unknown claim.
    private let foreignToken =
        "eyAidHlwIjogIkpXVCIsICJhbGciOiAiSFMyNTYiIH0"
        + ".eyJyb29tIjoiKiIsInN1YiI6ImFsaWNlQGV4YW1wbGUuY29tIiwicm9sZSI6ImFkbWluIiwiaWF0IjoxNzMyMTQ3MjAwLjUsImV4cCI6"
        + "MTczMjE1MDgwMC45LCJuYmYiOjE3MzIxNDcxMDAsImFwcCI6ImRlbW8iLCJleHRyYSI6WzEsMl19"
        + ".nW3leAqR_oUbNaBwqlUcSRkXh-u0JclZyfJgkva2fHs"

    private func assertRejects(
        _ token: String, _ reason: TokenError.Reason, signer: TokenSigner? = nil, now: Int64? = nil,
        leeway: Int64 = 0, file: StaticString = #filePath, line: UInt = #line
    ) {
        do {
            _ = try (signer ?? self.signer).verify(token, now: now ?? self.now, leeway: leeway)
            XCTFail("expected \(reason)", file: file, line: line)
        } catch {
            XCTAssertEqual(error.reason, reason, error.message, file: file, line: line)
            XCTAssertFalse(token.count > 8 && error.message.contains(token), "message leaks the token", file: file, line: line)
            XCTAssertEqual(error.code, .tokenInvalid, file: file, line: line)
        }
    }

    /// Builds a token with the real signature over arbitrary header/payload text.
    private func forge(header: String, payload: String, secret: String = "roomkit-test-secret") -> String {
        let input = Base64URL.encode(Array(header.utf8)) + "." + Base64URL.encode(Array(payload.utf8))
        let mac = TokenSigner.hmacSHA256(key: Array(secret.utf8), message: Array(input.utf8)) ?? []
        return input + "." + Base64URL.encode(mac)
    }

    func testHMAC_matchesRFC4231TestCase2() {
        let mac = TokenSigner.hmacSHA256(key: Array("Jefe".utf8), message: Array("what do ya want for nothing?".utf8))
        let hex = mac?.map { String(format: "%02x", $0) }.joined()
        XCTAssertEqual(hex, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")
    }

    /// One shared prototype context, duplicated per MAC: many threads at
    /// once each get the right MAC, for the empty key too (RFC 4231 has no
    /// empty-key case; the value is OpenSSL's `HMAC()` one-shot's).
    func testHMAC_fromManyThreadsAtOnce_andWithAnEmptyKey() {
        let results = LockedBox<[String]>([])
        DispatchQueue.concurrentPerform(iterations: 64) { _ in
            let mac = TokenSigner.hmacSHA256(key: Array("Jefe".utf8), message: Array("what do ya want for nothing?".utf8))
            let hex = mac?.map { String(format: "%02x", $0) }.joined() ?? "nil"
            results.mutate { $0.append(hex) }
        }
        XCTAssertEqual(Set(results.value), ["5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"])
        XCTAssertEqual(results.value.count, 64)
        let empty = TokenSigner.hmacSHA256(key: [], message: [])?.map { String(format: "%02x", $0) }.joined()
        XCTAssertEqual(empty, "b613679a0814d9ec772f95d778c35fc5ff1697c493715653c6c712144292c5ad")
    }

    func testSign_matchesKnownAnswerVector() {
        XCTAssertEqual(signer.sign(claims), knownToken)
    }

    func testVerify_knownAnswerVector_returnsClaims() throws {
        XCTAssertEqual(try signer.verify(knownToken, now: now), claims)
    }

    func testVerify_foreignButValidToken_readsEveryClaim() throws {
        let verified = try signer.verify(foreignToken, now: now)
        XCTAssertEqual(verified.sub, "alice@example.com")
        XCTAssertEqual(verified.room, "*")
        XCTAssertEqual(verified.role, .admin)
        XCTAssertEqual(verified.exp, 1_732_150_800)
        XCTAssertEqual(verified.iat, 1_732_147_200)
        XCTAssertEqual(verified.nbf, 1_732_147_100)
        XCTAssertEqual(verified.app, "demo")
        XCTAssertTrue(verified.allows(room: "anything"))
    }

    func testSignVerify_roundTripsOptionalClaims() throws {
        let full = TokenClaims(sub: "名前", room: "*", role: .reader, exp: now + 60, iat: now, nbf: now - 5, app: "x")
        XCTAssertEqual(try signer.verify(signer.sign(full), now: now), full)
    }

    func testVerify_whenPayloadTampered_throwsBadSignature() {
        var parts = knownToken.split(separator: ".").map(String.init)
        var payload = claims
        payload.role = .admin
        parts[1] = Base64URL.encode(payload.json.serialized(sortedKeys: true))
        assertRejects(parts.joined(separator: "."), .badSignature)
    }

    func testVerify_whenSignedWithAnotherSecret_throwsBadSignature() {
        assertRejects(knownToken, .badSignature, signer: TokenSigner(secret: "other"))
        assertRejects(knownToken, .badSignature, signer: TokenSigner(secret: ""))
    }

    func testVerify_whenSignatureTruncatedOrEmpty_throwsBadSignature() {
        let unsigned = knownToken.split(separator: ".").prefix(2).joined(separator: ".") + "."
        assertRejects(unsigned, .badSignature)
        assertRejects(unsigned + "AAAA", .badSignature)
        assertRejects(String(knownToken.dropLast(4)), .malformed)  // no longer canonical base64url
    }

    func testVerify_whenExpired_throwsExpired() {
        assertRejects(knownToken, .expired, now: claims.exp)
        assertRejects(knownToken, .expired, now: claims.exp + 100)
        XCTAssertNoThrow(try signer.verify(knownToken, now: claims.exp - 1))
        XCTAssertNoThrow(try signer.verify(knownToken, now: claims.exp + 5, leeway: 10))
    }

    func testVerify_whenNotBeforeIsInTheFuture_throwsNotYetValid() {
        let future = TokenClaims(sub: "u", room: "r", role: .writer, exp: now + 600, iat: now, nbf: now + 60)
        let token = signer.sign(future)
        assertRejects(token, .notYetValid)
        XCTAssertNoThrow(try signer.verify(token, now: now + 60))
        XCTAssertNoThrow(try signer.verify(token, now: now, leeway: 60))
    }

    func testVerify_whenAlgorithmIsNoneOrOther_throwsBadAlgorithm() {
        let noneToken =
            "eyJhbGciOiJub25lIiwidHlwIjoiSldUIn0"
            + ".eyJleHAiOjE3MzIxNTA4MDAsImlhdCI6MTczMjE0NzIwMCwicm9sZSI6IndyaXRlciIsInJvb20iOiJyMSIsInN1YiI6InUxIn0."
        assertRejects(noneToken, .badAlgorithm)
        let payload = String(decoding: claims.json.serialized(sortedKeys: true), as: UTF8.self)
        for header in [#"{"alg":"HS512"}"#, #"{"alg":"hs256"}"#, #"{"typ":"JWT"}"#, #"{"alg":null}"#, #"{"alg":["HS256"]}"#] {
            assertRejects(forge(header: header, payload: payload), .badAlgorithm)
        }
        assertRejects(forge(header: #"{"alg":"HS256","crit":["exp"]}"#, payload: payload), .malformed)
    }

    func testVerify_whenInputIsGarbage_throwsMalformed() {
        let garbage = [
            "", ".", "..", "...", "a.b", "a.b.c.d", "not a token", "🙂.🙂.🙂", "eyJ=.eyJ=.abc=",
            knownToken + ".", String(repeating: "a", count: 9000),
            Base64URL.encode(Array("[1]".utf8)) + ".e30.abc",
            Base64URL.encode(Array("{\"alg\":\"HS256\"".utf8)) + ".e30.abc",
        ]
        for token in garbage {
            assertRejects(token, .malformed)
        }
        let header = #"{"alg":"HS256"}"#
        assertRejects(forge(header: header, payload: "[]"), .malformed)
        assertRejects(forge(header: header, payload: "{bad json"), .malformed)
    }

    func testVerify_whenClaimsHaveWrongTypes_throwsBadClaims() {
        let header = #"{"alg":"HS256","typ":"JWT"}"#
        let payloads = [
            #"{"room":"r","role":"writer","exp":9999999999,"iat":0}"#,
            #"{"sub":1,"room":"r","role":"writer","exp":9999999999,"iat":0}"#,
            #"{"sub":"u","role":"writer","exp":9999999999,"iat":0}"#,
            #"{"sub":"u","room":"r","role":"owner","exp":9999999999,"iat":0}"#,
            #"{"sub":"u","room":"r","role":"writer","exp":"9999999999","iat":0}"#,
            #"{"sub":"u","room":"r","role":"writer","exp":9999999999}"#,
            #"{"sub":"u","room":"r","role":"writer","exp":1e300,"iat":0}"#,
            #"{"sub":"u","room":"r","role":"writer","exp":9999999999,"iat":0,"nbf":"0"}"#,
            #"{"sub":"u","room":"r","role":"writer","exp":9999999999,"iat":0,"app":5}"#,
        ]
        for payload in payloads {
            assertRejects(forge(header: header, payload: payload), .badClaims)
        }
    }

    func testClaims_allowsRoom_matchesExactOrWildcard() {
        XCTAssertTrue(claims.allows(room: "r1"))
        XCTAssertFalse(claims.allows(room: "r2"))
        XCTAssertEqual(claims.expiresAtMilliseconds, 1_732_150_800_000)
        XCTAssertTrue(TokenRole.writer.canWrite)
        XCTAssertFalse(TokenRole.reader.canWrite)
    }

    func testSigner_neverPrintsItsSecret() {
        let text = "\(signer) \(String(reflecting: signer))"
        var dumped = ""
        dump(signer, to: &dumped)
        XCTAssertFalse((text + dumped).contains("roomkit-test-secret"))
    }

    func testVerify_randomMutationsOfValidToken_neverCrashOrPass() {
        var rng = SeededGenerator(seed: 0x70CE)
        let bytes = Array(knownToken.utf8)
        let alphabet = Array("AZaz09-_.=+/ ".utf8)
        for _ in 0..<2000 {
            var mutated = bytes
            let position = Int.random(in: 0..<mutated.count, using: &rng)
            mutated[position] = alphabet.randomElement(using: &rng) ?? 0x41
            guard mutated != bytes else { continue }
            let token = String(decoding: mutated, as: UTF8.self)
            XCTAssertThrowsError(try signer.verify(token, now: now), "mutation at \(position) verified")
        }
    }
}

/// A value shared by the threads of one test.
private final class LockedBox<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var stored: Value
    init(_ value: Value) { stored = value }
    var value: Value { lock.lock(); defer { lock.unlock() }; return stored }
    func mutate(_ change: (inout Value) -> Void) { lock.lock(); defer { lock.unlock() }; change(&stored) }
}
