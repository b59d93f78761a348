import RoomKitTestSupport
import XCTest

@testable import RoomKitProtocol

/// `ClientEnvelope.scanMagix`, roomd's byte-level read of magix requests: it
/// must agree with the full path (`JSON.parse`, then `ClientEnvelope.decode`)
/// whenever it answers, and decline (nil) whatever that path refuses, so bad
/// requests keep the full decoder's error codes.
final class MagixRequestScanTests: XCTestCase {
    /// The differential check: if the scanner answers, the full path decodes
    /// the same magix request; a sorted canonical payload is its own sorted
    /// serialization.
    @discardableResult
    private func assertAgrees(_ text: String, file: StaticString = #filePath, line: UInt = #line) -> MagixRequestFields? {
        let bytes = Array(text.utf8)
        guard let fast = ClientEnvelope.scanMagix(bytes) else { return nil }
        guard let json = try? JSON.parse(bytes), case .success(let envelope) = ClientEnvelope.decode(json),
              case .magix(let event, let payload, let to) = envelope.request else {
            XCTFail("scanned, but the full path refuses it: \(text)", file: file, line: line)
            return fast
        }
        XCTAssertEqual(fast.id, envelope.id, text, file: file, line: line)
        XCTAssertEqual(fast.room, envelope.room, text, file: file, line: line)
        XCTAssertEqual(fast.event, event, text, file: file, line: line)
        XCTAssertEqual(fast.payload.value, payload, text, file: file, line: line)
        XCTAssertEqual(fast.to, to, text, file: file, line: line)
        if case .text(let payloadText) = fast.payload, fast.payloadSorted {
            XCTAssertEqual(Array(payloadText.bytes), payload.serialized(sortedKeys: true), "sorted text of \(text)",
                           file: file, line: line)
        }
        return fast
    }

    private func request(_ payload: String? = #"{"t":1}"#, id: String = "7", room: String = #""r1""#,
                         event: String = #""chat""#, to: String? = nil, extra: String = "") -> String {
        var members = [#""op":"magix""#, #""id":\#(id)"#, #""room":\#(room)"#, #""event":\#(event)"#]
        if let payload { members.append(#""payload":\#(payload)"#) }
        if let to { members.append(#""to":\#(to)"#) }
        if !extra.isEmpty { members.append(extra) }
        return "{" + members.joined(separator: ",") + "}"
    }

    func testScanMagix_agreesWithTheFullDecoder_onWhatItTakes() throws {
        let taken = [
            request(),
            request(nil),
            request("null"),
            request(#"{"b":[1,2,{"z":true,"a":null}],"a":"x"}"#),
            request(#" { "spaced" : 1 } "#),
            request("1.5"),
            request(#""\u00e9t\u00e9""#),
            request(#"{"t":1}"#, to: #"["u1","u2"]"#),
            request(#"{"t":1}"#, to: "[]"),
            request(#"{"t":1}"#, to: "null"),
            request(#"{"t":1}"#, event: #""caf\u00e9""#),
            request(#"{"t":1}"#, extra: #""client":{"x":[1,2]}"#),
            #"{"payload":{"t":1},"event":"e","room":"r-2.x:y_z","id":9223372036854775807,"op":"magix"}"#,
            " \n" + request() + " \t",
        ]
        for text in taken {
            XCTAssertNotNil(assertAgrees(text), "declined: \(text)")
        }
    }

    func testScanMagix_declinesWhatTheFullDecoderRefusesOrOtherOps() throws {
        let declined = [
            request(id: "0"), request(id: "-1"), request(id: "7.0"), request(id: #""7""#),
            request(room: #""bad room""#), request(room: "1"), request(room: #""r\u0031""#),
            request(event: #""""#), request(event: "1"), request(event: "\"" + String(repeating: "e", count: 129) + "\""),
            request(to: #"["u1",2]"#), request(to: #"[""]"#), request(to: #""u1""#),
            request(to: "[" + Array(repeating: #""u""#, count: 1001).joined(separator: ",") + "]"),
            request(extra: #""id":8"#), request(extra: #""x":1,"x":2"#), request(#"{"a":1,"a":2}"#),
            request(#"{"a":1"#), request("01"), request("nul"),
            #"{"op":"setState","id":1,"room":"r1","patch":{}}"#,
            #"{"op":"magix","room":"r1","event":"e"}"#,
            #"{"op":"magix","id":1,"event":"e"}"#,
            #"{"op":"magix","id":1,"room":"r1"}"#,
            "[]", "", request() + "x",
        ]
        for text in declined {
            XCTAssertNil(assertAgrees(text), "taken: \(text)")
        }
    }

    func testScanMagix_saysWhetherThePayloadTextIsSorted() throws {
        XCTAssertEqual(assertAgrees(request(#"{"a":1,"b":{"c":2,"d":[{"e":1,"f":2}]}}"#))?.payloadSorted, true)
        XCTAssertEqual(assertAgrees(request(#"{"b":1,"a":2}"#))?.payloadSorted, false)
        XCTAssertEqual(assertAgrees(request(#"{"a":{"d":1,"c":2}}"#))?.payloadSorted, false)
        XCTAssertEqual(assertAgrees(request(#"[{"b":1,"a":2}]"#))?.payloadSorted, false)
        XCTAssertEqual(assertAgrees(request(#"{"ab":1,"b":2}"#))?.payloadSorted, true)
        XCTAssertEqual(assertAgrees(request(#"{"b":1,"ab":2}"#))?.payloadSorted, false)
        XCTAssertEqual(assertAgrees(request(#"{"a":1,"aa":2}"#))?.payloadSorted, true)
        XCTAssertEqual(assertAgrees(request(#"{"aa":1,"a":2}"#))?.payloadSorted, false)
        XCTAssertEqual(assertAgrees(request("[1,2]"))?.payloadSorted, true)
        // Not canonical (whitespace): parsed, never "sorted text".
        XCTAssertEqual(assertAgrees(request(#"{ "a":1 }"#))?.payloadSorted, false)
    }
}
