/// A min-heap of (deadline, key, generation). Cancelling is lazy: a popped
/// entry whose generation is no longer current is skipped by the caller.
/// Only sessions that are logging in or reconnecting have a deadline, so an
/// idle logged-in session costs nothing here.
struct DeadlineQueue<Key: Hashable> {
    private var heap: [(at: Int64, key: Key, generation: UInt64)] = []

    var isEmpty: Bool { heap.isEmpty }
    var count: Int { heap.count }
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

    /// Removes and returns every entry due at `now`, earliest first.
    mutating func popDue(_ now: Int64) -> [(key: Key, generation: UInt64)] {
        var due: [(Key, UInt64)] = []
        while let first = heap.first, first.at <= now {
            due.append((first.key, first.generation))
            let last = heap.removeLast()
            if !heap.isEmpty {
                heap[0] = last
                var parent = 0
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
        }
        return due.map { (key: $0.0, generation: $0.1) }
    }
}
