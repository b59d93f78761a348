// Compact JSON serialization into a byte buffer.

extension JSON {
    /// The compact UTF-8 serialization of this value (no insignificant whitespace).
    ///
    /// - Strings escape `"`, `\` and every control character below U+0020
    ///   (`\b \f \n \r \t` by name, the rest as `\u00XX`); all other text,
    ///   including non-ASCII, is written as raw UTF-8.
    /// - ``int(_:)`` prints as a plain integer.
    /// - ``double(_:)`` prints the shortest text that parses back to the same
    ///   `Double` (Swift's `description`): integral values keep a fraction or
    ///   an exponent (`2.0`, `1e+20`, `-0.0`), so a serialized double always
    ///   parses back as ``double(_:)`` and an int as ``int(_:)``. NaN and
    ///   infinities, which JSON cannot express, print as `null`.
    /// - Parameter sortedKeys: order object members by the UTF-8 bytes of
    ///   their keys, for deterministic output (tokens, tests, logs);
    ///   otherwise the dictionary's order is used.
    public func serialized(sortedKeys: Bool = false) -> [UInt8] {
        var buffer: [UInt8] = []
        buffer.reserveCapacity(256)
        serialize(into: &buffer, sortedKeys: sortedKeys)
        return buffer
    }

    /// Appends the compact serialization of this value to `buffer`, so a
    /// caller can reuse one buffer for many messages.
    /// See ``serialized(sortedKeys:)`` for the format.
    public func serialize(into buffer: inout [UInt8], sortedKeys: Bool = false) {
        switch self {
        case .null:
            JSONWriter.appendASCII("null", to: &buffer)
        case .bool(let value):
            JSONWriter.appendASCII(value ? "true" : "false", to: &buffer)
        case .int(let value):
            JSONWriter.appendInteger(value, to: &buffer)
        case .double(let value):
            if value.isFinite {
                buffer.append(contentsOf: value.description.utf8)
            } else {
                JSONWriter.appendASCII("null", to: &buffer)
            }
        case .string(let value):
            JSONWriter.appendString(value, to: &buffer)
        case .array(let elements):
            buffer.append(UInt8(ascii: "["))
            var first = true
            for element in elements {
                if !first { buffer.append(UInt8(ascii: ",")) }
                first = false
                element.serialize(into: &buffer, sortedKeys: sortedKeys)
            }
            buffer.append(UInt8(ascii: "]"))
        case .object(let members):
            buffer.append(UInt8(ascii: "{"))
            var first = true
            if sortedKeys {
                let keys = members.keys.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
                for key in keys {
                    if !first { buffer.append(UInt8(ascii: ",")) }
                    first = false
                    JSONWriter.appendString(key, to: &buffer)
                    buffer.append(UInt8(ascii: ":"))
                    members[key, default: .null].serialize(into: &buffer, sortedKeys: true)
                }
            } else {
                for (key, value) in members {
                    if !first { buffer.append(UInt8(ascii: ",")) }
                    first = false
                    JSONWriter.appendString(key, to: &buffer)
                    buffer.append(UInt8(ascii: ":"))
                    value.serialize(into: &buffer, sortedKeys: false)
                }
            }
            buffer.append(UInt8(ascii: "}"))
        }
    }

    /// The compact serialization as a `String` (unsorted keys).
    public var jsonString: String {
        String(decoding: serialized(), as: UTF8.self)
    }
}

/// Low-level appenders shared by the serializer.
enum JSONWriter {
    private static let hexDigits: [UInt8] = Array("0123456789abcdef".utf8)

    @inline(__always)
    static func appendASCII(_ text: StaticString, to buffer: inout [UInt8]) {
        JSON.appendLiteral(text, to: &buffer)
    }

    static func appendInteger(_ value: Int64, to buffer: inout [UInt8]) {
        if value < 0 { buffer.append(UInt8(ascii: "-")) }
        var magnitude = value.magnitude
        if magnitude < 10 {
            buffer.append(UInt8(ascii: "0") + UInt8(truncatingIfNeeded: magnitude))
            return
        }
        // 20 digits hold UInt64.max.
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 20) { digits in
            var index = 20
            while magnitude > 0 {
                index -= 1
                digits[index] = UInt8(ascii: "0") + UInt8(truncatingIfNeeded: magnitude % 10)
                magnitude /= 10
            }
            buffer.append(contentsOf: UnsafeBufferPointer(rebasing: digits[index..<20]))
        }
    }

    static func appendString(_ string: String, to buffer: inout [UInt8]) {
        buffer.append(UInt8(ascii: "\""))
        var text = string
        text.withUTF8 { utf8 in
            var runStart = 0
            for index in 0..<utf8.count {
                let byte = utf8[index]
                guard byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") else {
                    continue
                }
                if runStart < index {
                    buffer.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[runStart..<index]))
                }
                runStart = index + 1
                buffer.append(UInt8(ascii: "\\"))
                switch byte {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"): buffer.append(byte)
                case 0x08: buffer.append(UInt8(ascii: "b"))
                case 0x0C: buffer.append(UInt8(ascii: "f"))
                case 0x0A: buffer.append(UInt8(ascii: "n"))
                case 0x0D: buffer.append(UInt8(ascii: "r"))
                case 0x09: buffer.append(UInt8(ascii: "t"))
                default:
                    buffer.append(contentsOf: [
                        UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0"),
                        hexDigits[Int(byte >> 4)], hexDigits[Int(byte & 0x0F)],
                    ])
                }
            }
            if runStart < utf8.count {
                buffer.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[runStart..<utf8.count]))
            }
        }
        buffer.append(UInt8(ascii: "\""))
    }
}

extension JSON {
    /// Appends literal JSON text (a key, punctuation, `null`) as it is: for
    /// writers that emit a message without building a tree of `JSON` values
    /// (the login reply, the bot's stored snapshot).
    /// Inlinable: the event log's and the magix path's writers call it per field.
    @inlinable
    public static func appendLiteral(_ text: StaticString, to buffer: inout [UInt8]) {
        buffer.append(contentsOf: UnsafeBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
    }

    /// Appends `string` as a JSON string, escaped as ``serialize(into:sortedKeys:)`` does.
    public static func append(string: String, to buffer: inout [UInt8]) {
        JSONWriter.appendString(string, to: &buffer)
    }

    /// Appends `value` as a JSON integer.
    public static func append(integer value: Int64, to buffer: inout [UInt8]) {
        JSONWriter.appendInteger(value, to: &buffer)
    }
}
