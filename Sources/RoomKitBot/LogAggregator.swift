import Logging
import RoomKit
import RoomKitLoop

/// Folds many log lines of one kind into one line per cause per interval,
/// with counts: when a whole batch of rooms fails the same way, one
/// warning per room per attempt was a log storm (3 million "login timed
/// out" lines, 495 MB in five minutes; issue #26).
///
/// `note` counts; `flush` writes one line per (message, cause) noted since
/// the last flush, with `rooms` (how many times it was noted) and `example`
/// (the first room), and forgets them. The driver calls `flush` once per
/// interval and at the end. Thread-safe.
final class LogAggregator: Sendable {
    private struct Key: Hashable {
        let level: Logger.Level
        let message: String
        let cause: String
    }

    private struct Entry {
        var count = 0
        var example: String
        var metadata: Logger.Metadata
        var order: Int
    }

    private let logger: Logger
    private let entries = LockedValue<[Key: Entry]>([:])

    init(logger: Logger) {
        self.logger = logger
    }

    /// Counts one occurrence of `message` for `room`, with `cause` (what
    /// makes two occurrences the same: an error's text) and `metadata`
    /// (kept from the first occurrence of the interval).
    func note(_ level: Logger.Level, _ message: String, cause: String, room: String, metadata: Logger.Metadata = [:]) {
        let key = Key(level: level, message: message, cause: cause)
        entries.withLock { entries in
            if entries[key] == nil {
                entries[key] = Entry(example: room, metadata: metadata, order: entries.count)
            }
            entries[key]?.count += 1
        }
    }

    /// Writes one line per (message, cause) noted since the last flush, in
    /// the order they were first noted. Returns how many lines it wrote.
    @discardableResult
    func flush() -> Int {
        let taken = entries.withLock { entries -> [(Key, Entry)] in
            defer { entries.removeAll() }
            return entries.sorted { $0.value.order < $1.value.order }
        }
        for (key, entry) in taken {
            var metadata = entry.metadata
            metadata["error"] = "\(key.cause)"
            metadata["rooms"] = "\(entry.count)"
            metadata["example"] = "\(entry.example)"
            logger.log(level: key.level, "\(key.message)", metadata: metadata)
        }
        return taken.count
    }
}
