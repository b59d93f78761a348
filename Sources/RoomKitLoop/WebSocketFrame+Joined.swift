extension WebSocketFrame {
    /// One text message holding the payloads of `frames`, in order, with
    /// `separator` between two of them: what a server that batches
    /// messages (docs/PROTOCOL.md "Batched messages") sends as one
    /// WebSocket message. libwebsockets still frames it; only the payload
    /// is joined. One allocation and one copy of each payload.
    public convenience init(joining frames: some Collection<WebSocketFrame>, separator: UInt8) {
        let total = frames.reduce(0) { $0 + $1.count } + max(0, frames.count - 1)
        self.init(count: total, isBinary: false) { buffer in
            var offset = 0
            for (index, frame) in frames.enumerated() {
                if index > 0 {
                    buffer[offset] = separator
                    offset += 1
                }
                if frame.count > 0 {
                    (buffer.baseAddress! + offset).copyMemory(from: frame.payload, byteCount: frame.count)
                }
                offset += frame.count
            }
        }
    }

    /// Calls `body` with the payload bytes (valid only inside `body`; no copy).
    public func withUnsafeBytes<Result>(_ body: (UnsafeRawBufferPointer) throws -> Result) rethrows -> Result {
        try body(UnsafeRawBufferPointer(start: payload, count: count))
    }
}
