import RoomKitTestSupport
import XCTest

@testable import RoomKitProtocol

final class CodesAndIdentifiersTests: XCTestCase {
    // MARK: Codes

    func testErrorCodes_matchTheProtocolTable() {
        let expected: [(ErrorCode, Int)] = [
            (.success, 0), (.logoutNotLoggedIn, 1_002_002), (.tokenInvalid, 1_002_033),
            (.kickedDuplicateLogin, 1_002_050), (.connectionInterrupted, 1_002_051), (.timedOut, 1_002_053),
            (.kickedByAdmin, 1_002_055), (.kickedTokenExpired, 1_002_056), (.malformed, 1_009_001),
            (.unknownOp, 1_009_002), (.notPermitted, 1_009_003), (.rateLimited, 1_009_004),
            (.roomNotLoggedIn, 1_009_005), (.invalidArgument, 1_009_006), (.alreadyLoggedIn, 1_009_007), (.staleFence, 1_009_008),
            (.internalError, 1_009_500),
        ]
        for (code, number) in expected {
            XCTAssertEqual(code.rawValue, number)
        }
        XCTAssertEqual(ErrorCode.allKnown.map(\.rawValue), expected.map(\.1))
        XCTAssertEqual(Set(ErrorCode.allKnown.compactMap(\.name)).count, expected.count)
    }

    func testErrorCode_description_namesKnownCodes() {
        XCTAssertEqual(ErrorCode.malformed.description, "1009001 (malformed)")
        XCTAssertEqual(ErrorCode(rawValue: 42).description, "42")
        XCTAssertNil(ErrorCode(rawValue: 42).name)
    }

    func testErrorCode_isKick_onlyForKickCodes() {
        XCTAssertEqual(ErrorCode.allKnown.filter(\.isKick), [.kickedDuplicateLogin, .kickedByAdmin, .kickedTokenExpired])
    }

    func testWebSocketCloseCodes_matchRFC6455() {
        XCTAssertEqual(WebSocketCloseCode.normal, 1000)
        XCTAssertEqual(WebSocketCloseCode.goingAway, 1001)
        XCTAssertEqual(WebSocketCloseCode.protocolError, 1002)
        XCTAssertEqual(WebSocketCloseCode.policyViolation, 1008)
        XCTAssertEqual(WebSocketCloseCode.messageTooBig, 1009)
        XCTAssertEqual(WebSocketCloseCode.tryAgainLater, 1013)
    }

    // MARK: Identifiers

    func testRoomID_acceptsTheAllowedAlphabetUpTo128() {
        XCTAssertTrue(RoomID.isValid("room-1_a.b:c"))
        XCTAssertTrue(RoomID.isValid("A"))
        XCTAssertTrue(RoomID.isValid(String(repeating: "z", count: 128)))
    }

    func testRoomID_rejectsEmptyLongAndOtherCharacters() {
        for bad in ["", String(repeating: "z", count: 129), "a b", "a/b", "*", "é", "a\u{0}", "room!", "ｒ"] {
            XCTAssertFalse(RoomID.isValid(bad), bad)
        }
    }

    func testUserID_acceptsPrintableTextUpTo128Bytes() {
        XCTAssertTrue(UserID.isValid("u1"))
        XCTAssertTrue(UserID.isValid("alice@example.com"))
        XCTAssertTrue(UserID.isValid("名前 with spaces"))
        XCTAssertTrue(UserID.isValid(String(repeating: "é", count: 64)))  // 128 bytes
    }

    func testUserID_rejectsEmptyTooLongAndControlCharacters() {
        XCTAssertFalse(UserID.isValid(""))
        XCTAssertFalse(UserID.isValid(String(repeating: "é", count: 65)))  // 130 bytes
        XCTAssertFalse(UserID.isValid("a\nb"))
        XCTAssertFalse(UserID.isValid("a\u{7F}"))
        XCTAssertFalse(UserID.isValid("a\u{85}"))
    }

    // MARK: Scene paths

    func testScenePath_validScenePaths() {
        for path in ["/init", "/a/b/c", "/名前", "/a b"] {
            XCTAssertTrue(ScenePath.isValidScene(path), path)
            XCTAssertTrue(ScenePath.isValidDirectory(path), path)
        }
        XCTAssertTrue(ScenePath.isValidDirectory("/"))
        XCTAssertFalse(ScenePath.isValidScene("/"))
    }

    func testScenePath_rejectsMalformedPaths() {
        let long = "/" + String(repeating: "a/", count: 600) + "a"
        for path in ["", "init", "/a/", "//a", "/a//b", "/a\nb", long, "/" + String(repeating: "x", count: 257)] {
            XCTAssertFalse(ScenePath.isValidDirectory(path), path)
        }
    }

    func testScenePath_splitAndJoin_areInverse() {
        XCTAssertEqual(ScenePath.split("/init")?.directory, "/")
        XCTAssertEqual(ScenePath.split("/init")?.name, "init")
        XCTAssertEqual(ScenePath.split("/a/b/c")?.directory, "/a/b")
        XCTAssertEqual(ScenePath.split("/a/b/c")?.name, "c")
        XCTAssertNil(ScenePath.split("/"))
        XCTAssertNil(ScenePath.split("x"))
        XCTAssertEqual(ScenePath.join("/", "init"), "/init")
        XCTAssertEqual(ScenePath.join("/a/b", "c"), "/a/b/c")
    }

    func testScenePath_ancestorsAndWithin() {
        XCTAssertEqual(ScenePath.ancestors(of: "/a/b/c"), ["/a/b", "/a", "/"])
        XCTAssertEqual(ScenePath.ancestors(of: "/"), [])
        XCTAssertTrue(ScenePath.isWithin("/a/b", directory: "/a"))
        XCTAssertTrue(ScenePath.isWithin("/a", directory: "/a"))
        XCTAssertFalse(ScenePath.isWithin("/ab", directory: "/a"))
        XCTAssertTrue(ScenePath.isWithin("/x", directory: "/"))
    }

    // MARK: base64url

    func testBase64URL_encode_matchesRFC4648Vectors() {
        let vectors = ["": "", "f": "Zg", "fo": "Zm8", "foo": "Zm9v", "foob": "Zm9vYg", "fooba": "Zm9vYmE", "foobar": "Zm9vYmFy"]
        for (plain, encoded) in vectors {
            XCTAssertEqual(Base64URL.encode(Array(plain.utf8)), encoded)
            XCTAssertEqual(Base64URL.decode(encoded), Array(plain.utf8))
        }
        XCTAssertEqual(Base64URL.encode([0xFB, 0xFF, 0xBF]), "-_-_")
    }

    func testBase64URL_decode_isStrict() {
        XCTAssertNil(Base64URL.decode("Zg=="))  // padding
        XCTAssertNil(Base64URL.decode("Z"))  // impossible length
        XCTAssertNil(Base64URL.decode("Zh"))  // non-zero unused bits
        XCTAssertNil(Base64URL.decode("Zm9"))  // non-zero unused bits
        XCTAssertNil(Base64URL.decode("+/+/"))  // standard alphabet
        XCTAssertNil(Base64URL.decode("Zm 9v"))
    }

    func testBase64URL_randomBytes_roundTrip() {
        var rng = SeededGenerator(seed: 64)
        for length in 0..<200 {
            let bytes = (0..<length).map { _ in UInt8.random(in: 0...255, using: &rng) }
            XCTAssertEqual(Base64URL.decode(Base64URL.encode(bytes)), bytes)
        }
    }
}
