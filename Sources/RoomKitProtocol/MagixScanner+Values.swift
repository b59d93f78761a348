// The byte-level half of the magix scanner (MagixPushScan.swift): one JSON
// value at a time (objects, arrays, strings, numbers, literals), checking
// as much as it needs to say whether the text is canonical (`JSONText`) and
// declining whatever it does not check, for `JSON.parse` to decide.

extension MagixScanner {
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
                    if keyCount > firstKey, !precedes(keys[2 * keyCount - 2]..<keys[2 * keyCount - 1], key.start, key.end) {
                        sorted = false
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

    /// Whether the key at `range` comes strictly before the one at
    /// `start..<stop` in byte order (`serialize(sortedKeys: true)`'s order).
    @inline(__always)
    func precedes(_ range: Range<Int>, _ start: Int, _ stop: Int) -> Bool {
        var left = range.lowerBound
        var right = start
        while left < range.upperBound && right < stop {
            if bytes[left] != bytes[right] { return bytes[left] < bytes[right] }
            left += 1
            right += 1
        }
        return left == range.upperBound && right < stop
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
