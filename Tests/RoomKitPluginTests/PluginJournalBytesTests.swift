import CRoomKitPluginWire
import XCTest
@testable import RoomKitPluginHost

/// A process plugin's journal bytes: records appended into spare capacity
/// of fixed chunks (never moved once written), read back where they were
/// put, released a chunk at a time, and the emptied chunks reused.
final class PluginJournalBytesTests: XCTestCase {
    private func record(_ byte: UInt8, _ length: Int) -> [UInt8] { [UInt8](repeating: byte, count: length) }

    /// What a record's writer does: fills the space it is given; returns how much it wrote.
    private static func fill(_ out: UnsafeMutableRawBufferPointer, _ record: [UInt8]) -> Int {
        record.withUnsafeBytes { out.copyMemory(from: $0) }
        return record.count
    }

    func testRecords_readBackWhereTheyWerePut_acrossChunks_andNeverSplit() {
        var bytes = PluginJournalBytes()
        let size = PluginJournalBytes.chunkSize
        var places: [(chunk: Int, start: Int, record: [UInt8])] = []
        // 5 records of 40% of a chunk: two per chunk, the third starts a new one.
        for index in 0..<5 {
            let record = record(UInt8(index + 1), size * 2 / 5)
            let (chunk, start) = bytes.append(length: record.count) { Self.fill($0, record) }
            places.append((chunk, start, record))
        }
        XCTAssertEqual(places.map(\.chunk), [0, 0, 1, 1, 2])
        XCTAssertEqual(places.map(\.start), [0, size * 2 / 5, 0, size * 2 / 5, 0])
        for place in places {
            XCTAssertEqual(bytes.withBytes(chunk: place.chunk, start: place.start, length: place.record.count) { Array($0) }, place.record)
        }
        // A record longer than a chunk gets a chunk of its own size.
        let big = record(9, size * 3)
        let (chunk, start) = bytes.append(length: big.count) { Self.fill($0, big) }
        XCTAssertEqual(chunk, 3)
        XCTAssertEqual(start, 0)
        XCTAssertEqual(bytes.withBytes(chunk: chunk, start: start, length: big.count) { Array($0) }, big)
    }

    func testRelease_keepsLaterPlacesValid_andReusesEmptiedChunks() {
        var bytes = PluginJournalBytes()
        let half = PluginJournalBytes.chunkSize / 2
        var last: (chunk: Int, start: Int) = (0, 0)
        for index in 0..<6 { last = bytes.append(length: half) { Self.fill($0, self.record(UInt8(index), half)) } }
        XCTAssertEqual(bytes.chunkCounts.inUse, 3)
        bytes.release(before: 2)
        XCTAssertEqual(bytes.chunkCounts.inUse, 1)
        XCTAssertEqual(bytes.chunkCounts.spare, 2)
        XCTAssertEqual(bytes.withBytes(chunk: last.chunk, start: last.start, length: half) { Array($0) }, record(5, half),
                       "numbers count from the first chunk ever made")
        // The next chunk comes from the spares, not the allocator.
        _ = bytes.append(length: half) { Self.fill($0, self.record(7, half)) }
        XCTAssertEqual(bytes.chunkCounts.spare, 1)
        bytes.removeAll()
        XCTAssertEqual(bytes.chunkCounts.inUse, 0)
        XCTAssertLessThanOrEqual(bytes.chunkCounts.spare, PluginJournalBytes.maxSpare)
        XCTAssertEqual(bytes.append(length: 10) { Self.fill($0, self.record(1, 10)) }.chunk, 3 + 1,
                       "a new chunk after all were released")
    }

    func testSpares_areBounded_andAnOversizedChunkIsNotKept() {
        var bytes = PluginJournalBytes()
        let size = PluginJournalBytes.chunkSize
        for _ in 0..<(PluginJournalBytes.maxSpare + 4) { _ = bytes.append(length: size) { Self.fill($0, self.record(1, size)) } }
        _ = bytes.append(length: size * 4) { Self.fill($0, self.record(2, size * 4)) }
        bytes.removeAll()
        XCTAssertEqual(bytes.chunkCounts.spare, PluginJournalBytes.maxSpare)
    }

    /// A record written in place is byte for byte the documented layout
    /// (PLUGIN-WIRE.md section 4: u8 type, u64 seq, i64 number, str a, str
    /// b), built here field by field with the frame builder; both the
    /// contiguous payload (one copy) and any other collection (a loop).
    func testWireRecord_write_isTheDocumentedLayout_forEveryKindOfPayload() {
        func expected(_ a: String?, _ b: [UInt8]) -> [UInt8] {
            var frame = WireFrame(UInt8(ROOMKIT_WIRE_RECORD_ROOM.rawValue))
            frame.u64(0x0102_0304_0506_0708)
            frame.u64(UInt64(bitPattern: -2))
            frame.string(a)
            frame.raw(b)
            return Array(frame.bytes.dropFirst(4))  // the record is the frame's body after its length
        }
        func written<Payload: Collection<UInt8>>(_ a: String?, _ b: Payload) -> [UInt8] {
            let length = WireRecord.length(a: a, b: b)
            var out = [UInt8](repeating: 0xEE, count: length + 3)
            let count = out.withUnsafeMutableBytes {
                WireRecord.write(ROOMKIT_WIRE_RECORD_ROOM, seq: 0x0102_0304_0506_0708, number: -2, a: a, b: b, into: $0)
            }
            XCTAssertEqual(count, length)
            XCTAssertEqual(Array(out.suffix(3)), [0xEE, 0xEE, 0xEE], "nothing written past the record")
            return Array(out.prefix(count))
        }
        let payload = Array(#"{"text":"hé"}"#.utf8)
        XCTAssertEqual(written("lobby", payload[...]), expected("lobby", payload))
        XCTAssertEqual(written("lobby", payload.lazy.map { $0 }), expected("lobby", payload), "a payload without contiguous storage")
        XCTAssertEqual(written(nil, [UInt8]()), expected(nil, []))
        XCTAssertEqual(written("ünï", payload), expected("ünï", payload))
    }
}
