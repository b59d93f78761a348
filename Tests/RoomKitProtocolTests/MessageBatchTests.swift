import XCTest

@testable import RoomKitProtocol

/// The grammar of batched messages (docs/PROTOCOL.md "Batched messages"):
/// a batch is one or more messages joined by a line feed, split in place.
final class MessageBatchTests: XCTestCase {
    private func elements(_ text: String) -> [String] {
        var found: [String] = []
        MessageBatch.forEachMessage(in: Array(text.utf8)) { found.append(String(decoding: $0, as: UTF8.self)) }
        return found
    }

    func testForEachMessage_splitsAtLineFeeds_inOrder() {
        XCTAssertEqual(elements(#"{"op":"a"}"#), [#"{"op":"a"}"#], "a batch of one is today's message")
        XCTAssertEqual(elements("{\"op\":\"a\"}\n{\"op\":\"b\"}\n{\"op\":\"c\"}"),
                       [#"{"op":"a"}"#, #"{"op":"b"}"#, #"{"op":"c"}"#])
    }

    func testForEachMessage_passesEmptyElementsOn_soTheDecoderReportsThem() {
        XCTAssertEqual(elements("{}\n\n{}"), ["{}", "", "{}"])
        XCTAssertEqual(elements("\n{}"), ["", "{}"])
        XCTAssertEqual(elements("{}\n"), ["{}", ""])
        XCTAssertEqual(elements(""), [""])
    }

    func testForEachMessage_givesSlicesOfTheSameBytes_noCopy() {
        let bytes = Array("{\"a\":1}\n{\"b\":2}".utf8)
        var ranges: [Range<Int>] = []
        MessageBatch.forEachMessage(in: bytes) { ranges.append($0.startIndex..<$0.endIndex) }
        XCTAssertEqual(ranges, [0..<7, 8..<15])
    }

    func testAnEscapedLineFeedInAString_isNotASeparator() throws {
        let message = JSON.object(["op": "magix", "payload": .string("two\nlines")]).serialized()
        XCTAssertFalse(message.contains(MessageBatch.separator), "compact JSON escapes a line feed")
        let batch = message + [MessageBatch.separator] + message
        var decoded: [JSON] = []
        MessageBatch.forEachMessage(in: batch) { decoded.append((try? JSON.parse($0)) ?? .null) }
        XCTAssertEqual(decoded.map { $0["payload"] }, [.string("two\nlines"), .string("two\nlines")])
    }

    func testScanMagix_readsAnElementInPlace_likeAWholeMessage() throws {
        let push = #"{"op":"magix","room":"r","seq":7,"from":2,"event":"e","payload":{"k":[1,2]}}"#
        let batch = Array(("{\"op\":\"pong\",\"t\":1}\n" + push).utf8)
        var last: ArraySlice<UInt8> = []
        MessageBatch.forEachMessage(in: batch) { last = $0 }
        let inPlace = try XCTUnwrap(ServerPush.scanMagix(last))
        let whole = try XCTUnwrap(ServerPush.scanMagix(Array(push.utf8)))
        XCTAssertEqual(inPlace.seq, 7)
        XCTAssertEqual(inPlace.room, whole.room)
        XCTAssertEqual(inPlace.event, whole.event)
        guard case .text(let text) = inPlace.payload else { return XCTFail("a canonical payload stays text") }
        XCTAssertEqual(String(decoding: text.bytes, as: UTF8.self), #"{"k":[1,2]}"#)
        XCTAssertEqual(text.value, whole.payload.value)
    }

    func testHello_batchField_roundTrips_andDefaultsToOff() throws {
        let asked = ClientEnvelope.decode(try JSON.parse(#"{"op":"hello","id":1,"batch":true}"#))
        XCTAssertEqual(try asked.get().request, .hello(client: nil, token: nil, batch: true))
        XCTAssertEqual(ClientRequest.hello(client: nil, batch: true).fields["batch"], true)
        XCTAssertNil(ClientRequest.hello(client: nil).fields["batch"])
        XCTAssertEqual(try ClientEnvelope.decode(try JSON.parse(#"{"op":"hello","id":1}"#)).get().request, .hello(client: nil))
        XCTAssertNil(HelloReply(connection: "c", serverTime: 0).fields["batch"], "today's reply when not asked")
        XCTAssertEqual(HelloReply(connection: "c", serverTime: 0, batch: true).fields["batch"], true)
        XCTAssertTrue(HelloReply.confirmsBatching(fields: ["batch": true]))
        XCTAssertFalse(HelloReply.confirmsBatching(fields: ["batch": "true"]))
        XCTAssertFalse(HelloReply.confirmsBatching(fields: [:]))
    }
}
