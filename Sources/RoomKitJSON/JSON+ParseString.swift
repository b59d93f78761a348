// String literals for the JSON parser: UTF-8 validation and escapes.

extension JSONParser {
    /// Parses a string literal starting at the opening quote at `pos`.
    /// Strings without escapes are decoded straight from the input.
    mutating func parseString() throws(JSONParseError) -> String {
        pos += 1  // opening quote
        var runStart = pos
        var usedScratch = false
        while true {
            guard pos < end else { throw fail(.unexpectedEnd) }
            let byte = bytes[pos]
            if byte == UInt8(ascii: "\"") {
                let run = UnsafeBufferPointer(rebasing: bytes[runStart..<pos])
                pos += 1
                if !usedScratch {
                    return String(decoding: run, as: UTF8.self)
                }
                scratch.append(contentsOf: run)
                return String(decoding: scratch, as: UTF8.self)
            }
            if byte == UInt8(ascii: "\\") {
                if !usedScratch {
                    usedScratch = true
                    scratch.removeAll(keepingCapacity: true)
                }
                scratch.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[runStart..<pos]))
                try parseEscape()
                runStart = pos
            } else if byte < 0x20 {
                throw fail(.controlCharacter)
            } else if byte < 0x80 {
                pos += 1
            } else {
                try validateMultibyte()
            }
        }
    }

    /// Validates one multi-byte UTF-8 sequence at `pos` (Unicode table 3-7:
    /// no overlong forms, no surrogates, nothing above U+10FFFF).
    @inline(__always)
    mutating func validateMultibyte() throws(JSONParseError) {
        let lead = bytes[pos]
        let count: Int
        var low: UInt8 = 0x80
        var high: UInt8 = 0xBF
        switch lead {
        case 0xC2...0xDF:
            count = 2
        case 0xE0:
            count = 3
            low = 0xA0
        case 0xE1...0xEC, 0xEE...0xEF:
            count = 3
        case 0xED:
            count = 3
            high = 0x9F
        case 0xF0:
            count = 4
            low = 0x90
        case 0xF1...0xF3:
            count = 4
        case 0xF4:
            count = 4
            high = 0x8F
        default:
            throw fail(.invalidUTF8)
        }
        guard end - pos >= count else { throw fail(.invalidUTF8) }
        let second = bytes[pos + 1]
        guard second >= low, second <= high else { throw fail(.invalidUTF8) }
        var offset = pos + 2
        while offset < pos + count {
            guard bytes[offset] & 0xC0 == 0x80 else { throw fail(.invalidUTF8) }
            offset += 1
        }
        pos += count
    }

    /// Decodes the escape at `pos` (a backslash) into `scratch`.
    mutating func parseEscape() throws(JSONParseError) {
        let escapeStart = pos
        pos += 1
        guard pos < end else { throw fail(.unexpectedEnd) }
        let code = bytes[pos]
        pos += 1
        let simple: UInt8
        switch code {
        case UInt8(ascii: "\""): simple = 0x22
        case UInt8(ascii: "\\"): simple = 0x5C
        case UInt8(ascii: "/"): simple = 0x2F
        case UInt8(ascii: "b"): simple = 0x08
        case UInt8(ascii: "f"): simple = 0x0C
        case UInt8(ascii: "n"): simple = 0x0A
        case UInt8(ascii: "r"): simple = 0x0D
        case UInt8(ascii: "t"): simple = 0x09
        case UInt8(ascii: "u"):
            try parseUnicodeEscape(escapeStart: escapeStart)
            return
        default:
            throw fail(.invalidEscape, at: escapeStart)
        }
        scratch.append(simple)
    }

    /// Decodes `\uXXXX` (and its low-surrogate partner) after the `u`.
    mutating func parseUnicodeEscape(escapeStart: Int) throws(JSONParseError) {
        let unit = try parseHex4(escapeStart: escapeStart)
        var scalar = UInt32(unit)
        if unit >= 0xDC00, unit <= 0xDFFF {
            throw fail(.loneSurrogate, at: escapeStart)
        }
        if unit >= 0xD800, unit <= 0xDBFF {
            guard end - pos >= 2, bytes[pos] == UInt8(ascii: "\\"), bytes[pos + 1] == UInt8(ascii: "u")
            else {
                throw fail(.loneSurrogate, at: escapeStart)
            }
            let lowStart = pos
            pos += 2
            let low = try parseHex4(escapeStart: lowStart)
            guard low >= 0xDC00, low <= 0xDFFF else {
                throw fail(.loneSurrogate, at: escapeStart)
            }
            scalar = 0x10000 + ((UInt32(unit) - 0xD800) << 10) + (UInt32(low) - 0xDC00)
        }
        appendUTF8(scalar)
    }

    mutating func parseHex4(escapeStart: Int) throws(JSONParseError) -> UInt16 {
        var value: UInt16 = 0
        for _ in 0..<4 {
            guard pos < end else { throw fail(.unexpectedEnd) }
            let byte = bytes[pos]
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: throw fail(.invalidEscape, at: escapeStart)
            }
            value = value << 4 | UInt16(digit)
            pos += 1
        }
        return value
    }

    mutating func appendUTF8(_ scalar: UInt32) {
        switch scalar {
        case 0..<0x80:
            scratch.append(UInt8(truncatingIfNeeded: scalar))
        case 0x80..<0x800:
            scratch.append(0xC0 | UInt8(truncatingIfNeeded: scalar >> 6))
            scratch.append(0x80 | UInt8(truncatingIfNeeded: scalar & 0x3F))
        case 0x800..<0x10000:
            scratch.append(0xE0 | UInt8(truncatingIfNeeded: scalar >> 12))
            scratch.append(0x80 | UInt8(truncatingIfNeeded: (scalar >> 6) & 0x3F))
            scratch.append(0x80 | UInt8(truncatingIfNeeded: scalar & 0x3F))
        default:
            scratch.append(0xF0 | UInt8(truncatingIfNeeded: scalar >> 18))
            scratch.append(0x80 | UInt8(truncatingIfNeeded: (scalar >> 12) & 0x3F))
            scratch.append(0x80 | UInt8(truncatingIfNeeded: (scalar >> 6) & 0x3F))
            scratch.append(0x80 | UInt8(truncatingIfNeeded: scalar & 0x3F))
        }
    }
}
