import RoomKitLoop
import RoomKitProtocol
@testable import RoomKitServer
import XCTest

/// The pure parts of roomd's batching (PushBatcher.swift): where a turn's
/// messages are cut into WebSocket messages, and the joined payload.
final class LinkBatchTests: XCTestCase {
    private func frames(_ sizes: [Int]) -> [WebSocketFrame] {
        sizes.map { WebSocketFrame(bytes: [UInt8](repeating: 0x61, count: $0)) }
    }

    func testRuns_fillUpToTheLimit_countingSeparators() {
        // 4 + 1 + 4 = 9 fits in 9; a third would need 14.
        XCTAssertEqual(LinkBatch.runs(of: frames([4, 4, 4]), limit: 9), [0..<2, 2..<3])
        XCTAssertEqual(LinkBatch.runs(of: frames([4, 4, 4]), limit: 8), [0..<1, 1..<2, 2..<3], "the separator counts")
        XCTAssertEqual(LinkBatch.runs(of: frames([4, 4, 4]), limit: 14), [0..<3])
        XCTAssertEqual(LinkBatch.runs(of: frames([]), limit: 14), [])
    }

    func testRuns_aMessageOverTheLimit_goesAlone() {
        XCTAssertEqual(LinkBatch.runs(of: frames([2, 20, 2, 2]), limit: 10), [0..<1, 1..<2, 2..<4])
        XCTAssertEqual(LinkBatch.runs(of: frames([20]), limit: 10), [0..<1])
    }

    func testAppend_countsTheBytesAsSent() {
        var batch = LinkBatch()
        XCTAssertTrue(batch.append(WebSocketFrame(bytes: Array("{}".utf8))), "the turn's first")
        XCTAssertFalse(batch.append(WebSocketFrame(bytes: Array("{\"a\":1}".utf8))))
        XCTAssertEqual(batch.pendingBytes, 2 + 1 + 7)
        XCTAssertEqual(batch.take().count, 2)
        XCTAssertEqual(batch.pendingBytes, 0)
        XCTAssertTrue(batch.pending.isEmpty)
    }

    func testHolds_startsAfterTheHelloReply() {
        var batch = LinkBatch()
        let reply = WebSocketFrame(bytes: Array("{}".utf8))
        let before = WebSocketFrame(bytes: Array("{}".utf8))
        XCTAssertFalse(batch.holds(reply), "off: nothing is held")
        batch.mode = .afterHelloReply(reply)
        XCTAssertFalse(batch.holds(before), "a message before the reply goes out alone")
        XCTAssertFalse(batch.holds(reply), "the reply itself goes out alone")
        XCTAssertTrue(batch.holds(before), "everything after it is batched")
    }

    func testJoinedFrame_isThePayloadsWithSeparators() {
        let frames = [WebSocketFrame(bytes: []), WebSocketFrame(bytes: Array("{\"a\":1}".utf8)), WebSocketFrame(bytes: []),
                      WebSocketFrame(bytes: Array("{}".utf8))]
        let joined = WebSocketFrame(joining: frames[1...], separator: MessageBatch.separator)
        XCTAssertEqual(String(decoding: joined.bytes, as: UTF8.self), "{\"a\":1}\n\n{}")
        XCTAssertFalse(joined.isBinary)
        XCTAssertEqual(WebSocketFrame(joining: frames[0..<0], separator: 0x0A).count, 0)
    }
}
