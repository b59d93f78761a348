import Foundation
import RoomKitLoop
import RoomKitProtocol
import RoomKitServer
import XCTest

/// Base class of the server suites: makes harnesses and `roomd` children,
/// and ends every test with each loop shut down cleanly and every child killed.
class ServerTestCase: XCTestCase {
    private var sides: [ClientSide] = []
    private var children: [RoomdProcess] = []
    private var directories: [String] = []

    /// An in-process server (see `ServerHarness` for the test defaults).
    func startServer(configure: (inout ServerConfiguration) -> Void = { _ in }) throws -> ServerHarness {
        let harness = try ServerHarness(configure: configure)
        sides.append(harness)
        return harness
    }

    /// A client-side loop for talking to `roomd` children.
    func makeClientSide() throws -> ClientSide {
        let side = try ClientSide(loopName: "roomd-client")
        sides.append(side)
        return side
    }

    /// A `roomd serve` child on a free port (killed at the end of the test).
    func startRoomd(dataDirectory: String, extra: [String] = [], signalsBlocked: Bool = false,
                    file: StaticString = #filePath, line: UInt = #line) throws -> RoomdProcess {
        let child = try RoomdProcess(dataDirectory: dataDirectory, extra: extra, signalsBlocked: signalsBlocked,
                                     file: file, line: line)
        children.append(child)
        return child
    }

    /// A temporary directory removed at the end of the test.
    func temporaryDirectory() throws -> String {
        let path = try makeTemporaryDirectory("roomd-cli")
        directories.append(path)
        return path
    }

    override func tearDownWithError() throws {
        for child in children { child.killHard() }
        children.removeAll()
        for side in sides {
            XCTAssertNoThrow(try side.shutdown(), "the loop must close cleanly")
        }
        sides.removeAll()
        for directory in directories { try? FileManager.default.removeItem(atPath: directory) }
        directories.removeAll()
        try super.tearDownWithError()
    }
}
