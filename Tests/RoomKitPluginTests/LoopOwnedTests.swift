import Foundation
@testable import RoomKitPluginHost
import RoomKitLoop
import XCTest

/// The plugin manager's dispatch state is checked at run time, not by a
/// comment: `LoopOwned` works on its loop's thread and traps anywhere else.
final class LoopOwnedTests: XCTestCase {
    func testLoopOwned_worksOnItsLoop_andTrapsOffIt() throws {
        let loop = try EventLoop(name: "test-loop-owned")
        defer { XCTAssertNoThrow(try loop.shutdown()) }
        let owned = LoopOwned([Int](), loop: loop)
        try loop.runAndWait { owned.withValue { $0.append(1) } }
        XCTAssertEqual(try loop.runAndWait { owned.withValue { $0 } }, [1])
        // Off the loop (this thread): the access traps. In a forked child, so
        // the trap ends only the child; it touches nothing but `owned`.
        let pid = fork()
        if pid == 0 {
            owned.withValue { $0.append(2) }
            _exit(0)
        }
        XCTAssertGreaterThan(pid, 0)
        var status: Int32 = 0
        XCTAssertEqual(waitpid(pid, &status, 0), pid)
        let signal = status & 0x7f
        XCTAssertTrue(signal != 0 && signal != 0x7f, "the child trapped (status \(status)), it did not exit normally")
        XCTAssertEqual(try loop.runAndWait { owned.withValue { $0 } }, [1])
    }
}
