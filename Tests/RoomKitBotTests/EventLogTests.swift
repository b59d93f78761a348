import Foundation
import Logging
import RoomKitBot
import RoomKitLoop
import XCTest

/// The event log's buffer on a real loop and a real file: lines written in
/// one loop turn reach the file together at its end, the size the store
/// commits never runs past the file, and a stop loses no line.
final class EventLogTests: XCTestCase {
    private var directory = ""

    override func setUpWithError() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("eventlog-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    }

    override func tearDown() {
        try? FileManager.default.removeItem(atPath: directory)
    }

    private func makeLoop() throws -> EventLoop {
        var logger = Logger(label: "test.eventlog")
        logger.logLevel = .critical
        return try EventLoop(name: "test-eventlog", logger: logger)
    }

    private func lines(_ path: String) -> [String] {
        let text = (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
        return text.split(separator: "\n", omittingEmptySubsequences: true).map(String.init)
    }

    private func fileSize(_ path: String) -> Int64 {
        ((try? FileManager.default.attributesOfItem(atPath: path)[.size]) as? NSNumber)?.int64Value ?? -1
    }

    func testClose_inTheTurnThatWroteTheLines_writesEveryOne() throws {
        let path = directory + "/events.jsonl"
        let log = try EventLog(destination: path)
        let loop = try makeLoop()
        log.flushOnce(per: loop)
        let heldUntilTheTurnEnds = try loop.runAndWait { () -> Int64 in
            for index in 0..<500 { log.write("LOGINED", ["room": .string("r\(index)")]) }
            let size = self.fileSize(path)
            // A graceful stop closes the log before the turn's flush has run.
            log.close()
            return size
        }
        XCTAssertEqual(heldUntilTheTurnEnds, 0, "the lines wait for the end of the turn (one write(2))")
        let written = lines(path)
        XCTAssertEqual(written.count, 500, "close() wrote the lines still held")
        XCTAssertTrue(written.first?.contains(#""room":"r0""#) ?? false, written.first ?? "")
        XCTAssertTrue(written.last?.contains(#""room":"r499""#) ?? false, written.last ?? "")
        try loop.runAndWait {}  // the queued flush runs after the close: nothing more, no crash
        XCTAssertEqual(lines(path).count, 500)
        try loop.shutdown()
    }

    func testLinesOfATurn_reachTheFileAtItsEnd_withoutAClose() throws {
        let path = directory + "/events.jsonl"
        let log = try EventLog(destination: path)
        let loop = try makeLoop()
        log.flushOnce(per: loop)
        try loop.runAndWait {
            for index in 0..<3 { log.write("LOGINING", ["room": .string("r\(index)")]) }
        }
        try loop.runAndWait {}  // queued after the turn's flush
        XCTAssertEqual(lines(path).count, 3)
        log.write("plugin", ["plugin": .string("p"), "status": .string("loaded")])  // from another thread
        try loop.runAndWait {}
        XCTAssertEqual(lines(path).count, 4)
        log.close()
        try loop.shutdown()
    }

    func testWrittenSize_countsHeldLines_soTheStoreNeverCommitsPastTheFile() throws {
        let path = directory + "/events.jsonl"
        let log = try EventLog(destination: path)
        let loop = try makeLoop()
        log.flushOnce(per: loop)
        let (reported, onDisk) = try loop.runAndWait { () -> (Int64?, Int64) in
            for index in 0..<10 { log.write("LOGINED", ["room": .string("r\(index)")]) }
            let reported = log.writtenSize
            return (reported, self.fileSize(path))
        }
        XCTAssertNotNil(reported)
        XCTAssertEqual(reported, onDisk, "the size the store records is on disk when it is reported")
        XCTAssertEqual(lines(path).count, 10)
        log.close()
        try loop.shutdown()
    }
}
