// A strict RFC 8259 parser. Iterative (an explicit container stack, no
// recursion), so no input and no depth limit can overflow the call stack.

/// Why `JSON.parse(_:maxDepth:)` rejected its input.
public struct JSONParseError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The class of a parse failure.
    public enum Reason: String, Hashable, Sendable {
        /// The input ended inside a value (or was empty).
        case unexpectedEnd = "unexpected end of input"
        /// A byte that cannot start or continue a value here.
        case unexpectedByte = "unexpected byte"
        /// A number that breaks the grammar (leading zero, missing digits, ...).
        case invalidNumber = "invalid number"
        /// A well-formed number too large for a finite `Double`.
        case numberOutOfRange = "number out of range"
        /// A backslash escape that JSON does not define, or bad `\u` hex digits.
        case invalidEscape = "invalid escape"
        /// A `\u` escape of a UTF-16 surrogate without its other half.
        case loneSurrogate = "lone surrogate"
        /// A byte below 0x20 inside a string; such characters must be escaped.
        case controlCharacter = "unescaped control character"
        /// A string holding bytes that are not well-formed UTF-8.
        case invalidUTF8 = "invalid UTF-8"
        /// More containers open at once than the depth limit allows.
        case tooDeep = "nesting too deep"
        /// An object that names the same key twice.
        case duplicateKey = "duplicate key"
        /// Non-whitespace bytes after the top-level value.
        case trailingData = "trailing data"
    }

    /// The offset in bytes from the start of the input where the problem was found.
    public let offset: Int
    /// What was wrong.
    public let reason: Reason

    /// Creates an error at `offset` for `reason`.
    public init(offset: Int, reason: Reason) {
        self.offset = offset
        self.reason = reason
    }

    /// "invalid number at byte 12".
    public var description: String {
        "\(reason.rawValue) at byte \(offset)"
    }
}

extension JSON {
    /// The default limit on nested containers for the `parse` functions.
    public static let defaultMaxDepth = 256

    /// Parses one JSON text (RFC 8259) from UTF-8 bytes.
    ///
    /// Strict: leading/trailing whitespace is allowed, anything else after
    /// the value is ``JSONParseError/Reason/trailingData``; no BOM, no
    /// comments, no NaN/Infinity, no leading zeros, no unescaped control
    /// characters, well-formed UTF-8 only, no lone surrogates, and an object
    /// may not repeat a key. Integers without fraction or exponent that fit
    /// `Int64` become ``int(_:)``, other numbers ``double(_:)``; a number
    /// whose magnitude overflows `Double` is an error.
    ///
    /// - Parameter maxDepth: the most arrays/objects that may be open at
    ///   once; deeper input fails with ``JSONParseError/Reason/tooDeep``.
    ///   The parser itself does not recurse, so no input can overflow its
    ///   stack; but comparing, hashing, serializing and destroying a value
    ///   recurse once per level, so keep the limit in the hundreds for
    ///   untrusted input.
    public static func parse(
        _ bytes: some Collection<UInt8>, maxDepth: Int = defaultMaxDepth
    ) throws(JSONParseError) -> JSON {
        let fast = bytes.withContiguousStorageIfAvailable { buffer in
            parseResult(buffer, maxDepth: maxDepth)
        }
        if let fast {
            return try fast.get()
        }
        let copy = Array(bytes)
        return try copy.withUnsafeBufferPointer { parseResult($0, maxDepth: maxDepth) }.get()
    }

    /// Parses one JSON text from raw memory holding UTF-8 bytes (no copy).
    public static func parse(
        _ buffer: UnsafeRawBufferPointer, maxDepth: Int = defaultMaxDepth
    ) throws(JSONParseError) -> JSON {
        try buffer.withMemoryRebound(to: UInt8.self) { parseResult($0, maxDepth: maxDepth) }.get()
    }

    /// Parses one JSON text from a string's UTF-8 form.
    public static func parse(
        _ string: String, maxDepth: Int = defaultMaxDepth
    ) throws(JSONParseError) -> JSON {
        try parse(string.utf8, maxDepth: maxDepth)
    }

    private static func parseResult(
        _ buffer: UnsafeBufferPointer<UInt8>, maxDepth: Int
    ) -> Result<JSON, JSONParseError> {
        var parser = JSONParser(bytes: buffer, maxDepth: maxDepth)
        do {
            return .success(try parser.parseDocument())
        } catch {
            return .failure(error)
        }
    }
}

/// The parser's state over one contiguous input buffer.
struct JSONParser {
    let bytes: UnsafeBufferPointer<UInt8>
    let end: Int
    let maxDepth: Int
    var pos = 0
    /// Reused for strings that contain escapes.
    var scratch: [UInt8] = []

    init(bytes: UnsafeBufferPointer<UInt8>, maxDepth: Int) {
        self.bytes = bytes
        self.end = bytes.count
        self.maxDepth = maxDepth
    }

    func fail(_ reason: JSONParseError.Reason, at offset: Int? = nil) -> JSONParseError {
        JSONParseError(offset: offset ?? pos, reason: reason)
    }

    @inline(__always)
    mutating func skipWhitespace() {
        while pos < end {
            switch bytes[pos] {
            case 0x20, 0x09, 0x0A, 0x0D:
                pos += 1
            default:
                return
            }
        }
    }

    /// Parses the whole input as one value.
    ///
    /// Open containers live on flat stacks: the elements of every open array
    /// on `elements`, the members of every open object on `members`, and
    /// where each container starts in `starts`. A container becomes a value
    /// when it closes; an object's dictionary is built then, at its final
    /// size, hashing each key once (which is also when repeated keys show).
    mutating func parseDocument() throws(JSONParseError) -> JSON {
        var kinds: [Bool] = []  // per open container: true = object
        var starts: [Int] = []  // per open container: first index in elements/members
        var elements: [JSON] = []
        var members: [PendingMember] = []
        var keys: [(key: String, offset: Int)] = []  // per open object: key awaiting its value
        var value: JSON

        nextValue: while true {
            skipWhitespace()
            guard pos < end else { throw fail(.unexpectedEnd) }
            switch bytes[pos] {
            case UInt8(ascii: "{"):
                guard kinds.count < maxDepth else { throw fail(.tooDeep) }
                pos += 1
                skipWhitespace()
                if pos < end, bytes[pos] == UInt8(ascii: "}") {
                    pos += 1
                    value = .object([:])
                } else {
                    keys.append(try parseKey())
                    kinds.append(true)
                    starts.append(members.count)
                    continue nextValue
                }
            case UInt8(ascii: "["):
                guard kinds.count < maxDepth else { throw fail(.tooDeep) }
                pos += 1
                skipWhitespace()
                if pos < end, bytes[pos] == UInt8(ascii: "]") {
                    pos += 1
                    value = .array([])
                } else {
                    kinds.append(false)
                    starts.append(elements.count)
                    continue nextValue
                }
            case UInt8(ascii: "\""):
                value = .string(try parseString())
            case UInt8(ascii: "t"):
                try expectLiteral("true")
                value = .bool(true)
            case UInt8(ascii: "f"):
                try expectLiteral("false")
                value = .bool(false)
            case UInt8(ascii: "n"):
                try expectLiteral("null")
                value = .null
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
                value = try parseNumber()
            default:
                throw fail(.unexpectedByte)
            }

            // Hand the finished value to its container, closing containers
            // as long as their closing bracket follows.
            while let isObject = kinds.last {
                skipWhitespace()
                guard pos < end else { throw fail(.unexpectedEnd) }
                let byte = bytes[pos]
                if isObject {
                    let pending = keys.removeLast()
                    members.append(PendingMember(key: pending.key, offset: pending.offset, value: value))
                    if byte == UInt8(ascii: ",") {
                        pos += 1
                        skipWhitespace()
                        keys.append(try parseKey())
                        continue nextValue
                    }
                    guard byte == UInt8(ascii: "}") else { throw fail(.unexpectedByte) }
                    pos += 1
                    value = .object(try closeObject(&members, from: starts.removeLast()))
                } else {
                    elements.append(value)
                    if byte == UInt8(ascii: ",") {
                        pos += 1
                        continue nextValue
                    }
                    guard byte == UInt8(ascii: "]") else { throw fail(.unexpectedByte) }
                    pos += 1
                    let start = starts.removeLast()
                    value = .array(Array(elements[start...]))
                    elements.removeSubrange(start...)
                }
                kinds.removeLast()
            }
            skipWhitespace()
            guard pos == end else { throw fail(.trailingData) }
            return value
        }
    }

    /// An object member waiting for its object to close.
    struct PendingMember {
        var key: String
        var offset: Int
        var value: JSON
    }

    /// Builds the dictionary of the object whose members start at `start`
    /// and pops them; a repeated key fails at the repeat's offset.
    func closeObject(_ members: inout [PendingMember], from start: Int) throws(JSONParseError) -> [String: JSON] {
        var object = [String: JSON](minimumCapacity: members.count - start)
        for index in start..<members.count {
            let member = members[index]
            if object.updateValue(member.value, forKey: member.key) != nil {
                throw fail(.duplicateKey, at: member.offset)
            }
        }
        members.removeSubrange(start...)
        return object
    }

    /// Parses `"key"` and the `:` after it; returns the key and its offset.
    mutating func parseKey() throws(JSONParseError) -> (key: String, offset: Int) {
        guard pos < end else { throw fail(.unexpectedEnd) }
        guard bytes[pos] == UInt8(ascii: "\"") else { throw fail(.unexpectedByte) }
        let offset = pos
        let key = try parseString()
        skipWhitespace()
        guard pos < end else { throw fail(.unexpectedEnd) }
        guard bytes[pos] == UInt8(ascii: ":") else { throw fail(.unexpectedByte) }
        pos += 1
        return (key, offset)
    }

    mutating func expectLiteral(_ literal: StaticString) throws(JSONParseError) {
        let count = literal.utf8CodeUnitCount
        let text = literal.utf8Start
        for index in 0..<count {
            guard pos < end else { throw fail(.unexpectedEnd) }
            guard bytes[pos] == text[index] else { throw fail(.unexpectedByte) }
            pos += 1
        }
    }
}

// MARK: - Numbers

/// Exact powers of ten for the fast double path (all representable).
private let exactPowersOfTen: [Double] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
    1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
]

extension JSONParser {
    @inline(__always)
    func isDigit(_ offset: Int) -> Bool {
        offset < end && bytes[offset] &- UInt8(ascii: "0") < 10
    }

    mutating func parseNumber() throws(JSONParseError) -> JSON {
        let start = pos
        let negative = bytes[pos] == UInt8(ascii: "-")
        if negative { pos += 1 }
        guard isDigit(pos) else { throw fail(pos < end ? .invalidNumber : .unexpectedEnd) }
        let intStart = pos
        if bytes[pos] == UInt8(ascii: "0") {
            pos += 1
            if isDigit(pos) { throw fail(.invalidNumber) }
        } else {
            while isDigit(pos) { pos += 1 }
        }
        let intEnd = pos
        var fracStart = pos
        var fracEnd = pos
        if pos < end, bytes[pos] == UInt8(ascii: ".") {
            pos += 1
            guard isDigit(pos) else { throw fail(pos < end ? .invalidNumber : .unexpectedEnd) }
            fracStart = pos
            while isDigit(pos) { pos += 1 }
            fracEnd = pos
        }
        var exponent = 0
        var hasExponent = false
        if pos < end, bytes[pos] | 0x20 == UInt8(ascii: "e") {
            hasExponent = true
            pos += 1
            var exponentNegative = false
            if pos < end, bytes[pos] == UInt8(ascii: "+") || bytes[pos] == UInt8(ascii: "-") {
                exponentNegative = bytes[pos] == UInt8(ascii: "-")
                pos += 1
            }
            guard isDigit(pos) else { throw fail(pos < end ? .invalidNumber : .unexpectedEnd) }
            while isDigit(pos) {
                // Saturate: anything this large is out of range (or zero) anyway.
                if exponent < 100_000 {
                    exponent = exponent &* 10 &+ Int(bytes[pos] &- UInt8(ascii: "0"))
                }
                pos += 1
            }
            if exponentNegative { exponent = -exponent }
        }

        if fracStart == fracEnd, !hasExponent, let value = integerValue(intStart, intEnd, negative) {
            return .int(value)
        }
        if let value = fastDouble(intStart, intEnd, fracStart, fracEnd, exponent, negative) {
            return .double(value)
        }
        let text = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<pos]), as: UTF8.self)
        guard let value = Double(text), value.isFinite else {
            throw fail(.numberOutOfRange, at: start)
        }
        return .double(value)
    }

    /// The digits in `start..<end` as an Int64, or nil if they overflow.
    func integerValue(_ start: Int, _ stop: Int, _ negative: Bool) -> Int64? {
        // Accumulate negatively so Int64.min is reachable.
        var value: Int64 = 0
        for offset in start..<stop {
            let digit = Int64(bytes[offset] &- UInt8(ascii: "0"))
            let (times10, o1) = value.multipliedReportingOverflow(by: 10)
            let (next, o2) = times10.subtractingReportingOverflow(digit)
            if o1 || o2 { return nil }
            value = next
        }
        if negative { return value }
        let (positive, overflow) = Int64(0).subtractingReportingOverflow(value)
        return overflow ? nil : positive
    }

    /// Clinger's fast path: exact when the significand fits 2^53 and the
    /// decimal exponent is within the exactly representable powers of ten.
    func fastDouble(
        _ intStart: Int, _ intEnd: Int, _ fracStart: Int, _ fracEnd: Int,
        _ exponent: Int, _ negative: Bool
    ) -> Double? {
        var significand: UInt64 = 0
        var significantDigits = 0
        for range in [intStart..<intEnd, fracStart..<fracEnd] {
            for offset in range {
                let digit = UInt64(bytes[offset] &- UInt8(ascii: "0"))
                if significand == 0, digit == 0 { continue }
                significantDigits += 1
                if significantDigits > 16 { return nil }
                significand = significand &* 10 &+ digit
            }
        }
        guard significand <= 1 << 53 else { return nil }
        let decimalExponent = exponent - (fracEnd - fracStart)
        var value = Double(significand)
        if significand == 0 {
            value = 0
        } else if decimalExponent >= 0, decimalExponent < exactPowersOfTen.count {
            value *= exactPowersOfTen[decimalExponent]
        } else if decimalExponent < 0, -decimalExponent < exactPowersOfTen.count {
            value /= exactPowersOfTen[-decimalExponent]
        } else {
            return nil
        }
        return negative ? -value : value
    }
}
