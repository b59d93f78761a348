import XCTest

@testable import RoomKitProtocol

final class JSONParseTests: XCTestCase {
    // MARK: Valid input

    func testParse_scalars_produceMatchingCases() {
        XCTAssertEqual(parsed("null"), .null)
        XCTAssertEqual(parsed("true"), .bool(true))
        XCTAssertEqual(parsed("false"), .bool(false))
        XCTAssertEqual(parsed("0"), .int(0))
        XCTAssertEqual(parsed("\"hi\""), .string("hi"))
    }

    func testParse_whenSurroundedByWhitespace_ignoresIt() {
        XCTAssertEqual(parsed(" \t\r\n [ 1 , 2 ] \n"), [1, 2])
        XCTAssertEqual(parsed("{ \"a\" : { } , \"b\" : [ ] }"), ["a": .object([:]), "b": .array([])])
    }

    func testParse_nestedContainers_buildTheTree() {
        let value = parsed(#"{"op":"state","patch":{"globalState":{"a":[1,2.5,"x",null,true]}},"seq":7}"#)
        XCTAssertEqual(value["op"], "state")
        XCTAssertEqual(value["seq"], .int(7))
        XCTAssertEqual(value["patch"]?["globalState"]?["a"], [1, 2.5, "x", nil, true])
    }

    func testParse_integersWithoutFractionOrExponent_becomeInt() {
        XCTAssertEqual(parsed("-0"), .int(0))
        XCTAssertEqual(parsed("42"), .int(42))
        XCTAssertEqual(parsed("-17"), .int(-17))
        XCTAssertEqual(parsed("9223372036854775807"), .int(.max))
        XCTAssertEqual(parsed("-9223372036854775808"), .int(.min))
    }

    func testParse_integersBeyondInt64_becomeDouble() {
        XCTAssertEqual(parsed("9223372036854775808"), .double(9_223_372_036_854_775_808))
        XCTAssertEqual(parsed("-9223372036854775809"), .double(-0x1p63))
        XCTAssertEqual(parsed("123456789012345678901234567890"), .double(1.2345678901234568e29))
    }

    func testParse_numbersWithFractionOrExponent_becomeDouble() {
        XCTAssertEqual(parsed("1.0"), .double(1))
        XCTAssertEqual(parsed("1e2"), .double(100))
        XCTAssertEqual(parsed("1E+2"), .double(100))
        XCTAssertEqual(parsed("25e-1"), .double(2.5))
        XCTAssertEqual(parsed("-0.0"), .double(-0.0))
        XCTAssertEqual(parsed("0.1"), .double(0.1))
        XCTAssertEqual(parsed("0.30000000000000004"), .double(0.30000000000000004))
        XCTAssertEqual(parsed("1.7976931348623157e308"), .double(.greatestFiniteMagnitude))
        XCTAssertEqual(parsed("5e-324"), .double(.leastNonzeroMagnitude))
        XCTAssertEqual(parsed("1e-400"), .double(0))
        XCTAssertEqual(parsed("123456.789e3"), .double(123_456_789))
        XCTAssertEqual(parsed("0.000000000000000000000000000001"), .double(1e-30))
    }

    func testParse_hardRoundingCases_matchTheStandardLibrary() {
        for text in ["2.2250738585072011e-308", "9007199254740993", "9007199254740993.0", "1e23", "8.41e21"] {
            XCTAssertEqual(parsed(text).doubleValue, Double(text), text)
        }
    }

    func testParse_simpleEscapes_decode() {
        XCTAssertEqual(parsed(#""\"\\\/\b\f\n\r\t""#), .string("\"\\/\u{8}\u{C}\n\r\t"))
        XCTAssertEqual(parsed(#""a\nb""#), .string("a\nb"))
    }

    func testParse_unicodeEscapes_decodeIncludingSurrogatePairs() {
        XCTAssertEqual(parsed(#""\u0041\u00e9\u4E2D""#), .string("Aé中"))
        XCTAssertEqual(parsed(#""\ud83d\ude00""#), .string("😀"))
        XCTAssertEqual(parsed(#""x\uD834\uDD1Ey""#), .string("x𝄞y"))
        XCTAssertEqual(parsed(#""\u0000""#), .string("\u{0}"))
    }

    func testParse_rawMultibyteUTF8_isKept() {
        XCTAssertEqual(parsed("\"héllo 中文 😀\""), .string("héllo 中文 😀"))
        XCTAssertEqual(parsed("{\"ключ\":\"значение\"}"), ["ключ": "значение"])
    }

    func testParse_fromEveryInputKind_agrees() throws {
        let text = #"{"a":[1,"b"]}"#
        let expected: JSON = ["a": [1, "b"]]
        XCTAssertEqual(try JSON.parse(text), expected)
        XCTAssertEqual(try JSON.parse(Array(text.utf8)), expected)
        XCTAssertEqual(try JSON.parse(ArraySlice(text.utf8)), expected)
        XCTAssertEqual(try JSON.parse(text.utf8.lazy.map { $0 }), expected)
        let bytes = Array(text.utf8)
        let fromRaw = try bytes.withUnsafeBytes { raw throws(JSONParseError) in try JSON.parse(raw) }
        XCTAssertEqual(fromRaw, expected)
    }

    // MARK: Every error class

    func testParse_whenEmptyOrTruncated_throwsUnexpectedEnd() {
        assertParseError("", .unexpectedEnd, at: 0)
        assertParseError("   ", .unexpectedEnd, at: 3)
        assertParseError("[1,", .unexpectedEnd)
        assertParseError("{\"a\"", .unexpectedEnd)
        assertParseError("{\"a\":", .unexpectedEnd)
        assertParseError("[1", .unexpectedEnd)
        assertParseError("\"abc", .unexpectedEnd)
        assertParseError("tru", .unexpectedEnd)
        assertParseError("-", .unexpectedEnd)
        assertParseError("1.", .unexpectedEnd)
        assertParseError("1e", .unexpectedEnd)
        assertParseError("\"\\u12", .unexpectedEnd)
        assertParseError("\"\\", .unexpectedEnd)
    }

    func testParse_whenByteCannotStartOrContinue_throwsUnexpectedByte() {
        assertParseError("nul", .unexpectedEnd)
        assertParseError("nulL", .unexpectedByte, at: 3)
        assertParseError("[1 2]", .unexpectedByte, at: 3)
        assertParseError("[1,]", .unexpectedByte, at: 3)
        assertParseError("{\"a\":1,}", .unexpectedByte, at: 7)
        assertParseError("{a:1}", .unexpectedByte, at: 1)
        assertParseError("{\"a\" 1}", .unexpectedByte, at: 5)
        assertParseError("'x'", .unexpectedByte, at: 0)
        assertParseError("NaN", .unexpectedByte, at: 0)
        assertParseError("Infinity", .unexpectedByte, at: 0)
        assertParseError("+1", .unexpectedByte, at: 0)
        assertParseError("\u{FEFF}{}", .unexpectedByte, at: 0)
        assertParseError("/* c */ 1", .unexpectedByte, at: 0)
        assertParseError("[1}", .unexpectedByte, at: 2)
    }

    func testParse_whenNumberBreaksGrammar_throwsInvalidNumber() {
        assertParseError("01", .invalidNumber, at: 1)
        assertParseError("-01", .invalidNumber, at: 2)
        assertParseError("00", .invalidNumber)
        assertParseError("1.e5", .invalidNumber, at: 2)
        assertParseError(".5", .unexpectedByte, at: 0)
        assertParseError("1e+", .unexpectedEnd)
        assertParseError("1ex", .invalidNumber, at: 2)
        assertParseError("-Infinity", .invalidNumber, at: 1)
        assertParseError("-", .unexpectedEnd)
        assertParseError("[-]", .invalidNumber, at: 2)
    }

    func testParse_whenNumberOverflowsDouble_throwsNumberOutOfRange() {
        assertParseError("1e400", .numberOutOfRange, at: 0)
        assertParseError("[-1.5e99999999999999999999]", .numberOutOfRange, at: 1)
        assertParseError(String(repeating: "9", count: 400), .numberOutOfRange, at: 0)
    }

    func testParse_whenEscapeIsUnknownOrHexIsBad_throwsInvalidEscape() {
        assertParseError(#""\x""#, .invalidEscape, at: 1)
        assertParseError(#""ab\'""#, .invalidEscape, at: 3)
        assertParseError(#""\u12G4""#, .invalidEscape, at: 1)
        assertParseError(#""\U0041""#, .invalidEscape, at: 1)
    }

    func testParse_whenSurrogateIsAlone_throwsLoneSurrogate() {
        assertParseError(#""\ud800""#, .loneSurrogate, at: 1)
        assertParseError(#""\udc00""#, .loneSurrogate, at: 1)
        assertParseError(#""\ud800x""#, .loneSurrogate, at: 1)
        assertParseError(#""\ud800\u0041""#, .loneSurrogate, at: 1)
        assertParseError(#""\ud800\ud800""#, .loneSurrogate, at: 1)
        assertParseError(#""a\uDFFF\uD800""#, .loneSurrogate, at: 2)
    }

    func testParse_whenStringHasRawControlCharacter_throwsControlCharacter() {
        assertParseError("\"a\nb\"", .controlCharacter, at: 2)
        assertParseError("\"\t\"", .controlCharacter, at: 1)
        assertParseError([0x22, 0x00, 0x22], .controlCharacter, at: 1)
        assertParseError([0x22, 0x1F, 0x22], .controlCharacter, at: 1)
    }

    func testParse_whenUTF8IsIllFormed_throwsInvalidUTF8() {
        let quote: UInt8 = 0x22
        let cases: [[UInt8]] = [
            [0x80],  // lone continuation byte
            [0xC0, 0x80],  // overlong NUL
            [0xC1, 0xBF],  // overlong
            [0xE0, 0x80, 0x80],  // overlong 3-byte
            [0xED, 0xA0, 0x80],  // encoded surrogate U+D800
            [0xF0, 0x80, 0x80, 0x80],  // overlong 4-byte
            [0xF4, 0x90, 0x80, 0x80],  // above U+10FFFF
            [0xF5, 0x80, 0x80, 0x80],  // invalid lead
            [0xFF],
            [0xC3],  // truncated at the closing quote
            [0xE4, 0xB8],  // truncated
            [0xE4, 0x41, 0x80],  // bad continuation
        ]
        for bytes in cases {
            assertParseError([quote, 0x61] + bytes + [quote], .invalidUTF8, at: 2)
        }
        assertParseError([0xC3, 0xA9], .unexpectedByte, at: 0)  // outside a string
    }

    func testParse_whenDepthExceedsLimit_throwsTooDeep() {
        let ok = String(repeating: "[", count: 256) + String(repeating: "]", count: 256)
        XCTAssertNoThrow(try JSON.parse(ok))
        let deep = String(repeating: "[", count: 257) + String(repeating: "]", count: 257)
        assertParseError(deep, .tooDeep, at: 256)
        assertParseError(String(repeating: "{\"a\":", count: 11) + "1" + String(repeating: "}", count: 11),
                         .tooDeep, maxDepth: 10)
        assertParseError("[]", .tooDeep, at: 0, maxDepth: 0)
        XCTAssertEqual(try JSON.parse("7", maxDepth: 0), .int(7))
    }

    func testParse_whenNestingIsHuge_failsWithoutStackOverflow() {
        let bytes = [UInt8](repeating: UInt8(ascii: "["), count: 1_000_000)
        assertParseError(bytes, .tooDeep, at: 256)
        assertParseError(bytes, .unexpectedEnd, at: 1_000_000, maxDepth: .max)
    }

    func testParse_whenObjectRepeatsKey_throwsDuplicateKey() {
        assertParseError(#"{"a":1,"a":2}"#, .duplicateKey, at: 7)
        assertParseError(#"{"a":1,"b":{"c":1,"c":1}}"#, .duplicateKey, at: 18)
        assertParseError(#"{"\u0061":1,"a":2}"#, .duplicateKey, at: 12)
    }

    func testParse_whenDataFollowsValue_throwsTrailingData() {
        assertParseError("1 2", .trailingData, at: 2)
        assertParseError("{}x", .trailingData, at: 2)
        assertParseError("[] []", .trailingData, at: 3)
        assertParseError("nullx", .trailingData, at: 4)
        assertParseError("\"a\"\"", .trailingData, at: 3)
        assertParseError([0x31, 0x00], .trailingData, at: 1)
    }

    func testParseError_description_namesReasonAndOffset() {
        XCTAssertEqual(JSONParseError(offset: 12, reason: .invalidNumber).description, "invalid number at byte 12")
    }
}
