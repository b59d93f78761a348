import RoomKitLoop
import Foundation
import Logging
import Synchronization

/// Where the example's narrative goes. Every line is kept with its time since
/// start; without a live view it is also printed at once. With the live view,
/// the view shows the newest lines and the whole transcript is printed after
/// it closes, so the terminal keeps a plain record. Safe from any thread.
final class Console: Sendable {
    /// Whether a live view owns the terminal (lines are not printed as they come).
    let live: Bool
    private let start = ContinuousClock.now
    private let lines = LockedValue<[String]>([])

    init(live: Bool) {
        self.live = live
    }

    /// Seconds since start.
    var elapsed: Double {
        let (seconds, attoseconds) = (ContinuousClock.now - start).components
        return Double(seconds) + Double(attoseconds) / 1e18
    }

    /// Adds a timestamped line (printed now unless the live view is on).
    func log(_ text: String) {
        let line = String(format: "[%5.1fs] ", elapsed) + text
        lines.withLock { lines in
            lines.append(line)
            if !live { Self.write(line + "\n") }
        }
    }

    /// Every line so far.
    var transcript: [String] { lines.withLock { $0 } }

    /// The newest `count` lines.
    func recent(_ count: Int) -> [String] {
        lines.withLock { Array($0.suffix(count)) }
    }

    /// Writes text to stdout as is, unbuffered (one write per call).
    static func write(_ text: String) {
        let bytes = Array(text.utf8)
        bytes.withUnsafeBytes { buffer in
            guard let base = buffer.baseAddress else { return }
            var offset = 0
            while offset < buffer.count {
                let written = Foundation.write(STDOUT_FILENO, base + offset, buffer.count - offset)
                if written < 0 && errno == EINTR { continue }
                if written <= 0 { return }
                offset += written
            }
        }
    }
}

/// Routes library logs into the console, so they never tear the live view.
struct ConsoleLogHandler: LogHandler {
    let label: String
    let console: Console
    var logLevel: Logger.Level
    var metadata: Logger.Metadata = [:]

    init(label: String, console: Console, level: Logger.Level) {
        self.label = label
        self.console = console
        self.logLevel = level
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        let all = metadata.merging(event.metadata ?? [:]) { $1 }
        let details = all.isEmpty ? "" : " " + all.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
        console.log("log \(event.level) \(label): \(event.message)\(details)")
    }
}
