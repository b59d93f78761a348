import RoomKitTestSupport
import XCTest

@testable import RoomKitProtocol

/// Parses `text`, failing the test (and returning `.null`) on error.
func parsed(_ text: String, file: StaticString = #filePath, line: UInt = #line) -> JSON {
    do {
        return try JSON.parse(text)
    } catch {
        XCTFail("parse failed: \(error) for \(text)", file: file, line: line)
        return .null
    }
}

/// Asserts that parsing `bytes` fails with `reason`, and at `offset` when given.
func assertParseError(
    _ bytes: [UInt8], _ reason: JSONParseError.Reason, at offset: Int? = nil,
    maxDepth: Int = JSON.defaultMaxDepth, file: StaticString = #filePath, line: UInt = #line
) {
    do {
        let value = try JSON.parse(bytes, maxDepth: maxDepth)
        XCTFail("expected \(reason), parsed \(value)", file: file, line: line)
    } catch {
        XCTAssertEqual(error.reason, reason, "input \(Array(bytes.prefix(40)))", file: file, line: line)
        if let offset {
            XCTAssertEqual(error.offset, offset, "offset for \(reason)", file: file, line: line)
        }
    }
}

/// Asserts that parsing `text` fails with `reason`, and at `offset` when given.
func assertParseError(
    _ text: String, _ reason: JSONParseError.Reason, at offset: Int? = nil,
    maxDepth: Int = JSON.defaultMaxDepth, file: StaticString = #filePath, line: UInt = #line
) {
    assertParseError(Array(text.utf8), reason, at: offset, maxDepth: maxDepth, file: file, line: line)
}

extension JSON {
    /// The serialization with sorted keys as a String, for comparisons.
    var sortedText: String { String(decoding: serialized(sortedKeys: true), as: UTF8.self) }
}
