import RoomKitLoop
@testable import RoomKitServer
import XCTest

/// The pure rules of `RecoveryBuffer`: what a resume may recover (count or
/// window) is kept apart from what memory holds (bytes).
final class RecoveryBufferTests: XCTestCase {
    private func entry(_ seq: Int64, bytes: Int, ts: Int64 = 0) -> RecoveryEntry {
        RecoveryEntry(seq: seq, ts: ts, frame: WebSocketFrame(bytes: [UInt8](repeating: 1, count: bytes)), recipients: nil)
    }

    func testEvict_dropsOldestFramesToTheBound_keepsTheNewest_andEveryEntryStaysRecoverable() {
        var buffer = RecoveryBuffer()
        for seq in 1...10 {
            _ = buffer.append(entry(Int64(seq), bytes: 100), keepAtLeast: 1000, window: 0, now: 0)
        }
        XCTAssertEqual(buffer.bytes, 1000)
        XCTAssertEqual(buffer.evict(toAtMost: 350), 700)
        XCTAssertEqual(buffer.bytes, 300)
        XCTAssertEqual(buffer.lastEvictedSeq, 7)
        XCTAssertEqual(buffer.recoverableAfter(roomSeq: 10), 0, "evicting frames does not shorten what is recoverable")
        XCTAssertEqual(buffer.entries(after: 5).map(\.seq), [6, 7, 8, 9, 10])
        XCTAssertEqual(buffer.entries(after: 5).map { $0.frame != nil }, [false, false, true, true, true])
        // The newest frame stays even past the bound.
        XCTAssertEqual(buffer.evict(toAtMost: 0), 200)
        XCTAssertEqual(buffer.bytes, 100)
        XCTAssertEqual(buffer.lastEvictedSeq, 9)
        // Freeing a given amount stops once it is freed.
        _ = buffer.append(entry(11, bytes: 100), keepAtLeast: 1000, window: 0, now: 0)
        _ = buffer.append(entry(12, bytes: 100), keepAtLeast: 1000, window: 0, now: 0)
        XCTAssertEqual(buffer.evict(toAtMost: 0, orFreeing: 50), 100)
        XCTAssertEqual(buffer.lastEvictedSeq, 10)
    }

    func testAppend_retiresPastCountAndWindow_andReturnsTheByteChange() {
        var buffer = RecoveryBuffer()
        XCTAssertEqual(buffer.append(entry(1, bytes: 10, ts: 0), keepAtLeast: 2, window: 100, now: 0), 10)
        XCTAssertEqual(buffer.append(entry(2, bytes: 10, ts: 0), keepAtLeast: 2, window: 100, now: 0), 10)
        // Seq 1 is older than the window and more than 2 are held: retired, its bytes freed.
        XCTAssertEqual(buffer.append(entry(3, bytes: 10, ts: 500), keepAtLeast: 2, window: 100, now: 500), 0)
        XCTAssertEqual(buffer.recoverableAfter(roomSeq: 3), 1)
        XCTAssertEqual(buffer.bytes, 20)
        // An entry without its frame (a restart's reload) keeps frames a suffix.
        var reloaded = RecoveryBuffer()
        _ = reloaded.append(RecoveryEntry(seq: 1, ts: 0, frame: nil, recipients: nil), keepAtLeast: 10, window: 0, now: 0)
        _ = reloaded.append(entry(2, bytes: 10), keepAtLeast: 10, window: 0, now: 0)
        XCTAssertEqual(reloaded.lastEvictedSeq, 1)
        XCTAssertEqual(reloaded.bytes, 10)
    }
}
