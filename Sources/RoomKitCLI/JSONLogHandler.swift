import Foundation
import Logging

/// How the daemons write their logs to stderr (`--log-format`).
public enum LogFormat: String, Sendable, CaseIterable {
    /// swift-log's `StreamLogHandler` lines, for people.
    case text
    /// One JSON object per line, for log shippers (`JSONLogHandler`).
    case json

    /// Parses a `--log-format` value; the error names the flag.
    public init(flag value: String) throws(OptionError) {
        guard let format = LogFormat(rawValue: value) else {
            throw OptionError(flag: "--log-format", problem: "expected text or json, got '\(value)'")
        }
        self = format
    }

    /// Bootstraps swift-log (once per process, before the first `Logger`) to
    /// write at `level` and above to stderr in this format.
    public func bootstrap(level: Logger.Level) {
        switch self {
        case .text:
            LoggingSystem.bootstrap { label in
                var handler = StreamLogHandler.standardError(label: label)
                handler.logLevel = level
                return handler
            }
        case .json:
            LoggingSystem.bootstrap { label in JSONLogHandler(label: label, level: level) }
        }
    }
}

/// A `LogHandler` writing one JSON object per line to stderr:
/// `{"ts":"2026-11-23T20:31:43.123Z","level":"info","label":"roomd","message":"…",
/// "metadata":{…},"source":"RoomKitServer"}`, plus `"error"` when the event
/// carries one. Metadata keeps its shape: strings, arrays and dictionaries
/// become JSON strings, arrays and objects, and a `.stringConvertible`
/// integer, floating-point number or Bool becomes a JSON number or boolean
/// (`"code":1006`, not `"code":"1006"`). Each line is written with one
/// `write(2)` under a process-wide lock, so lines from several threads never
/// interleave. Usable from any thread.
public struct JSONLogHandler: LogHandler {
    /// The logger's label (`roomd`, `roombot`, …).
    public let label: String
    /// Events below this level are dropped (swift-log checks it before `log`).
    public var logLevel: Logger.Level
    /// Metadata on every line of this logger; an event's own wins on a clash.
    public var metadata: Logger.Metadata = [:]
    /// Metadata added at each event (task-local context), under the event's own.
    public var metadataProvider: Logger.MetadataProvider?
    private let write: @Sendable ([UInt8]) -> Void

    /// Writes to stderr.
    public init(label: String, level: Logger.Level = .info, metadataProvider: Logger.MetadataProvider? = nil) {
        self.init(label: label, level: level, metadataProvider: metadataProvider) { bytes in
            JSONLogHandler.lock.withLock {
                bytes.withUnsafeBufferPointer { buffer in
                    var offset = 0
                    while offset < buffer.count {
                        let written = Foundation.write(STDERR_FILENO, buffer.baseAddress! + offset, buffer.count - offset)
                        if written < 0 && errno == EINTR { continue }
                        if written <= 0 { return }
                        offset += written
                    }
                }
            }
        }
    }

    /// Hands each line (with its newline) to `write`: for tests and embedding.
    public init(label: String, level: Logger.Level, metadataProvider: Logger.MetadataProvider? = nil,
                write: @escaping @Sendable ([UInt8]) -> Void) {
        self.label = label
        self.logLevel = level
        self.metadataProvider = metadataProvider
        self.write = write
    }

    private static let lock = NSLock()

    /// One entry of `metadata`.
    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    /// Writes `event` as one JSON line, on the calling thread.
    public func log(event: LogEvent) {
        var all = metadata
        if let provided = metadataProvider?.get() { all.merge(provided) { $1 } }
        if let given = event.metadata { all.merge(given) { $1 } }
        var object: [String: Any] = [
            "ts": Self.timestamp(Date()),
            "level": event.level.rawValue,
            "label": label,
            "message": event.message.description,
            "metadata": all.mapValues(Self.plain),
            "source": event.source,
        ]
        if let error = event.error { object["error"] = "\(error)" }
        guard var line = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])
        else { return }
        line.append(10)
        write(Array(line))
    }

    /// A metadata value as a JSONSerialization-friendly value.
    static func plain(_ value: Logger.Metadata.Value) -> Any {
        switch value {
        case .string(let text): return text
        case .stringConvertible(let convertible):
            switch convertible {
            case let flag as Bool: return flag
            case let number as any BinaryInteger: return Int64(truncatingIfNeeded: number)
            case let number as Double where number.isFinite: return number
            case let number as Float where number.isFinite: return Double(number)
            default: return convertible.description
            }
        case .array(let values): return values.map(plain)
        case .dictionary(let values): return values.mapValues(plain)
        }
    }

    /// RFC 3339 UTC with milliseconds.
    static func timestamp(_ date: Date) -> String {
        var seconds = time_t(date.timeIntervalSince1970.rounded(.down))
        let millis = Int((date.timeIntervalSince1970 - Double(seconds)) * 1000)
        var parts = tm()
        gmtime_r(&seconds, &parts)
        return String(format: "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", Int(parts.tm_year) + 1900, Int(parts.tm_mon) + 1,
                      Int(parts.tm_mday), Int(parts.tm_hour), Int(parts.tm_min), Int(parts.tm_sec), min(999, max(0, millis)))
    }
}
