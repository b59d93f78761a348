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

/// The text of the file at `path` (nil if it cannot be read), for tests that
/// poll a file another component writes. An empty file reads as "" without
/// going through Foundation: on Linux, FoundationEssentials' reader leaks its
/// 4 KiB buffer for every empty file it reads (LeakSanitizer reports it).
public func fileText(_ path: String) -> String? {
    var info = stat()
    guard stat(path, &info) == 0 else { return nil }
    if info.st_size == 0 { return "" }
    return try? String(contentsOfFile: path, encoding: .utf8)
}
