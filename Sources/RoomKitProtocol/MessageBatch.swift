// Batched messages, a room.v1 extension (docs/PROTOCOL.md, Part 2,
// "Batched messages"): a client whose `hello` carried `"batch":true`, and
// whose hello reply confirmed it, may receive several server messages in
// one WebSocket text message, joined by a line feed. This file is the
// grammar's one definition, for roomd (which joins) and clients (which
// split).
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The grammar of a batched WebSocket message:
///
///     batch     = message *( LF message )
///     message   = one Part 1 server message: a compact JSON object with no LF byte
///     LF        = %x0A
///
/// A batch of one message is exactly today's single message, so a client
/// that asked for batching reads every message of the connection (after the
/// hello reply) as a batch. Pure; no I/O.
public enum MessageBatch {
    /// The byte between two messages of a batch (U+000A). A compact JSON
    /// text never holds it: a line feed inside a string is escaped (`\n`),
    /// and compact JSON has no whitespace between tokens.
    public static let separator: UInt8 = 0x0A

    /// Calls `body` with each message of the batch `bytes`, in order, as a
    /// slice of `bytes` (no copy). Empty elements (two separators in a row,
    /// or one at either end) are passed on as they are, so the decoder
    /// reports them as malformed rather than the split hiding them.
    public static func forEachMessage(in bytes: [UInt8], _ body: (ArraySlice<UInt8>) -> Void) {
        var start = 0
        let end = bytes.count
        while true {
            let next = bytes.withUnsafeBufferPointer { buffer -> Int in
                guard start < end, let base = buffer.baseAddress,
                      let found = memchr(base + start, Int32(separator), end - start) else { return end }
                return base.distance(to: found.assumingMemoryBound(to: UInt8.self))
            }
            body(bytes[start..<next])
            guard next < end else { return }
            start = next + 1
        }
    }

    /// How many messages the batch `bytes` holds (one more than its
    /// separators), without reading them.
    public static func count(in bytes: [UInt8]) -> Int {
        var count = 0
        forEachMessage(in: bytes) { _ in count += 1 }
        return count
    }
}
