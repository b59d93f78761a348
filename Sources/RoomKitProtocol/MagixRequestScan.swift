// The server's hot path: a magix request (PROTOCOL.md §2 and §8) read
// straight from the received bytes, without a `JSON` tree of the message,
// with the byte-level reader of the client's magix push scan
// (MagixPushScan.swift). As there, the scanner never fails, it only
// declines: whatever it does not answer goes to `JSON.parse` and
// `ClientEnvelope.decode`, which give every error its usual code.

/// The fields of a magix request, read by ``ClientEnvelope/scanMagix(_:)``:
/// what `ClientEnvelope.decode` gives as
/// `ClientEnvelope(id:room:request: .magix(event:payload:to:))`.
public struct MagixRequestFields: Sendable {
    public let id: Int64
    public let room: String
    public let event: String
    /// The `payload` member (`.value(.null)` when absent).
    public let payload: JSONPayload
    /// Whether `payload`, when it is `.text`, has the keys of every object
    /// in ascending byte order: then the text is exactly what
    /// `serialize(into:sortedKeys: true)` writes for its value.
    public let payloadSorted: Bool
    /// `to`, when present and not null.
    public let to: [String]?
}

extension ClientEnvelope {
    /// Reads a magix request straight from a message's bytes: the same id,
    /// room, event, payload value and recipients that
    /// `decode(JSON.parse(bytes))` gives, without building a `JSON` tree;
    /// the payload is kept as received when its text is canonical
    /// (``JSONText``), else parsed.
    ///
    /// Returns nil for every other message, for anything the full decoder
    /// would refuse, and for forms this scanner does not take (escaped
    /// keys, an escaped `op`, `room` or recipient, an `id` that is not a
    /// plain positive integer…); decode those with ``decode(_:)``, which
    /// also gives their errors. Whenever this returns fields, the full
    /// decoder succeeds with the same values.
    public static func scanMagix(_ bytes: [UInt8]) -> MagixRequestFields? {
        bytes.withUnsafeBufferPointer { buffer -> MagixRequestFields? in
            withUnsafeTemporaryAllocation(of: Int.self, capacity: MagixScanner.keyCapacity * 2) { keys in
                var scanner = MagixScanner(bytes: buffer, keys: keys)
                guard let found = scanner.scanRequest() else { return nil }
                let payload: JSONPayload
                if let range = found.payload {
                    payload = found.payloadCanonical ? .text(JSONText(canonical: bytes[range])) : .value(found.payloadValue)
                } else {
                    payload = .value(.null)
                }
                return MagixRequestFields(id: found.id, room: found.room, event: found.event, payload: payload,
                                          payloadSorted: found.payloadCanonical && found.payloadSorted, to: found.to)
            }
        }
    }
}

extension MagixScanner {
    struct FoundRequest: MagixMessageFields {
        var id: Int64 = 0
        var room = ""
        var event = ""
        var payload: Range<Int>?
        var payloadCanonical = false
        var payloadSorted = false
        var payloadValue: JSON = .null
        var to: [String]?

        /// op, id, room, event (payload and to may be absent).
        static var required: UInt16 { 15 }

        /// op 1, id 2, room 4, event 8, payload 16, to 32; 0 for any other key.
        @inline(__always)
        static func bit(ofKey start: Int, _ stop: Int, in scanner: MagixScanner) -> UInt16 {
            switch stop - start {
            case 2:
                if scanner.bytes[start] == UInt8(ascii: "o") { return scanner.equals(start, stop, "op") ? 1 : 0 }
                if scanner.bytes[start] == UInt8(ascii: "i") { return scanner.equals(start, stop, "id") ? 2 : 0 }
                return scanner.equals(start, stop, "to") ? 32 : 0
            case 4: return scanner.equals(start, stop, "room") ? 4 : 0
            case 5: return scanner.equals(start, stop, "event") ? 8 : 0
            case 7: return scanner.equals(start, stop, "payload") ? 16 : 0
            default: return 0
            }
        }

        @inline(__always)
        mutating func read(_ bit: UInt16, from scanner: inout MagixScanner) -> Bool {
            switch bit {
            case 1:
                return scanner.scanMagixOp()
            case 2:  // a positive integer as written (decode also takes 7.0; left to it)
                guard let id = scanner.scanInteger(), id > 0 else { return false }
                self.id = id
            case 4:
                guard let room = scanner.scanRoomID() else { return false }
                self.room = room
            case 8:  // 1–128 bytes
                guard let event = scanner.scanEventName(),
                      TextRules.hasLength(event, atMost: ProtocolLimits.maxEventBytes) else { return false }
                self.event = event
            case 16:
                guard let scanned = scanner.scanPayload() else { return false }
                (payload, payloadCanonical, payloadSorted, payloadValue) =
                    (scanned.range, scanned.canonical, scanned.sorted, scanned.value)
            case 32:  // null, or an array of plain user IDs
                if scanner.bytes[scanner.pos] == UInt8(ascii: "n") { return scanner.skipLiteral("null") }
                guard let to = scanner.scanRecipients() else { return false }
                self.to = to
            default:
                return false  // not a bit of this table
            }
            return true
        }
    }

    mutating func scanRequest() -> FoundRequest? {
        var found = FoundRequest()
        return scanMessage(into: &found) ? found : nil
    }

    /// `to` at `pos` (its `[`): at most `maxRecipients` strings without
    /// escapes, each a valid user ID; nil for anything else.
    mutating func scanRecipients() -> [String]? {
        guard bytes[pos] == UInt8(ascii: "[") else { return nil }
        pos += 1
        skipWhitespace()
        var ids: [String] = []
        guard pos < end else { return nil }
        if bytes[pos] == UInt8(ascii: "]") {
            pos += 1
            return ids
        }
        while true {
            guard pos < end, bytes[pos] == UInt8(ascii: "\""), let id = scanString(), !id.escaped,
                  ids.count < ProtocolLimits.maxRecipients else { return nil }
            let text = String(decoding: UnsafeBufferPointer(rebasing: bytes[id.start..<id.end]), as: UTF8.self)
            guard UserID.isValid(text) else { return nil }
            ids.append(text)
            skipWhitespace()
            guard pos < end else { return nil }
            if bytes[pos] == UInt8(ascii: ",") {
                pos += 1
                skipWhitespace()
                continue
            }
            guard bytes[pos] == UInt8(ascii: "]") else { return nil }
            pos += 1
            return ids
        }
    }
}
