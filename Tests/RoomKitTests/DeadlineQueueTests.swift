@testable import RoomKit
import XCTest

/// The session deadlines' heap: lazy cancelling, and the compaction that
/// keeps answered logins from piling up for the whole login timeout.
final class DeadlineQueueTests: XCTestCase {
    func testPopDue_returnsDueEntriesEarliestFirst() {
        var queue = DeadlineQueue<String>()
        for (at, key) in [(30, "c"), (10, "a"), (20, "b"), (40, "d")] { queue.insert(Int64(at), key, generation: 1) }
        XCTAssertEqual(queue.popDue(25).map(\.key), ["a", "b"])
        XCTAssertEqual(queue.earliest, 30)
        XCTAssertEqual(queue.count, 2)
    }

    /// 10,000 logins answered at once: the entries they left are dropped
    /// long before their deadlines, and the ones still current stay, in order.
    func testCancelled_dropsStaleEntriesOnceTheyAreHalfTheHeap_andKeepsTheCurrentOnes() {
        var queue = DeadlineQueue<Int>()
        var current: [Int: UInt64] = [:]
        for key in 0..<10_000 {
            current[key] = 1
            queue.insert(Int64(30_000 + key), key, generation: 1)
        }
        var cancels = 0
        for key in 0..<10_000 where key % 100 != 0 {
            current[key] = 2  // answered: the entry is stale
            cancels += 1
            queue.cancelled { key, generation in current[key] == generation }
        }
        XCTAssertEqual(cancels, 9_900)
        XCTAssertLessThanOrEqual(queue.count, 100 + 2 * 64 + 5_000 / 2, "compacted as the stale entries grew")
        // One more round of cancels on what is left compacts down to the live entries.
        for _ in 0..<200 { queue.cancelled { key, generation in current[key] == generation } }
        XCTAssertEqual(queue.count, 100)
        XCTAssertLessThan(queue.capacity, 1_000, "the old heap's storage is freed")
        let due = queue.popDue(.max)
        XCTAssertEqual(due.map(\.key), Array(stride(from: 0, to: 10_000, by: 100)), "still a heap, earliest first")
    }
}
