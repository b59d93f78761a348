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
    struct FoundRequest {
        var id: Int64 = 0
        var room = ""
        var event = ""
        var payload: Range<Int>?
        var payloadCanonical = false
        var payloadSorted = false
        var payloadValue: JSON = .null
        var to: [String]?
    }

    mutating func scanRequest() -> FoundRequest? {
        var found = FoundRequest()
        var seen: UInt8 = 0  // op 1, id 2, room 4, event 8, payload 16, to 32
        var otherKeys: [Range<Int>] = []
        skipWhitespace()
        guard pos < end, bytes[pos] == UInt8(ascii: "{") else { return nil }
        pos += 1
        skipWhitespace()
        guard pos < end, bytes[pos] != UInt8(ascii: "}") else { return nil }
        while true {
            // A key: plain text only (no escapes), ASCII for the unknown ones.
            guard pos < end, bytes[pos] == UInt8(ascii: "\""),
                  let key = scanString(), !key.escaped else { return nil }
            skipWhitespace()
            guard pos < end, bytes[pos] == UInt8(ascii: ":") else { return nil }
            pos += 1
            skipWhitespace()
            guard pos < end else { return nil }
            let bit = requestKey(key.start, key.end)
            switch bit {
            case 1:  // op
                guard bytes[pos] == UInt8(ascii: "\""), let op = scanString(), !op.escaped,
                      equals(op.start, op.end, "magix") else { return nil }
            case 2:  // id: a positive integer as written (decode also takes 7.0; left to it)
                guard let id = scanInteger(), id > 0 else { return nil }
                found.id = id
            case 4:  // room
                guard bytes[pos] == UInt8(ascii: "\""), let room = scanString(), !room.escaped else { return nil }
                let text = UnsafeBufferPointer(rebasing: bytes[room.start..<room.end])
                guard RoomID.isValid(bytes: text) else { return nil }
                found.room = String(decoding: text, as: UTF8.self)
            case 8:  // event: 1–128 bytes
                guard bytes[pos] == UInt8(ascii: "\""), let event = scanString() else { return nil }
                if event.escaped {
                    let literal = UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(bytes)[(event.start - 1)..<(event.end + 1)])
                    guard let value = (try? JSON.parse(literal))?.stringValue else { return nil }
                    found.event = value
                } else {
                    found.event = String(decoding: UnsafeBufferPointer(rebasing: bytes[event.start..<event.end]), as: UTF8.self)
                }
                guard TextRules.hasLength(found.event, atMost: ProtocolLimits.maxEventBytes) else { return nil }
            case 16:  // payload
                let start = pos
                guard let (canonical, value) = scanMember() else { return nil }
                found.payload = start..<pos
                found.payloadCanonical = canonical
                found.payloadSorted = sorted
                if let value { found.payloadValue = value }
            case 32:  // to: null, or an array of plain user IDs
                if bytes[pos] == UInt8(ascii: "n") {
                    guard skipLiteral("null") else { return nil }
                } else {
                    guard let to = scanRecipients() else { return nil }
                    found.to = to
                }
            default:
                // An unknown member: validated (the full parser would fail on
                // it) and ignored; its key must not repeat.
                guard !key.nonASCII else { return nil }
                for other in otherKeys where equals(other, key.start, key.end) { return nil }
                otherKeys.append(key.start..<key.end)
                guard scanMember() != nil else { return nil }
            }
            guard seen & bit == 0 else { return nil }  // a repeated key
            seen |= bit
            skipWhitespace()
            guard pos < end else { return nil }
            if bytes[pos] == UInt8(ascii: ",") {
                pos += 1
                skipWhitespace()
                continue
            }
            guard bytes[pos] == UInt8(ascii: "}") else { return nil }
            pos += 1
            break
        }
        skipWhitespace()
        guard pos == end, seen & 15 == 15 else { return nil }
        return found
    }

    /// The bit of a magix request's key (op 1, id 2, room 4, event 8,
    /// payload 16, to 32), 0 for any other key.
    @inline(__always)
    func requestKey(_ start: Int, _ stop: Int) -> UInt8 {
        switch stop - start {
        case 2:
            if bytes[start] == UInt8(ascii: "o") { return equals(start, stop, "op") ? 1 : 0 }
            if bytes[start] == UInt8(ascii: "i") { return equals(start, stop, "id") ? 2 : 0 }
            return equals(start, stop, "to") ? 32 : 0
        case 4: return equals(start, stop, "room") ? 4 : 0
        case 5: return equals(start, stop, "event") ? 8 : 0
        case 7: return equals(start, stop, "payload") ? 16 : 0
        default: return 0
        }
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
