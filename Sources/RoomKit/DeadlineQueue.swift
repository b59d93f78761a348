/// A min-heap of (deadline, key, generation). Cancelling is lazy: a popped
/// entry whose generation is no longer current is skipped by the caller.
/// Only sessions that are logging in or reconnecting have a deadline; the
/// entry a login leaves behind when it is answered is dropped once the
/// cancelled entries are half the heap (`cancelled(isCurrent:)`), so an idle
/// logged-in session costs nothing here for long (every login would
/// otherwise leave 32 bytes for the whole login timeout).
struct DeadlineQueue<Key: Hashable> {
    private var heap: [(at: Int64, key: Key, generation: UInt64)] = []
    /// Entries cancelled since the last compaction (some may have been popped since).
    private var cancelledCount = 0

    var isEmpty: Bool { heap.isEmpty }
    var count: Int { heap.count }
    /// The room of allocated entries (for tests: a compaction frees the old heap).
    var capacity: Int { heap.capacity }
    var earliest: Int64? { heap.first?.at }

    mutating func insert(_ at: Int64, _ key: Key, generation: UInt64) {
        heap.append((at, key, generation))
        var child = heap.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard heap[child].at < heap[parent].at else { break }
            heap.swapAt(child, parent)
            child = parent
        }
    }

    /// Notes that one entry is no longer current. When cancelled entries
    /// may be half the heap, drops every entry `isCurrent` rejects and
    /// rebuilds the heap: O(n) once per n/2 cancellations.
    mutating func cancelled(isCurrent: (Key, UInt64) -> Bool) {
        cancelledCount += 1
        guard cancelledCount >= 64, cancelledCount * 2 > heap.count else { return }
        cancelledCount = 0
        heap = heap.filter { isCurrent($0.key, $0.generation) }
        var index = heap.count / 2
        while index > 0 {
            index -= 1
            siftDown(from: index)
        }
    }

    private mutating func siftDown(from start: Int) {
        var parent = start
        while true {
            let left = 2 * parent + 1, right = left + 1
            var smallest = parent
            if left < heap.count && heap[left].at < heap[smallest].at { smallest = left }
            if right < heap.count && heap[right].at < heap[smallest].at { smallest = right }
            if smallest == parent { break }
            heap.swapAt(parent, smallest)
            parent = smallest
        }
    }

    /// Removes and returns every entry due at `now`, earliest first.
    mutating func popDue(_ now: Int64) -> [(key: Key, generation: UInt64)] {
        var due: [(Key, UInt64)] = []
        while let first = heap.first, first.at <= now {
            due.append((first.key, first.generation))
            let last = heap.removeLast()
            if !heap.isEmpty {
                heap[0] = last
                siftDown(from: 0)
            }
        }
        return due.map { (key: $0.0, generation: $0.1) }
    }
}
