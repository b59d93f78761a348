import RoomKitLoop
import XCTest

/// `LogBudget`: pure logic, so the clock is the test's.
final class LogBudgetTests: XCTestCase {
    func testAtMostLimitLinesPerInterval_thenTheNextLineCarriesTheCountHeldBack() {
        var budget = LogBudget(limit: 3, interval: 1000)
        let first = (0..<10).map { budget.take(now: 100 + Int64($0)) }
        XCTAssertEqual(first, [.log(suppressed: 0), .log(suppressed: 0), .log(suppressed: 0)] + Array(repeating: .suppress, count: 7))
        XCTAssertEqual(budget.take(now: 1099), .suppress, "still the same interval")
        XCTAssertEqual(budget.take(now: 1100), .log(suppressed: 8), "a new interval: the 8 held back are counted")
        XCTAssertEqual(budget.take(now: 1101), .log(suppressed: 0))
    }

    func testAClockThatGoesBack_startsANewInterval() {
        var budget = LogBudget(limit: 1, interval: 1000)
        XCTAssertEqual(budget.take(now: 5000), .log(suppressed: 0))
        XCTAssertEqual(budget.take(now: 5001), .suppress)
        XCTAssertEqual(budget.take(now: 10), .log(suppressed: 1))
    }
}
