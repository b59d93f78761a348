// The client's hot path: a magix push (PROTOCOL.md §8) read straight from
// the received bytes, without a `JSON` tree of the whole message. Only the
// few fields a magix push has are extracted; the payload stays as the bytes
// that were received. Anything else (another op, invalid input, a form this
// scanner does not take) is left to the full decoder (`JSON.parse`, then
// `ServerPush.decode`), which also produces the errors: the scanner never
// fails, it only declines, so bad input gets exactly the full path's codes.

/// The text of one valid JSON value, written exactly as
/// ``JSON/serialize(into:sortedKeys:)`` writes the value it parses to, up to
/// the order of object members: no whitespace, integers only (in `Int64`),
/// the serializer's escapes only, object keys without repeats. Appending it
/// is appending that value's serialization.
public struct JSONText: Sendable {
    /// The UTF-8 text (a slice of the message it arrived in: no copy).
    public let bytes: ArraySlice<UInt8>

    /// Only the scanner makes these: `bytes` must be canonical as above.
    init(canonical bytes: ArraySlice<UInt8>) {
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
        bytes.withUnsafeBufferPointer { buffer -> MagixPushFields? in
            withUnsafeTemporaryAllocation(of: Int.self, capacity: MagixScanner.keyCapacity * 2) { keys in
                var scanner = MagixScanner(bytes: buffer, keys: keys)
                guard let found = scanner.scanPush() else { return nil }
                let payload: JSONPayload
                if let range = found.payload {
                    payload = found.payloadCanonical ? .text(JSONText(canonical: bytes[range])) : .value(found.payloadValue)
                } else {
                    payload = .value(.null)
                }
                return MagixPushFields(room: found.room, seq: found.seq, from: found.from, event: found.event, payload: payload)
            }
        }
    }
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

    init(bytes: UnsafeBufferPointer<UInt8>, keys: UnsafeMutableBufferPointer<Int>) {
        self.bytes = bytes
        self.end = bytes.count
        self.keys = keys
    }

    struct Found {
        var room = ""
        var seq: Int64 = 0
        var from: Int64 = 0
        var event = ""
        var payload: Range<Int>?
        var payloadCanonical = false
        var payloadValue: JSON = .null
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
        var seen: UInt8 = 0  // op, room, seq, from, event, payload
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
            let bit = knownKey(key.start, key.end)
            switch bit {
            case 1:  // op
                guard bytes[pos] == UInt8(ascii: "\""), let op = scanString(), !op.escaped,
                      equals(op.start, op.end, "magix") else { return nil }
            case 2:  // room
                guard bytes[pos] == UInt8(ascii: "\""), let room = scanString(), !room.escaped else { return nil }
                let text = UnsafeBufferPointer(rebasing: bytes[room.start..<room.end])
                guard RoomID.isValid(bytes: text) else { return nil }
                found.room = String(decoding: text, as: UTF8.self)
            case 4:  // seq
                guard let seq = scanInteger(), seq >= 0 else { return nil }
                found.seq = seq
            case 8:  // from
                guard let from = scanInteger() else { return nil }
                found.from = from
            case 16:  // event
                guard bytes[pos] == UInt8(ascii: "\""), let event = scanString() else { return nil }
                if event.escaped {
                    // Escapes (and their surrogate pairs) decoded by the parser.
                    let literal = UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(bytes)[(event.start - 1)..<(event.end + 1)])
                    guard let value = (try? JSON.parse(literal))?.stringValue else { return nil }
                    found.event = value
                } else {
                    found.event = String(decoding: UnsafeBufferPointer(rebasing: bytes[event.start..<event.end]), as: UTF8.self)
                }
            case 32:  // payload
                let start = pos
                guard let (canonical, value) = scanMember() else { return nil }
                found.payload = start..<pos
                found.payloadCanonical = canonical
                if let value { found.payloadValue = value }
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
        guard pos == end, seen & 31 == 31 else { return nil }
        return found
    }

    /// The bit of a known member's key (op 1, room 2, seq 4, from 8, event
    /// 16, payload 32), 0 for any other key.
    @inline(__always)
    func knownKey(_ start: Int, _ stop: Int) -> UInt8 {
        switch stop - start {
        case 2: return equals(start, stop, "op") ? 1 : 0
        case 3: return equals(start, stop, "seq") ? 4 : 0
        case 4:
            if bytes[start] == UInt8(ascii: "r") { return equals(start, stop, "room") ? 2 : 0 }
            return equals(start, stop, "from") ? 8 : 0
        case 5: return equals(start, stop, "event") ? 16 : 0
        case 7: return equals(start, stop, "payload") ? 32 : 0
        default: return 0
        }
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
        keyCount = 0
        guard skipValue(depth: 0) else { return nil }
        if canonical { return (true, nil) }
        let text = UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(bytes)[start..<pos])
        guard let value = try? JSON.parse(text, maxDepth: Self.maxValueDepth) else { return nil }
        return (false, value)
    }

    // MARK: Values

    /// Skips one value at `pos` (no leading whitespace); false when it is
    /// not valid JSON as far as this reader checks (what it does not check
    /// makes the value non-canonical, for `JSON.parse` to check).
    mutating func skipValue(depth: Int) -> Bool {
        guard pos < end else { return false }
        switch bytes[pos] {
        case UInt8(ascii: "{"):
            guard depth < Self.maxValueDepth else { return false }
            pos += 1
            skipWhitespaceInValue()
            guard pos < end else { return false }
            if bytes[pos] == UInt8(ascii: "}") {
                pos += 1
                return true
            }
            let firstKey = keyCount
            defer { keyCount = firstKey }
            while true {
                guard pos < end, bytes[pos] == UInt8(ascii: "\""), let key = scanString() else { return false }
                if !key.canonical || key.nonASCII {
                    canonical = false
                } else if canonical {
                    // Canonical ASCII keys are equal exactly when their bytes are.
                    var index = firstKey
                    while index < keyCount {
                        if equals(keys[2 * index]..<keys[2 * index + 1], key.start, key.end) { return false }
                        index += 1
                    }
                    if keyCount < Self.keyCapacity {
                        keys[2 * keyCount] = key.start
                        keys[2 * keyCount + 1] = key.end
                        keyCount += 1
                    } else {
                        canonical = false
                    }
                }
                skipWhitespaceInValue()
                guard pos < end, bytes[pos] == UInt8(ascii: ":") else { return false }
                pos += 1
                skipWhitespaceInValue()
                guard skipValue(depth: depth + 1) else { return false }
                skipWhitespaceInValue()
                guard pos < end else { return false }
                if bytes[pos] == UInt8(ascii: ",") {
                    pos += 1
                    skipWhitespaceInValue()
                    continue
                }
                guard bytes[pos] == UInt8(ascii: "}") else { return false }
                pos += 1
                return true
            }
        case UInt8(ascii: "["):
            guard depth < Self.maxValueDepth else { return false }
            pos += 1
            skipWhitespaceInValue()
            guard pos < end else { return false }
            if bytes[pos] == UInt8(ascii: "]") {
                pos += 1
                return true
            }
            while true {
                guard skipValue(depth: depth + 1) else { return false }
                skipWhitespaceInValue()
                guard pos < end else { return false }
                if bytes[pos] == UInt8(ascii: ",") {
                    pos += 1
                    skipWhitespaceInValue()
                    continue
                }
                guard bytes[pos] == UInt8(ascii: "]") else { return false }
                pos += 1
                return true
            }
        case UInt8(ascii: "\""):
            guard let string = scanString() else { return false }
            if !string.canonical { canonical = false }
            return true
        case UInt8(ascii: "t"):
            return skipLiteral("true")
        case UInt8(ascii: "f"):
            return skipLiteral("false")
        case UInt8(ascii: "n"):
            return skipLiteral("null")
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            guard let number = scanNumber() else { return false }
            if !number.canonical { canonical = false }
            return true
        default:
            return false
        }
    }

    mutating func skipLiteral(_ literal: StaticString) -> Bool {
        let count = literal.utf8CodeUnitCount
        guard end - pos >= count else { return false }
        let text = literal.utf8Start
        for index in 0..<count where bytes[pos + index] != text[index] { return false }
        pos += count
        return true
    }

    struct ScannedString {
        /// The text between the quotes.
        var start: Int
        var end: Int
        /// Whether it holds a backslash escape.
        var escaped: Bool
        /// Whether it holds a byte above 0x7F.
        var nonASCII: Bool
        /// Whether the serializer writes its value exactly so.
        var canonical: Bool
    }

    /// A string literal at `pos` (its opening quote): the grammar, UTF-8
    /// and escapes checked as the parser does, except that a `\u` escape of
    /// a surrogate is only non-canonical (`JSON.parse` checks the pair).
    mutating func scanString() -> ScannedString? {
        pos += 1
        var string = ScannedString(start: pos, end: pos, escaped: false, nonASCII: false, canonical: true)
        while pos < end {
            // Plain ASCII text (the usual case), in a local (kept in a register).
            var offset = pos
            while offset < end {
                let byte = bytes[offset]
                guard byte &- 0x20 < 0x60, byte != UInt8(ascii: "\""), byte != UInt8(ascii: "\\") else { break }
                offset += 1
            }
            pos = offset
            guard pos < end else { return nil }
            let byte = bytes[pos]
            if byte == UInt8(ascii: "\"") {
                string.end = pos
                pos += 1
                return string
            }
            if byte == UInt8(ascii: "\\") {
                string.escaped = true
                pos += 1
                guard pos < end else { return nil }
                let code = bytes[pos]
                pos += 1
                switch code {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "b"), UInt8(ascii: "f"),
                     UInt8(ascii: "n"), UInt8(ascii: "r"), UInt8(ascii: "t"):
                    break
                case UInt8(ascii: "/"):
                    string.canonical = false
                case UInt8(ascii: "u"):
                    guard end - pos >= 4 else { return nil }
                    var value: UInt32 = 0
                    var lowercase = true
                    for _ in 0..<4 {
                        let digit = bytes[pos]
                        switch digit {
                        case UInt8(ascii: "0")...UInt8(ascii: "9"): value = value << 4 | UInt32(digit - UInt8(ascii: "0"))
                        case UInt8(ascii: "a")...UInt8(ascii: "f"): value = value << 4 | UInt32(digit - UInt8(ascii: "a") + 10)
                        case UInt8(ascii: "A")...UInt8(ascii: "F"):
                            value = value << 4 | UInt32(digit - UInt8(ascii: "A") + 10)
                            lowercase = false
                        default: return nil
                        }
                        pos += 1
                    }
                    // The serializer writes \u00XX only for the controls without a short escape.
                    switch value {
                    case 0x08, 0x09, 0x0A, 0x0C, 0x0D: string.canonical = false
                    case 0..<0x20: if !lowercase { string.canonical = false }
                    default: string.canonical = false
                    }
                default:
                    return nil
                }
            } else if byte < 0x20 {
                return nil
            } else if byte < 0x80 {
                pos += 1
            } else {
                string.nonASCII = true
                guard skipMultibyte() else { return nil }
            }
        }
        return nil
    }

    /// One well-formed multi-byte UTF-8 sequence at `pos` (as the parser's
    /// `validateMultibyte`).
    @inline(__always)
    mutating func skipMultibyte() -> Bool {
        let lead = bytes[pos]
        let count: Int
        var low: UInt8 = 0x80
        var high: UInt8 = 0xBF
        switch lead {
        case 0xC2...0xDF: count = 2
        case 0xE0: count = 3; low = 0xA0
        case 0xE1...0xEC, 0xEE...0xEF: count = 3
        case 0xED: count = 3; high = 0x9F
        case 0xF0: count = 4; low = 0x90
        case 0xF1...0xF3: count = 4
        case 0xF4: count = 4; high = 0x8F
        default: return false
        }
        guard end - pos >= count else { return false }
        let second = bytes[pos + 1]
        guard second >= low, second <= high else { return false }
        var offset = pos + 2
        while offset < pos + count {
            guard bytes[offset] & 0xC0 == 0x80 else { return false }
            offset += 1
        }
        pos += count
        return true
    }

    @inline(__always)
    func isDigit(_ offset: Int) -> Bool {
        offset < end && bytes[offset] &- UInt8(ascii: "0") < 10
    }

    /// A number at `pos`, its grammar checked as the parser does. `value` is
    /// set for an integer without fraction or exponent that fits `Int64`
    /// (what the parser makes `.int`); canonical: such an integer as the
    /// serializer prints it (no `-0`). Other numbers are left to `JSON.parse`
    /// (range) as non-canonical.
    mutating func scanNumber() -> (value: Int64?, canonical: Bool)? {
        let negative = bytes[pos] == UInt8(ascii: "-")
        if negative { pos += 1 }
        guard isDigit(pos) else { return nil }
        let intStart = pos
        if bytes[pos] == UInt8(ascii: "0") {
            pos += 1
            if isDigit(pos) { return nil }
        } else {
            while isDigit(pos) { pos += 1 }
        }
        let intEnd = pos
        var integral = true
        if pos < end, bytes[pos] == UInt8(ascii: ".") {
            integral = false
            pos += 1
            guard isDigit(pos) else { return nil }
            while isDigit(pos) { pos += 1 }
        }
        if pos < end, bytes[pos] | 0x20 == UInt8(ascii: "e") {
            integral = false
            pos += 1
            if pos < end, bytes[pos] == UInt8(ascii: "+") || bytes[pos] == UInt8(ascii: "-") { pos += 1 }
            guard isDigit(pos) else { return nil }
            while isDigit(pos) { pos += 1 }
        }
        guard integral else { return (nil, false) }
        if intEnd - intStart <= 18 {
            // Fits Int64 whatever the digits: no overflow checks.
            var magnitude: Int64 = 0
            for offset in intStart..<intEnd {
                magnitude = magnitude &* 10 &+ Int64(bytes[offset] &- UInt8(ascii: "0"))
            }
            return negative ? (-magnitude, magnitude != 0) : (magnitude, true)
        }
        // Accumulate negatively so Int64.min is reachable (as the parser).
        var value: Int64 = 0
        for offset in intStart..<intEnd {
            let digit = Int64(bytes[offset] &- UInt8(ascii: "0"))
            let (times10, o1) = value.multipliedReportingOverflow(by: 10)
            let (next, o2) = times10.subtractingReportingOverflow(digit)
            if o1 || o2 { return (nil, false) }
            value = next
        }
        if negative { return (value, value != 0) }
        let (positive, overflow) = Int64(0).subtractingReportingOverflow(value)
        return overflow ? (nil, false) : (positive, true)
    }

    /// A plain integer member (`seq`, `from`): what the full decoder reads
    /// as the same `Int64`; nil for anything else (left to it).
    mutating func scanInteger() -> Int64? {
        guard pos < end else { return nil }
        switch bytes[pos] {
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            return scanNumber()?.value
        default:
            return nil
        }
    }
}
