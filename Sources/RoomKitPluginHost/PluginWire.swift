import CRoomKitPluginWire
import Foundation

/// Builds one frame of the plugin wire (docs/PLUGIN-WIRE.md section 2): a
/// 4-byte little-endian length, a type byte, then integers and
/// length-prefixed strings. Plain value type, any thread.
struct WireFrame {
    private(set) var bytes: [UInt8]

    init(_ type: UInt8, capacity: Int = 64) {
        bytes = []
        bytes.reserveCapacity(capacity)
        bytes.append(contentsOf: [0, 0, 0, 0, type])
    }

    mutating func u8(_ value: UInt8) { bytes.append(value) }
    mutating func u16(_ value: UInt16) { withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) } }
    mutating func u32(_ value: UInt32) { withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) } }
    mutating func i32(_ value: Int32) { u32(UInt32(bitPattern: value)) }
    mutating func u64(_ value: UInt64) { withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) } }

    /// A string, or the NULL marker for nil.
    mutating func string(_ text: String?) {
        guard var text else { return u32(ROOMKIT_WIRE_NULL) }
        text.withUTF8 { utf8 in
            u32(UInt32(utf8.count))
            bytes.append(contentsOf: utf8)
        }
    }

    /// Raw bytes as a string (nil: NULL).
    mutating func raw(_ data: [UInt8]?) {
        guard let data else { return u32(ROOMKIT_WIRE_NULL) }
        u32(UInt32(data.count))
        bytes.append(contentsOf: data)
    }

    /// The finished frame, its length written in.
    var finished: [UInt8] {
        var copy = bytes
        let length = UInt32(copy.count - 4).littleEndian
        withUnsafeBytes(of: length) { for i in 0..<4 { copy[i] = $0[i] } }
        return copy
    }
}

/// Reads one frame's body; any shortfall marks it `bad` (an unparsable frame).
struct WireReader {
    private let bytes: UnsafeRawBufferPointer
    private var at: Int
    private(set) var bad = false

    /// `body` is the frame after its length and type.
    init(_ body: UnsafeRawBufferPointer) {
        bytes = body
        at = 0
    }

    private mutating func take(_ count: Int) -> UnsafeRawBufferPointer? {
        guard !bad, bytes.count - at >= count else {
            bad = true
            return nil
        }
        defer { at += count }
        return UnsafeRawBufferPointer(rebasing: bytes[at..<at + count])
    }

    mutating func u32() -> UInt32 {
        guard let slice = take(4) else { return 0 }
        return UInt32(littleEndian: slice.loadUnaligned(as: UInt32.self))
    }

    mutating func i32() -> Int32 { Int32(bitPattern: u32()) }

    mutating func u8() -> UInt8 {
        guard let slice = take(1) else { return 0 }
        return slice[0]
    }

    mutating func u16() -> UInt16 {
        guard let slice = take(2) else { return 0 }
        return UInt16(littleEndian: slice.loadUnaligned(as: UInt16.self))
    }

    mutating func u64() -> UInt64 {
        guard let slice = take(8) else { return 0 }
        return UInt64(littleEndian: slice.loadUnaligned(as: UInt64.self))
    }

    /// The string's bytes (nil for NULL or a short frame).
    mutating func raw() -> [UInt8]? {
        let count = u32()
        guard !bad, count != ROOMKIT_WIRE_NULL else { return nil }
        return take(Int(count)).map { Array($0) }
    }

    /// The string as UTF-8 (nil for NULL, a short frame, or invalid UTF-8).
    mutating func string() -> String? {
        raw().flatMap { String(validating: $0, as: UTF8.self) }
    }

    /// Whether every byte was read (trailing bytes make a frame unparsable).
    var complete: Bool { !bad && at == bytes.count }
}

/// One EVENTS record (PLUGIN-WIRE.md section 4): `u8 type, u64 seq, i64
/// number, str a, str b`, encoded once straight from the event's room and
/// payload bytes (one copy) and kept so that resending it after a crash
/// costs no work.
enum WireRecord {
    static let headerSize = 1 + 8 + 8 + 4 + 4

    /// How many bytes `write` writes for a record of these strings.
    static func length<Payload: Collection<UInt8>>(a: String?, b: Payload) -> Int {
        headerSize + (a?.utf8.count ?? 0) + b.count
    }

    /// One record written at the start of `out` (a journal chunk's free
    /// space: no array per record, and each field a single store or copy);
    /// returns how many bytes it wrote, `length(a:b:)`.
    static func write<Payload: Collection<UInt8>>(_ type: roomkit_wire_record, seq: UInt64, number: Int64,
                                                  a: String?, b: Payload, into out: UnsafeMutableRawBufferPointer) -> Int {
        out.storeBytes(of: UInt8(type.rawValue), toByteOffset: 0, as: UInt8.self)
        out.storeBytes(of: seq.littleEndian, toByteOffset: 1, as: UInt64.self)
        out.storeBytes(of: UInt64(bitPattern: number).littleEndian, toByteOffset: 9, as: UInt64.self)
        var at = 17
        if let a {
            at = writeString(a.utf8, at: at, into: out)
        } else {
            out.storeBytes(of: ROOMKIT_WIRE_NULL.littleEndian, toByteOffset: at, as: UInt32.self)
            at += 4
        }
        return writeString(b, at: at, into: out)
    }

    /// A `str` field (u32 length, then the bytes) at `at`; returns the offset after it.
    @inline(__always)
    private static func writeString<Bytes: Collection<UInt8>>(_ bytes: Bytes, at: Int, into out: UnsafeMutableRawBufferPointer) -> Int {
        let count = bytes.count
        out.storeBytes(of: UInt32(count).littleEndian, toByteOffset: at, as: UInt32.self)
        let field = UnsafeMutableRawBufferPointer(rebasing: out[at + 4..<at + 4 + count])
        if bytes.withContiguousStorageIfAvailable({ field.copyMemory(from: UnsafeRawBufferPointer($0)) }) == nil {
            var offset = 0
            for byte in bytes {
                field[offset] = byte
                offset += 1
            }
        }
        return at + 4 + count
    }
}
