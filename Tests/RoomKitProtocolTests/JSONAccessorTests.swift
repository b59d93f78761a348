import XCTest

@testable import RoomKitProtocol

final class JSONAccessorTests: XCTestCase {
    func testSubscriptKey_onObject_returnsMemberOrNil() {
        let value: JSON = ["a": 1]
        XCTAssertEqual(value["a"], .int(1))
        XCTAssertNil(value["b"])
        XCTAssertNil(JSON.array([1])["a"])
    }

    func testSubscriptIndex_whenOutOfRangeOrNotArray_returnsNil() {
        let value: JSON = [10, 20]
        XCTAssertEqual(value[1], .int(20))
        XCTAssertNil(value[2])
        XCTAssertNil(value[-1])
        XCTAssertNil(JSON.object([:])[0])
    }

    func testTypedAccessors_returnValueOnlyForTheirCase() {
        XCTAssertEqual(JSON.string("s").stringValue, "s")
        XCTAssertNil(JSON.int(1).stringValue)
        XCTAssertEqual(JSON.bool(true).boolValue, true)
        XCTAssertNil(JSON.int(1).boolValue)
        XCTAssertEqual(JSON.array([1]).arrayValue, [1])
        XCTAssertEqual(JSON.object(["a": nil]).objectValue, ["a": .null])
        XCTAssertTrue(JSON.null.isNull)
        XCTAssertFalse(JSON.bool(false).isNull)
        XCTAssertEqual(JSON.null.typeName, "null")
        XCTAssertEqual(JSON.double(1).typeName, "number")
    }

    func testInt64Value_acceptsIntegralDoublesOnly() {
        XCTAssertEqual(JSON.int(5).int64Value, 5)
        XCTAssertEqual(JSON.double(5).int64Value, 5)
        XCTAssertNil(JSON.double(5.5).int64Value)
        XCTAssertNil(JSON.double(1e30).int64Value)
        XCTAssertNil(JSON.double(.nan).int64Value)
        XCTAssertNil(JSON.string("5").int64Value)
        XCTAssertEqual(JSON.int(.max).intValue, Int(Int64.max))
    }

    func testDoubleValue_convertsInts() {
        XCTAssertEqual(JSON.int(3).doubleValue, 3)
        XCTAssertEqual(JSON.double(2.5).doubleValue, 2.5)
        XCTAssertNil(JSON.bool(true).doubleValue)
    }

    func testLiterals_buildTheMatchingCases() {
        let value: JSON = ["n": nil, "b": true, "i": 1, "d": 1.5, "s": "x", "a": [1, "y"]]
        XCTAssertEqual(
            value,
            .object([
                "n": .null, "b": .bool(true), "i": .int(1), "d": .double(1.5), "s": .string("x"),
                "a": .array([.int(1), .string("y")]),
            ]))
    }

    func testEquality_distinguishesIntFromDouble() {
        XCTAssertNotEqual(JSON.int(2), JSON.double(2))
        XCTAssertEqual(Set<JSON>([.int(2), .double(2), .int(2)]).count, 2)
    }

    // MARK: Codable bridge

    private struct Sample: Codable, Equatable {
        var name: String
        var count: Int
        var ratio: Double
        var tags: [String]
        var extra: JSON?
    }

    func testInitEncoding_encodesCodableValues() throws {
        let sample = Sample(name: "n", count: 3, ratio: 0.5, tags: ["a"], extra: ["k": [1, nil]])
        let json = try JSON(encoding: sample)
        XCTAssertEqual(json["name"], "n")
        XCTAssertEqual(json["count"], .int(3))
        XCTAssertEqual(json["ratio"], .double(0.5))
        XCTAssertEqual(json["tags"], ["a"])
        XCTAssertEqual(json["extra"], ["k": [1, nil]])
    }

    func testDecode_decodesCodableValues() throws {
        let json: JSON = ["name": "n", "count": 3, "ratio": 0.25, "tags": [], "extra": ["deep": [true]]]
        let sample = try json.decode(Sample.self)
        XCTAssertEqual(sample, Sample(name: "n", count: 3, ratio: 0.25, tags: [], extra: ["deep": [true]]))
    }

    func testDecode_whenShapeDoesNotMatch_throws() {
        let json: JSON = ["name": 1]
        XCTAssertThrowsError(try json.decode(Sample.self))
    }

    func testCodable_roundTripsEveryCase() throws {
        let value: JSON = ["n": nil, "b": false, "i": -9, "d": 2.5, "s": "é", "a": [[], [:]]]
        XCTAssertEqual(try JSON(encoding: value), value)
        XCTAssertEqual(try value.decode(JSON.self), value)
        XCTAssertEqual(try JSON.int(7).decode(JSON.self), .int(7))
        XCTAssertEqual(try JSON.string("top").decode(String.self), "top")
    }
}
