import CRoomKitPluginWire
import Foundation

/// EVENTS frames (PLUGIN-WIRE.md section 4) as pieces to gather into one
/// `sendmsg`: each frame's 9-byte header (its length, type and record
/// count) here, its records where the journal keeps them
/// (`PluginJournalBytes`), a run of adjacent records as one piece. The
/// chunks a send reads are held here until it is done, so a chunk released
/// meanwhile (the journal cleared after the child died) is not freed under
/// it. Used on the plugin's queue by one flush at a time.
struct GatheredFrames {
    /// A header (an offset in `headers`) or a run of records (in `held[chunk]`).
    private enum Piece {
        case header(offset: Int)
        case records(held: Int, start: Int, length: Int)
    }

    private var headers: [UInt8] = []
    private var pieces: [Piece] = []
    private var held: [PluginJournalBytes.Chunk] = []
    /// The open frame's header offset (-1: none), record count and bytes after its header.
    private var frameHeader = -1
    private(set) var frameRecords: UInt32 = 0
    private(set) var frameBytes = 0
    /// Bytes gathered in all, headers included.
    private(set) var bytes = 0
    /// The journal chunk number of `held.last` (-1: none).
    private var heldChunk = -1
    /// The open run of records, in `held.last` (length 0: none): a piece
    /// once it ends, so a record that extends it touches no array.
    private var runStart = 0
    private var runLength = 0

    static let headerSize = 9

    var isEmpty: Bool { pieces.isEmpty && runLength == 0 }

    /// Adds one record of `length` bytes at `start` in the journal's chunk
    /// number `chunk` to the open frame (opening one). True when the record
    /// is in another chunk than the one before it: the caller then hands
    /// that chunk's memory to `hold` (no retain per record).
    mutating func add(chunk: Int, start: Int, length: Int) -> Bool {
        if frameHeader < 0 {
            frameHeader = headers.count
            headers.append(contentsOf: repeatElement(0, count: Self.headerSize))
            pieces.append(.header(offset: frameHeader))
            bytes += Self.headerSize
        }
        frameRecords += 1
        frameBytes += length
        bytes += length
        let sameChunk = chunk == heldChunk
        if sameChunk, runLength > 0, start == runStart + runLength {
            runLength += length
            return false
        }
        endRun()
        heldChunk = chunk
        (runStart, runLength) = (start, length)
        return !sameChunk
    }

    /// The memory of the chunk the last `add` asked for.
    mutating func hold(_ chunk: PluginJournalBytes.Chunk) {
        held.append(chunk)
    }

    private mutating func endRun() {
        guard runLength > 0 else { return }
        pieces.append(.records(held: held.count - 1, start: runStart, length: runLength))
        runLength = 0
    }

    /// Writes the open frame's header (length, EVENTS, count) and closes it.
    mutating func closeFrame() {
        guard frameHeader >= 0 else { return }
        endRun()
        let length = UInt32(frameBytes + Self.headerSize - 4)
        headers.withUnsafeMutableBytes { raw in
            raw.storeBytes(of: length.littleEndian, toByteOffset: frameHeader, as: UInt32.self)
            raw[frameHeader + 4] = UInt8(ROOMKIT_WIRE_EVENTS.rawValue)
            raw.storeBytes(of: frameRecords.littleEndian, toByteOffset: frameHeader + 5, as: UInt32.self)
        }
        frameHeader = -1
        frameRecords = 0
        frameBytes = 0
    }

    /// Empties it, keeping its arrays' capacity.
    mutating func clear() {
        headers.removeAll(keepingCapacity: true)
        pieces.removeAll(keepingCapacity: true)
        held.removeAll(keepingCapacity: true)
        frameHeader = -1
        frameRecords = 0
        frameBytes = 0
        bytes = 0
        heldChunk = -1
        runLength = 0
    }

    /// Sends every piece, in order, to `child` (closed frames only).
    func send(to child: PluginChild) {
        withPieces { child.send($0) }
    }

    /// Calls `body` with the pieces as `iovec`s, valid during the call (closed frames only).
    func withPieces<Result>(_ body: ([iovec]) -> Result) -> Result {
        precondition(frameHeader < 0, "a frame is sent before it is closed")
        return headers.withUnsafeBytes { headerBytes in
            var vectors: [iovec] = []
            vectors.reserveCapacity(pieces.count)
            for piece in pieces {
                switch piece {
                case .header(let offset):
                    vectors.append(iovec(iov_base: UnsafeMutableRawPointer(mutating: headerBytes.baseAddress! + offset),
                                         iov_len: Self.headerSize))
                case .records(let index, let start, let length):
                    vectors.append(iovec(iov_base: UnsafeMutableRawPointer(held[index].base + start), iov_len: length))
                }
            }
            return body(vectors)
        }
    }

    /// How many pieces a send gathers (tests: a run of adjacent records is one).
    var pieceCount: Int { pieces.count }
}
