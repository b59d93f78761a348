import XCTest

@testable import RoomKitServer

/// Session IDs: `s-`, the time as 12 hex digits (so later IDs sort later),
/// then a random 64-bit value in hex from a `RandomPool`, which fetches its
/// values in blocks and must never repeat or run dry across a refill.
final class SessionIdentifierTests: XCTestCase {
    func testIdentifier_isTheTimeThenTheRandomValue_inHex() {
        XCTAssertEqual(sessionIdentifier(now: 0x1_8c2f_3a4b_5c, random: 0xdead_beef), "s-018c2f3a4b5cdeadbeef")
        XCTAssertEqual(sessionIdentifier(now: 0, random: 0), "s-0000000000000")
        XCTAssertEqual(sessionIdentifier(now: -5, random: .max), "s-000000000000ffffffffffffffff")
        XCTAssertEqual(sessionIdentifier(now: 0x1_0000_0000_0000, random: 1), "s-10000000000001", "a 13th digit when the time needs it")
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        XCTAssertEqual(sessionIdentifier(now: now, random: 42), "s-" + String(repeating: "0", count: 12 - String(now, radix: 16).count)
            + String(now, radix: 16) + "2a", "as the ID was written before")
        XCTAssertLessThan(sessionIdentifier(now: now, random: .max), sessionIdentifier(now: now + 1, random: 0))
    }

    func testPool_givesDistinctValues_acrossRefills() {
        var pool = RandomPool()
        var seen = Set<UInt64>()
        for _ in 0..<2_000 { seen.insert(pool.next()) }
        XCTAssertEqual(seen.count, 2_000, "64 random bits: no repeats in 2,000 values over four refills")
    }
}
