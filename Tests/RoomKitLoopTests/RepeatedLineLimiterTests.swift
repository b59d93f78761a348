import RoomKitLoop
import XCTest

/// The pure rule behind lws log rate limiting (issue 27 §3): a line is
/// logged once per interval, then with how many copies were held back.
final class RepeatedLineLimiterTests: XCTestCase {
    private let second: UInt64 = 1_000_000_000

    func testRepeatedLine_loggedOncePerInterval_thenWithTheSuppressedCount() {
        var limiter = RepeatedLineLimiter(intervalNanoseconds: 5 * second)
        XCTAssertEqual(limiter.line("accept: errno 24", now: 0), .log(suppressed: 0))
        for step in 1...1000 {
            XCTAssertEqual(limiter.line("accept: errno 24", now: UInt64(step) * 4_000_000), .suppress)
        }
        XCTAssertEqual(limiter.line("accept: errno 24", now: 5 * second), .log(suppressed: 1000))
        XCTAssertEqual(limiter.line("accept: errno 24", now: 6 * second), .suppress)
        XCTAssertEqual(limiter.line("accept: errno 24", now: 10 * second), .log(suppressed: 1))
    }

    func testDistinctLines_areLimitedSeparately_andTheTableStaysBounded() {
        var limiter = RepeatedLineLimiter(intervalNanoseconds: second, capacity: 2)
        XCTAssertEqual(limiter.line("a", now: 0), .log(suppressed: 0))
        XCTAssertEqual(limiter.line("b", now: 1), .log(suppressed: 0))
        XCTAssertEqual(limiter.line("a", now: 2), .suppress)
        // A third line evicts the oldest window ("a"), so "a" is logged again.
        XCTAssertEqual(limiter.line("c", now: 3), .log(suppressed: 0))
        XCTAssertEqual(limiter.line("a", now: 4), .log(suppressed: 0))
        XCTAssertEqual(limiter.line("c", now: 5), .suppress)
    }
}
