import CRoomKitPluginWire
import Dispatch
import Foundation
import RoomKitLoop
import XCTest
@testable import RoomKitPluginHost

/// A flush's gathered send (PluginGatheredFrames.swift): each EVENTS
/// frame's header, then its records read where the journal keeps them, a
/// run of adjacent records as one piece, sent whole by `sendmsg`.
final class GatheredFramesTests: XCTestCase {
    private func record(_ byte: UInt8, _ length: Int) -> [UInt8] { [UInt8](repeating: byte, count: length) }

    private func header(records: [[UInt8]]) -> [UInt8] {
        let length = UInt32(records.reduce(0) { $0 + $1.count } + GatheredFrames.headerSize - 4)
        return withUnsafeBytes(of: length.littleEndian, Array.init) + [UInt8(ROOMKIT_WIRE_EVENTS.rawValue)]
            + withUnsafeBytes(of: UInt32(records.count).littleEndian, Array.init)
    }

    /// The bytes the pieces of `frames` stand for, in order.
    private func flattened(_ frames: GatheredFrames) -> [UInt8] {
        frames.withPieces { pieces in
            pieces.flatMap { Array(UnsafeRawBufferPointer(start: $0.iov_base, count: $0.iov_len)) }
        }
    }

    func testFrames_carryTheirRecordsInOrder_behindTheirHeaders_adjacentRecordsAsOnePiece() {
        var journal = PluginJournalBytes()
        let size = PluginJournalBytes.chunkSize
        // Two records per chunk: 0 and 1 in chunk 0, 2 and 3 in chunk 1, 4 in chunk 2.
        let records = (0..<5).map { record(UInt8($0 + 1), size * 2 / 5) }
        let places = records.map { record in
            journal.append(length: record.count) { out in
                record.withUnsafeBytes { out.copyMemory(from: $0) }
                return record.count
            }
        }
        var frames = GatheredFrames()
        func add(_ index: Int) {
            if frames.add(chunk: places[index].chunk, start: places[index].start, length: records[index].count) {
                frames.hold(journal.owner(of: places[index].chunk))
            }
        }
        add(0)
        add(1)
        frames.closeFrame()
        for index in 2..<5 { add(index) }
        frames.closeFrame()
        let expected = header(records: Array(records[0..<2])) + records[0] + records[1]
            + header(records: Array(records[2..<5])) + records[2] + records[3] + records[4]
        XCTAssertEqual(flattened(frames), expected)
        // Header, run 0-1; header, run 2-3, record 4 (another chunk).
        XCTAssertEqual(frames.pieceCount, 5)
        XCTAssertEqual(frames.bytes, expected.count)

        // A record left out (skipped) splits the run around it.
        frames.clear()
        XCTAssertTrue(frames.isEmpty)
        add(2)
        add(4)
        add(0)
        frames.closeFrame()
        XCTAssertEqual(flattened(frames), header(records: [records[2], records[4], records[0]]) + records[2] + records[4] + records[0])
        XCTAssertEqual(frames.pieceCount, 4)
    }

    func testSend_writesEveryPieceInOrder_moreThanOneSendmsgTakes() throws {
        var fds: [Int32] = [0, 0]
        XCTAssertEqual(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &fds), 0)
        defer { close(fds[0]); close(fds[1]) }
        // More pieces than one sendmsg takes, and more bytes than the socket buffers.
        let pieces = (0..<(PluginChild.maxPieces * 2 + 7)).map { index in record(UInt8(truncatingIfNeeded: index), 1 + index % 700) }
        let expected = pieces.flatMap { $0 }
        let received = LockedValue<[UInt8]>([])
        let readEnd = fds[1]
        let reader = Thread {
            var buffer = [UInt8](repeating: 0, count: 1 << 16)
            while true {
                let n = buffer.withUnsafeMutableBytes { read(readEnd, $0.baseAddress!, $0.count) }
                if n <= 0 { return }
                received.withLock { $0.append(contentsOf: buffer[0..<n]) }
            }
        }
        reader.start()
        let storage = pieces.map { piece -> UnsafeMutableRawBufferPointer in
            let memory = UnsafeMutableRawBufferPointer.allocate(byteCount: piece.count, alignment: 1)
            memory.copyBytes(from: piece)
            return memory
        }
        defer { storage.forEach { $0.deallocate() } }
        XCTAssertTrue(PluginChild.send(storage.map { iovec(iov_base: $0.baseAddress, iov_len: $0.count) }, to: fds[0]))
        shutdown(fds[0], Int32(SHUT_WR))
        let deadline = Date().addingTimeInterval(10)
        while received.withLock({ $0.count }) < expected.count, Date() < deadline { usleep(1000) }
        XCTAssertEqual(received.withLock { $0 }, expected)
    }

    /// A URL request's send never blocks its caller: with the socket full
    /// (the child not reading) or another write under way, it returns at
    /// once and the bytes follow, whole and in order, once the peer reads.
    func testSendSoon_neverBlocks_andItsBytesFollowWhenThePeerReads() throws {
        var fds: [Int32] = [0, 0]
        XCTAssertEqual(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &fds), 0)
        defer { close(fds[0]); close(fds[1]) }
        let lock = DispatchSemaphore(value: 1)
        XCTAssertTrue(PluginChild.sendSoon([1, 2, 3], to: fds[0], guardedBy: lock), "room and no other write: sent now")
        // Another write holds the lock: no wait; the bytes go after it.
        lock.wait()
        var started = Date()
        DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(100)) { lock.signal() }
        XCTAssertFalse(PluginChild.sendSoon([UInt8](repeating: 5, count: 10), to: fds[0], guardedBy: lock))
        XCTAssertLessThan(Date().timeIntervalSince(started), 0.09)
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        func receive(until enough: ([UInt8]) -> Bool) {
            let deadline = Date().addingTimeInterval(10)
            while !enough(received), Date() < deadline {
                let n = buffer.withUnsafeMutableBytes { recv(fds[1], $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
                if n > 0 { received.append(contentsOf: buffer[0..<n]) } else { usleep(1000) }
            }
        }
        receive { $0.count >= 13 }
        XCTAssertEqual(received, [1, 2, 3] + [UInt8](repeating: 5, count: 10))
        received = []
        // Fill the socket: nothing reads fds[1] yet.
        var filler = [UInt8](repeating: 0xAA, count: 4096)
        while (filler.withUnsafeMutableBytes { send(fds[0], $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }) > 0 {}
        started = Date()
        XCTAssertFalse(PluginChild.sendSoon([UInt8](repeating: 7, count: 300), to: fds[0], guardedBy: lock))
        XCTAssertLessThan(Date().timeIntervalSince(started), 0.5, "returned without waiting for the peer")
        // A later write waits its turn behind the rest (the lock stays held).
        XCTAssertFalse(PluginChild.sendSoon([UInt8](repeating: 9, count: 10), to: fds[0], guardedBy: lock))
        // The peer reads: everything arrives; the request's 300 bytes are contiguous.
        receive { $0.filter { $0 == 9 }.count >= 10 }
        let sevens = received.indices.filter { received[$0] == 7 }
        XCTAssertEqual(sevens.count, 300)
        XCTAssertEqual(sevens.last.map { $0 - sevens[0] + 1 }, 300, "the request is not split by another write")
        XCTAssertEqual(received.filter { $0 == 9 }.count, 10)
        XCTAssertEqual(lock.wait(timeout: .now() + 5), .success, "the lock is released after the last send")
        lock.signal()  // (libdispatch traps on a semaphore freed below its start value)
    }
}
