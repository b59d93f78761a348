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

    /// One chunk's memory, freed when its last owner lets go. The hot paths
    /// read `bases`, `capacities` and `counts` (plain data) instead: taking
    /// a chunk out of an array of classes was a retain and a release of it
    /// per record.
    final class Chunk {
        let base: UnsafeMutablePointer<UInt8>
        let capacity: Int

        init(capacity: Int) {
            self.capacity = capacity
            base = .allocate(capacity: capacity)
        }

        deinit { base.deallocate() }
    }

    /// The chunks in use, oldest first, and for each its memory, size and
    /// bytes written (`owners[i].base == bases[i]`); the last chunk's count
    /// is `tailCount`, not its place in `counts`.
    private var owners: [Chunk] = []
    private var bases: [UnsafeMutablePointer<UInt8>] = []
    private var capacities: [Int] = []
    private var counts: [Int] = []
    /// The last chunk, where records are appended, as plain fields: a
    /// record's append touches no array (each write to one was a uniqueness
    /// check and a bounds check, per record).
    private var tailBase: UnsafeMutablePointer<UInt8>?
    private var tailCount = 0
    private var tailCapacity = 0
    /// The number of `owners[0]`.
    private var first = 0
    private var spare: [Chunk] = []

    /// Appends a record of exactly `length` bytes, written by `write` into
    /// the buffer it is given (which it must fill: it returns how many bytes
    /// it wrote); returns where the record is.
    mutating func append(length: Int, _ write: (UnsafeMutableRawBufferPointer) -> Int) -> (chunk: Int, start: Int) {
        let (chunk, start, bytes) = reserve(length)
        let written = write(bytes)
        precondition(written == length, "a journal record's length was mispredicted")
        return (chunk, start)
    }

    /// Takes the next `length` bytes for one record, which the caller
    /// writes there at once (all of them); returns where it is and its memory.
    @inline(__always)
    mutating func reserve(_ length: Int) -> (chunk: Int, start: Int, bytes: UnsafeMutableRawBufferPointer) {
        if tailCapacity - tailCount < length { startChunk(holding: length) }
        let start = tailCount
        tailCount = start + length
        return (first + bases.count - 1, start, UnsafeMutableRawBufferPointer(start: tailBase! + start, count: length))
    }

    private mutating func startChunk(holding length: Int) {
        if !counts.isEmpty { counts[counts.count - 1] = tailCount }
        let chunk = freshChunk(holding: length)
        owners.append(chunk)
        bases.append(chunk.base)
        capacities.append(chunk.capacity)
        counts.append(0)
        (tailBase, tailCount, tailCapacity) = (chunk.base, 0, chunk.capacity)
    }

    private mutating func freshChunk(holding length: Int) -> Chunk {
        if length <= Self.chunkSize, let chunk = spare.popLast() { return chunk }
        return Chunk(capacity: max(Self.chunkSize, length))
    }

    /// Bytes written in chunk `index` (counted from `first`).
    private func count(at index: Int) -> Int { index == bases.count - 1 ? tailCount : counts[index] }

    /// The memory of chunk `chunk` (a sender keeps it for as long as it reads the chunk).
    func owner(of chunk: Int) -> Chunk { owners[chunk - first] }

    /// Calls `body` with the `length` bytes at `start` in chunk `chunk`.
    func withBytes<Result>(chunk: Int, start: Int, length: Int, _ body: (UnsafeBufferPointer<UInt8>) -> Result) -> Result {
        let index = chunk - first
        precondition(start >= 0 && start + length <= count(at: index), "a journal record outside its chunk")
        return body(UnsafeBufferPointer(start: bases[index] + start, count: length))
    }

    /// Releases every chunk numbered below `chunk` (their records are all finished).
    mutating func release(before chunk: Int) {
        let count = min(owners.count, chunk - first)
        guard count > 0 else { return }
        for index in 0..<count { keep(owners[index]) }
        owners.removeFirst(count)
        bases.removeFirst(count)
        capacities.removeFirst(count)
        counts.removeFirst(count)
        first += count
        if bases.isEmpty { (tailBase, tailCount, tailCapacity) = (nil, 0, 0) }
    }

    /// Releases every chunk.
    mutating func removeAll() {
        release(before: first + owners.count)
    }

    private mutating func keep(_ chunk: Chunk) {
        guard spare.count < Self.maxSpare, chunk.capacity <= Self.chunkSize * 2 else { return }
        spare.append(chunk)
    }

    /// Chunks in use and kept (tests).
    var chunkCounts: (inUse: Int, spare: Int) { (owners.count, spare.count) }
}
