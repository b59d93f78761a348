/// The bytes of a process plugin's journal (PluginProcess+Journal.swift):
/// its encoded records, back to back in chunks of `chunkSize`, a record
/// never split across two. A record is appended into spare capacity (no
/// buffer is ever grown by copying it), and released a chunk at a time once
/// every record in it is finished; emptied chunks are kept for reuse, up to
/// `maxSpare`, so a steady stream touches the same memory over and over
/// (no fresh pages, so no page faults), and a burst's chunks beyond that go
/// back to the allocator.
///
/// A place is a chunk's number, counted from the first chunk ever made (it
/// stays valid while chunks before it are released), and an offset in it.
/// Pure data: no lock of its own (the process's lock guards it).
struct PluginJournalBytes {
    /// The usual chunk: a record longer than this gets a chunk of its own size.
    static let chunkSize = 64 << 10
    /// Emptied chunks kept for reuse.
    static let maxSpare = 16

    /// One chunk: raw memory written in place through a pointer, so that
    /// appending a record is a few stores and two copies, with no array
    /// bookkeeping (uniqueness checks, capacity checks per appended field).
    final class Chunk {
        let base: UnsafeMutablePointer<UInt8>
        let capacity: Int
        var count = 0

        init(capacity: Int) {
            self.capacity = capacity
            base = .allocate(capacity: capacity)
        }

        deinit { base.deallocate() }
    }

    private var chunks: [Chunk] = []
    /// The number of `chunks[0]`.
    private var first = 0
    private var spare: [Chunk] = []

    /// Appends a record of exactly `length` bytes, written by `write` into
    /// the buffer it is given (which it must fill: it returns how many bytes
    /// it wrote); returns where the record is.
    mutating func append(length: Int, _ write: (UnsafeMutableRawBufferPointer) -> Int) -> (chunk: Int, start: Int) {
        if chunks.isEmpty || chunks[chunks.count - 1].capacity - chunks[chunks.count - 1].count < length {
            chunks.append(freshChunk(holding: length))
        }
        let index = chunks.count - 1
        let chunk = chunks[index]
        let start = chunk.count
        let written = write(UnsafeMutableRawBufferPointer(start: chunk.base + start, count: length))
        precondition(written == length, "a journal record's length was mispredicted")
        chunk.count += length
        return (first + index, start)
    }

    private mutating func freshChunk(holding length: Int) -> Chunk {
        if length <= Self.chunkSize, let chunk = spare.popLast() {
            chunk.count = 0
            return chunk
        }
        return Chunk(capacity: max(Self.chunkSize, length))
    }

    /// Calls `body` with the `length` bytes at `start` in chunk `chunk`.
    func withBytes<Result>(chunk: Int, start: Int, length: Int, _ body: (UnsafeBufferPointer<UInt8>) -> Result) -> Result {
        let chunk = chunks[chunk - first]
        precondition(start >= 0 && start + length <= chunk.count, "a journal record outside its chunk")
        return body(UnsafeBufferPointer(start: chunk.base + start, count: length))
    }

    /// Releases every chunk numbered below `chunk` (their records are all finished).
    mutating func release(before chunk: Int) {
        let count = min(chunks.count, chunk - first)
        guard count > 0 else { return }
        for index in 0..<count { keep(chunks[index]) }
        chunks.removeFirst(count)
        first += count
    }

    /// Releases every chunk.
    mutating func removeAll() {
        release(before: first + chunks.count)
    }

    private mutating func keep(_ chunk: Chunk) {
        guard spare.count < Self.maxSpare, chunk.capacity <= Self.chunkSize * 2 else { return }
        spare.append(chunk)
    }

    /// Chunks in use and kept (tests).
    var chunkCounts: (inUse: Int, spare: Int) { (chunks.count, spare.count) }
}
