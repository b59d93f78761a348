import XCTest

@testable import RoomKitProtocol

final class JSONSerializeTests: XCTestCase {
    private func text(_ value: JSON) -> String { value.sortedText }

    func testSerialize_scalars_printCompactly() {
        XCTAssertEqual(text(.null), "null")
        XCTAssertEqual(text(true), "true")
        XCTAssertEqual(text(false), "false")
        XCTAssertEqual(text(0), "0")
        XCTAssertEqual(text(7), "7")
        XCTAssertEqual(text(-42), "-42")
        XCTAssertEqual(text(.int(.max)), "9223372036854775807")
        XCTAssertEqual(text(.int(.min)), "-9223372036854775808")
    }

    func testSerialize_doubles_printShortestRoundTripForm() {
        XCTAssertEqual(text(2.0), "2.0")
        XCTAssertEqual(text(-0.0), "-0.0")
        XCTAssertEqual(text(0.1), "0.1")
        XCTAssertEqual(text(.double(0.1 + 0.2)), "0.30000000000000004")
        XCTAssertEqual(text(1e20), "1e+20")
        XCTAssertEqual(text(1e-5), "1e-05")
        XCTAssertEqual(text(.double(.leastNonzeroMagnitude)), "5e-324")
        XCTAssertEqual(text(.double(.greatestFiniteMagnitude)), "1.7976931348623157e+308")
    }

    func testSerialize_doubles_parseBackAsTheSameDouble() throws {
        for value in [2.0, 1e20, 1e-5, 123.456, -1e300, .leastNonzeroMagnitude, 1e16, 1234567890123456.0] {
            XCTAssertEqual(try JSON.parse(JSON.double(value).serialized()), .double(value), "\(value)")
        }
    }

    func testSerialize_whenDoubleIsNotFinite_printsNull() {
        XCTAssertEqual(text(.double(.nan)), "null")
        XCTAssertEqual(text(.double(.infinity)), "null")
        XCTAssertEqual(text(.double(-.infinity)), "null")
        XCTAssertEqual(text([.double(.nan), 1]), "[null,1]")
    }

    func testSerialize_strings_escapeQuoteBackslashAndControls() {
        XCTAssertEqual(text("a\"b\\c"), #""a\"b\\c""#)
        XCTAssertEqual(text("\u{8}\u{C}\n\r\t"), #""\b\f\n\r\t""#)
        XCTAssertEqual(text("\u{0}\u{1}\u{1F}"), #""\u0000\u0001\u001f""#)
        XCTAssertEqual(text("/"), #""/""#)
        XCTAssertEqual(text("\u{7F}"), "\"\u{7F}\"")
    }

    func testSerialize_nonASCII_staysRawUTF8() {
        XCTAssertEqual(text("é中😀"), "\"é中😀\"")
        XCTAssertEqual(JSON.string("é").serialized(), [0x22, 0xC3, 0xA9, 0x22])
    }

    func testSerialize_containers_haveNoWhitespace() {
        XCTAssertEqual(text([]), "[]")
        XCTAssertEqual(text([:]), "{}")
        XCTAssertEqual(text([1, "a", nil, [true]]), #"[1,"a",null,[true]]"#)
        XCTAssertEqual(text(["k": ["n": 1]]), #"{"k":{"n":1}}"#)
    }

    func testSerialize_whenSortedKeys_ordersMembersByUTF8Bytes() {
        let value: JSON = ["b": 1, "a": 2, "B": 3, "é": 4, "aa": ["z": 1, "y": 2]]
        XCTAssertEqual(text(value), #"{"B":3,"a":2,"aa":{"y":2,"z":1},"b":1,"é":4}"#)
    }

    func testSerialize_unsortedOutput_parsesBackToTheSameValue() throws {
        let value: JSON = ["b": 1, "a": [1.5, "x"], "c": ["d": nil]]
        XCTAssertEqual(try JSON.parse(value.serialized()), value)
        XCTAssertEqual(try JSON.parse(value.jsonString), value)
    }

    func testSerializeInto_appendsToAnExistingBuffer() {
        var buffer = Array("prefix:".utf8)
        JSON.array([1, 2]).serialize(into: &buffer)
        XCTAssertEqual(String(decoding: buffer, as: UTF8.self), "prefix:[1,2]")
    }

    func testDescription_isSortedCompactJSON() {
        let value: JSON = ["b": 1, "a": "x"]
        XCTAssertEqual(value.description, #"{"a":"x","b":1}"#)
    }

    func testRoundTrip_escapedStrings_surviveParseAndSerialize() throws {
        let samples = ["", "plain", "quote\"back\\slash", "\u{0}\u{1F}\n", "😀 \u{2028} \u{FFFF} \u{10FFFF}"]
        for sample in samples {
            XCTAssertEqual(try JSON.parse(JSON.string(sample).serialized()), .string(sample))
        }
    }
}
