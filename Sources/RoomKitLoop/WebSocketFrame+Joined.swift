#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

extension WebSocketFrame {
    /// One text message holding the payloads of `frames`, in order, with
    /// `separator` between two of them: what a server that batches
    /// messages (docs/PROTOCOL.md "Batched messages") sends as one
    /// WebSocket message. libwebsockets still frames it; only the payload
    /// is joined. One allocation and one copy of each payload.
    ///
    /// A concrete slice, not a generic collection: called once per
    /// connection per loop turn from another module, where a generic
    /// iteration was unspecialised (metadata lookups per element).
    public convenience init(joining frames: ArraySlice<WebSocketFrame>, separator: UInt8) {
        var total = max(0, frames.count - 1)
        for index in frames.indices { total += frames[index].count }
        self.init(count: total, isBinary: false) { buffer in
            guard var cursor = buffer.baseAddress else { return }
            for index in frames.indices {
                if index > frames.startIndex {
                    cursor.storeBytes(of: separator, as: UInt8.self)
                    cursor += 1
                }
                let frame = frames[index]
                cursor.copyMemory(from: frame.payload, byteCount: frame.count)
                cursor += frame.count
            }
        }
    }

    /// Whether the payload holds `byte` (a `memchr`; no copy).
    public func contains(byte: UInt8) -> Bool {
        count > 0 && memchr(payload, Int32(byte), count) != nil
    }

    /// Calls `body` with the payload bytes (valid only inside `body`; no copy).
    public func withUnsafeBytes<Result>(_ body: (UnsafeRawBufferPointer) throws -> Result) rethrows -> Result {
        try body(UnsafeRawBufferPointer(start: payload, count: count))
    }
}
