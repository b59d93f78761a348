import XCTest
@testable import RoomKitPluginHost

/// A process plugin's journal bytes: records appended into spare capacity
/// of fixed chunks (never moved once written), read back where they were
/// put, released a chunk at a time, and the emptied chunks reused.
final class PluginJournalBytesTests: XCTestCase {
    private func record(_ byte: UInt8, _ length: Int) -> [UInt8] { [UInt8](repeating: byte, count: length) }

    func testRecords_readBackWhereTheyWerePut_acrossChunks_andNeverSplit() {
        var bytes = PluginJournalBytes()
        let size = PluginJournalBytes.chunkSize
        var places: [(chunk: Int, start: Int, record: [UInt8])] = []
        // 5 records of 40% of a chunk: two per chunk, the third starts a new one.
        for index in 0..<5 {
            let record = record(UInt8(index + 1), size * 2 / 5)
            let (chunk, start) = bytes.append(length: record.count) { $0.append(contentsOf: record) }
            places.append((chunk, start, record))
        }
        XCTAssertEqual(places.map(\.chunk), [0, 0, 1, 1, 2])
        XCTAssertEqual(places.map(\.start), [0, size * 2 / 5, 0, size * 2 / 5, 0])
        for place in places {
            XCTAssertEqual(bytes.withBytes(chunk: place.chunk, start: place.start, length: place.record.count) { Array($0) }, place.record)
        }
        // A record longer than a chunk gets a chunk of its own size.
        let big = record(9, size * 3)
        let (chunk, start) = bytes.append(length: big.count) { $0.append(contentsOf: big) }
        XCTAssertEqual(chunk, 3)
        XCTAssertEqual(start, 0)
        XCTAssertEqual(bytes.withBytes(chunk: chunk, start: start, length: big.count) { Array($0) }, big)
    }

    func testRelease_keepsLaterPlacesValid_andReusesEmptiedChunks() {
        var bytes = PluginJournalBytes()
        let half = PluginJournalBytes.chunkSize / 2
        var last: (chunk: Int, start: Int) = (0, 0)
        for index in 0..<6 { last = bytes.append(length: half) { $0.append(contentsOf: self.record(UInt8(index), half)) } }
        XCTAssertEqual(bytes.chunkCounts.inUse, 3)
        bytes.release(before: 2)
        XCTAssertEqual(bytes.chunkCounts.inUse, 1)
        XCTAssertEqual(bytes.chunkCounts.spare, 2)
        XCTAssertEqual(bytes.withBytes(chunk: last.chunk, start: last.start, length: half) { Array($0) }, record(5, half),
                       "numbers count from the first chunk ever made")
        // The next chunk comes from the spares, not the allocator.
        _ = bytes.append(length: half) { $0.append(contentsOf: self.record(7, half)) }
        XCTAssertEqual(bytes.chunkCounts.spare, 1)
        bytes.removeAll()
        XCTAssertEqual(bytes.chunkCounts.inUse, 0)
        XCTAssertLessThanOrEqual(bytes.chunkCounts.spare, PluginJournalBytes.maxSpare)
        XCTAssertEqual(bytes.append(length: 10) { $0.append(contentsOf: self.record(1, 10)) }.chunk, 3 + 1,
                       "a new chunk after all were released")
    }

    func testSpares_areBounded_andAnOversizedChunkIsNotKept() {
        var bytes = PluginJournalBytes()
        let size = PluginJournalBytes.chunkSize
        for _ in 0..<(PluginJournalBytes.maxSpare + 4) { _ = bytes.append(length: size) { $0.append(contentsOf: self.record(1, size)) } }
        _ = bytes.append(length: size * 4) { $0.append(contentsOf: self.record(2, size * 4)) }
        bytes.removeAll()
        XCTAssertEqual(bytes.chunkCounts.spare, PluginJournalBytes.maxSpare)
    }
}
