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
    /// bytes written (`owners[i].base == bases[i]`).
    private var owners: [Chunk] = []
    private var bases: [UnsafeMutablePointer<UInt8>] = []
    private var capacities: [Int] = []
    private var counts: [Int] = []
    /// The number of `owners[0]`.
    private var first = 0
    private var spare: [Chunk] = []

    /// Appends a record of exactly `length` bytes, written by `write` into
    /// the buffer it is given (which it must fill: it returns how many bytes
    /// it wrote); returns where the record is.
    mutating func append(length: Int, _ write: (UnsafeMutableRawBufferPointer) -> Int) -> (chunk: Int, start: Int) {
        if bases.isEmpty || capacities[bases.count - 1] - counts[bases.count - 1] < length {
            let chunk = freshChunk(holding: length)
            owners.append(chunk)
            bases.append(chunk.base)
            capacities.append(chunk.capacity)
            counts.append(0)
        }
        let index = bases.count - 1
        let start = counts[index]
        let written = write(UnsafeMutableRawBufferPointer(start: bases[index] + start, count: length))
        precondition(written == length, "a journal record's length was mispredicted")
        counts[index] = start + length
        return (first + index, start)
    }

    private mutating func freshChunk(holding length: Int) -> Chunk {
        if length <= Self.chunkSize, let chunk = spare.popLast() { return chunk }
        return Chunk(capacity: max(Self.chunkSize, length))
    }

    /// Calls `body` with the `length` bytes at `start` in chunk `chunk`.
    func withBytes<Result>(chunk: Int, start: Int, length: Int, _ body: (UnsafeBufferPointer<UInt8>) -> Result) -> Result {
        let index = chunk - first
        precondition(start >= 0 && start + length <= counts[index], "a journal record outside its chunk")
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
