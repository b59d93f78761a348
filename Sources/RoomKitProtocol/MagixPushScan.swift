// The client's hot path: a magix push (PROTOCOL.md §8) read straight from
// the received bytes, without a `JSON` tree of the whole message. Only the
// few fields a magix push has are extracted; the payload stays as the bytes
// that were received. Anything else (another op, invalid input, a form this
// scanner does not take) is left to the full decoder (`JSON.parse`, then
// `ServerPush.decode`), which also produces the errors: the scanner never
// fails, it only declines, so bad input gets exactly the full path's codes.

/// The fields of a magix push, read by ``ServerPush/scanMagix(_:)``: what
/// `ServerPush.decode` gives as `.room(RoomPush(room:seq:body: .magix(…)))`.
public struct MagixPushFields: Sendable {
    public let room: String
    public let seq: Int64
    public let from: Int64
    public let event: String
    /// The `payload` member (`.value(.null)` when absent).
    public let payload: JSONPayload
}

extension ServerPush {
    /// Reads a magix push straight from a message's bytes: the same room,
    /// seq, from, event and payload value that `decode(JSON.parse(bytes))`
    /// gives as `.room(RoomPush(…, body: .magix(…)))`, without building a
    /// `JSON` tree; the payload is kept as received when its text is
    /// canonical (``JSONText``), else parsed.
    ///
    /// Returns nil for every other message and for anything the full
    /// decoder would reject (or that this scanner does not take: escaped
    /// keys, an escaped `op` or `room`, a `seq`/`from` that is not a plain
    /// integer…);
    /// decode those with ``decode(_:)``, which also gives their errors.
    /// Whenever this returns fields, the full decoder succeeds with the same
    /// values.
    public static func scanMagix(_ bytes: [UInt8]) -> MagixPushFields? {
        scanMagix(bytes[...])
    }

    /// ``scanMagix(_:)-([UInt8])`` for one message inside a larger buffer
    /// (an element of a batch, ``MessageBatch``): the payload text stays a
    /// slice of the same storage, no copy.
    public static func scanMagix(_ bytes: ArraySlice<UInt8>) -> MagixPushFields? {
        bytes.withUnsafeBufferPointer { buffer -> MagixPushFields? in
            withUnsafeTemporaryAllocation(of: Int.self, capacity: MagixScanner.keyCapacity * 2) { keys in
                var scanner = MagixScanner(bytes: buffer, keys: keys)
                guard let found = scanner.scanPush() else { return nil }
                let payload: JSONPayload
                if let range = found.payload {
                    let base = bytes.startIndex
                    payload = found.payloadCanonical
                        ? .text(JSONText(canonical: bytes[(base + range.lowerBound)..<(base + range.upperBound)]))
                        : .value(found.payloadValue)
                } else {
                    payload = .value(.null)
                }
                return MagixPushFields(room: found.room, seq: found.seq, from: found.from, event: found.event, payload: payload)
            }
        }
    }
}

/// The fields one kind of magix message extracts (`MagixScanner.Found`,
/// `FoundRequest`): its key table, and how each known member's value is
/// read. `MagixScanner.scanMessage` walks the message for both.
protocol MagixMessageFields {
    /// The bits of the members that must be present.
    static var required: UInt16 { get }
    /// The bit of a known key (one bit each, at most 16 keys), 0 for any other key.
    static func bit(ofKey start: Int, _ stop: Int, in scanner: MagixScanner) -> UInt16
    /// Reads the value of the known member `bit` at `scanner.pos`; false declines.
    mutating func read(_ bit: UInt16, from scanner: inout MagixScanner) -> Bool
}

/// A payload member read by `MagixScanner.scanPayload`.
struct ScannedPayload {
    /// Where its text is in the message.
    let range: Range<Int>
    /// Whether the text is canonical (``JSONText``).
    let canonical: Bool
    /// Whether every object in it has its keys in ascending byte order.
    let sorted: Bool
    /// Its value when not canonical (`.null` otherwise).
    let value: JSON
}

/// The byte-level reader behind `ServerPush.scanMagix`. Every `scan…`
/// returns nil (or false) to decline: invalid input, or a form left to the
/// full decoder.
struct MagixScanner {
    /// Keys remembered per open object to find repeats; an object with more
    /// (or deeper ones in total) is checked by `JSON.parse` instead.
    static let keyCapacity = 64
    /// The deepest payload the full parser takes: 256 open containers,
    /// the message's own object being one.
    static let maxValueDepth = JSON.defaultMaxDepth - 1

    let bytes: UnsafeBufferPointer<UInt8>
    let end: Int
    var pos = 0
    /// Start/end offsets of the keys of the open objects (pairs).
    let keys: UnsafeMutableBufferPointer<Int>
    var keyCount = 0
    /// Whether the value being skipped is canonical (see `JSONText`).
    var canonical = true
    /// Whether every object of the (canonical) value being skipped has its
    /// keys in ascending byte order, as `serialize(sortedKeys: true)` writes
    /// them (the server stores such text as is; MagixRequestScan.swift).
    var sorted = true

    init(bytes: UnsafeBufferPointer<UInt8>, keys: UnsafeMutableBufferPointer<Int>) {
        self.bytes = bytes
        self.end = bytes.count
        self.keys = keys
    }

    struct Found: MagixMessageFields {
        var room = ""
        var seq: Int64 = 0
        var from: Int64 = 0
        var event = ""
        var payload: Range<Int>?
        var payloadCanonical = false
        var payloadValue: JSON = .null

        /// op, room, seq, from, event (payload may be absent).
        static var required: UInt16 { 31 }

        /// op 1, room 2, seq 4, from 8, event 16, payload 32; 0 for any other key.
        @inline(__always)
        static func bit(ofKey start: Int, _ stop: Int, in scanner: MagixScanner) -> UInt16 {
            switch stop - start {
            case 2: return scanner.equals(start, stop, "op") ? 1 : 0
            case 3: return scanner.equals(start, stop, "seq") ? 4 : 0
            case 4:
                if scanner.bytes[start] == UInt8(ascii: "r") { return scanner.equals(start, stop, "room") ? 2 : 0 }
                return scanner.equals(start, stop, "from") ? 8 : 0
            case 5: return scanner.equals(start, stop, "event") ? 16 : 0
            case 7: return scanner.equals(start, stop, "payload") ? 32 : 0
            default: return 0
            }
        }

        @inline(__always)
        mutating func read(_ bit: UInt16, from scanner: inout MagixScanner) -> Bool {
            switch bit {
            case 1:
                return scanner.scanMagixOp()
            case 2:
                guard let room = scanner.scanRoomID() else { return false }
                self.room = room
            case 4:
                guard let seq = scanner.scanInteger(), seq >= 0 else { return false }
                self.seq = seq
            case 8:
                guard let from = scanner.scanInteger() else { return false }
                self.from = from
            case 16:
                guard let event = scanner.scanEventName() else { return false }
                self.event = event
            case 32:
                guard let scanned = scanner.scanPayload() else { return false }
                (payload, payloadCanonical, payloadValue) = (scanned.range, scanned.canonical, scanned.value)
            default:
                return false  // not a bit of this table
            }
            return true
        }
    }

    @inline(__always)
    mutating func skipWhitespace() {
        while pos < end {
            switch bytes[pos] {
            case 0x20, 0x09, 0x0A, 0x0D: pos += 1
            default: return
            }
        }
    }

    /// Like `skipWhitespace`, and whitespace makes the value non-canonical.
    @inline(__always)
    mutating func skipWhitespaceInValue() {
        let start = pos
        skipWhitespace()
        if pos != start { canonical = false }
    }

    @inline(__always)
    func equals(_ start: Int, _ stop: Int, _ literal: StaticString) -> Bool {
        let count = literal.utf8CodeUnitCount
        guard stop - start == count else { return false }
        let text = literal.utf8Start
        for index in 0..<count where bytes[start + index] != text[index] { return false }
        return true
    }

    // MARK: The message

    mutating func scanPush() -> Found? {
        var found = Found()
        return scanMessage(into: &found) ? found : nil
    }

    /// The one walk over a message's members, for magix pushes (`Found`),
    /// magix requests (`FoundRequest`) and login replies (`FoundLoginReply`): an object of plain keys (no escapes;
    /// ASCII for the unknown ones), each known key's value read by
    /// `Fields.read`, unknown members validated and ignored, no key
    /// repeated, nothing after the object but whitespace, and every key of
    /// `Fields.required` present. False to decline.
    mutating func scanMessage<Fields: MagixMessageFields>(into fields: inout Fields) -> Bool {
        var seen: UInt16 = 0
        var otherKeys: [Range<Int>] = []
        skipWhitespace()
        guard pos < end, bytes[pos] == UInt8(ascii: "{") else { return false }
        pos += 1
        skipWhitespace()
        guard pos < end, bytes[pos] != UInt8(ascii: "}") else { return false }
        while true {
            guard pos < end, bytes[pos] == UInt8(ascii: "\""),
                  let key = scanString(), !key.escaped else { return false }
            skipWhitespace()
            guard pos < end, bytes[pos] == UInt8(ascii: ":") else { return false }
            pos += 1
            skipWhitespace()
            guard pos < end else { return false }
            let bit = Fields.bit(ofKey: key.start, key.end, in: self)
            if bit != 0 {
                guard fields.read(bit, from: &self) else { return false }
            } else {
                // An unknown member: validated (the full parser would fail on
                // it) and ignored; its key must not repeat.
                guard !key.nonASCII else { return false }
                for other in otherKeys where equals(other, key.start, key.end) { return false }
                otherKeys.append(key.start..<key.end)
                guard scanMember() != nil else { return false }
            }
            guard seen & bit == 0 else { return false }  // a repeated key
            seen |= bit
            skipWhitespace()
            guard pos < end else { return false }
            if bytes[pos] == UInt8(ascii: ",") {
                pos += 1
                skipWhitespace()
                continue
            }
            guard bytes[pos] == UInt8(ascii: "}") else { return false }
            pos += 1
            break
        }
        skipWhitespace()
        return pos == end && seen & Fields.required == Fields.required
    }

    // MARK: Members both messages have

    /// `"magix"` at `pos`, as a plain string.
    mutating func scanMagixOp() -> Bool {
        scanOp("magix")
    }

    /// The op `name` at `pos`, as a plain string (an escaped op is left to
    /// the full decoder).
    mutating func scanOp(_ name: StaticString) -> Bool {
        guard bytes[pos] == UInt8(ascii: "\""), let op = scanString(), !op.escaped else { return false }
        return equals(op.start, op.end, name)
    }

    /// A plain string at `pos` (no escapes), as a `String`.
    mutating func scanPlainString() -> String? {
        guard bytes[pos] == UInt8(ascii: "\""), let text = scanString(), !text.escaped else { return nil }
        return String(decoding: UnsafeBufferPointer(rebasing: bytes[text.start..<text.end]), as: UTF8.self)
    }

    /// A valid room ID at `pos`, as a plain string.
    mutating func scanRoomID() -> String? {
        guard bytes[pos] == UInt8(ascii: "\""), let room = scanString(), !room.escaped else { return nil }
        let text = UnsafeBufferPointer(rebasing: bytes[room.start..<room.end])
        guard RoomID.isValid(bytes: text) else { return nil }
        return String(decoding: text, as: UTF8.self)
    }

    /// A string at `pos`; escapes (and their surrogate pairs) decoded by the parser.
    mutating func scanEventName() -> String? {
        guard bytes[pos] == UInt8(ascii: "\""), let event = scanString() else { return nil }
        guard event.escaped else {
            return String(decoding: UnsafeBufferPointer(rebasing: bytes[event.start..<event.end]), as: UTF8.self)
        }
        let literal = UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(bytes)[(event.start - 1)..<(event.end + 1)])
        return (try? JSON.parse(literal))?.stringValue
    }

    /// The payload member's value at `pos`: its range, whether it is
    /// canonical and sorted, and its parsed value when it is not canonical.
    mutating func scanPayload() -> ScannedPayload? {
        let start = pos
        guard let (canonical, value) = scanMember() else { return nil }
        return ScannedPayload(range: start..<pos, canonical: canonical, sorted: sorted, value: value ?? .null)
    }

    @inline(__always)
    func equals(_ range: Range<Int>, _ start: Int, _ stop: Int) -> Bool {
        guard range.count == stop - start else { return false }
        var offset = start
        for index in range {
            if bytes[index] != bytes[offset] { return false }
            offset += 1
        }
        return true
    }

    /// A member's value at `pos`: valid, and whether canonical; a value that
    /// is not canonical is checked (and returned) by `JSON.parse`.
    mutating func scanMember() -> (canonical: Bool, value: JSON?)? {
        let start = pos
        canonical = true
        sorted = true
        keyCount = 0
        guard skipValue(depth: 0) else { return nil }
        if canonical { return (true, nil) }
        let text = UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(bytes)[start..<pos])
        guard let value = try? JSON.parse(text, maxDepth: Self.maxValueDepth) else { return nil }
        return (false, value)
    }
}
