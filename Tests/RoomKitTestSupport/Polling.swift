import Foundation
import XCTest

/// Polls `condition` every 10 ms until it holds or `timeout` seconds pass;
/// fails the calling test (at the caller's line) otherwise.
public func eventually(_ timeout: TimeInterval = 10, file: StaticString = #filePath, line: UInt = #line,
                       _ what: String = "condition", _ condition: () -> Bool) async {
    let deadline = Date().addingTimeInterval(timeout)
    while Date() < deadline {
        if condition() { return }
        try? await Task.sleep(for: .milliseconds(10))
    }
    XCTFail("\(what) not met within \(timeout) s", file: file, line: line)
}
