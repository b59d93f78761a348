// A JSON value kept as the text it arrived in, when that text is canonical
// (what `JSON.serialize` would write): the magix hot path hands it on
// without a parse (MagixPushScan.swift reads it; RoomKit passes it to the
// event log and plugins).

/// The text of one valid JSON value, written exactly as
/// ``JSON/serialize(into:sortedKeys:)`` writes the value it parses to, up to
/// the order of object members: no whitespace, integers only (in `Int64`),
/// the serializer's escapes only, object keys without repeats. Appending it
/// is appending that value's serialization.
public struct JSONText: Sendable {
    /// The UTF-8 text (a slice of the message it arrived in: no copy).
    public let bytes: ArraySlice<UInt8>

    /// Only the scanner makes these: `bytes` must be canonical as above.
    package init(canonical bytes: ArraySlice<UInt8>) {
        self.bytes = bytes
    }

    /// The value the text holds.
    public var value: JSON {
        do {
            return try JSON.parse(bytes)
        } catch {
            assertionFailure("JSONText holds invalid JSON: \(error)")
            return .null
        }
    }

    /// Appends the text (the value's compact serialization) to `buffer`.
    public func serialize(into buffer: inout [UInt8]) {
        buffer.append(contentsOf: bytes)
    }
}

/// A JSON value as received: its canonical text (not parsed yet), or the
/// parsed value when the text was not canonical.
public enum JSONPayload: Sendable {
    case text(JSONText)
    case value(JSON)

    /// The value (parsing the text).
    public var value: JSON {
        switch self {
        case .text(let text): return text.value
        case .value(let value): return value
        }
    }

    /// Appends the value's compact serialization (see ``JSON/serialize(into:sortedKeys:)``).
    public func serialize(into buffer: inout [UInt8]) {
        switch self {
        case .text(let text): text.serialize(into: &buffer)
        case .value(let value): value.serialize(into: &buffer)
        }
    }
}
