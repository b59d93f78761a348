import CLibWebSockets
import CRoomKitShims

/// A response body sent in pieces as they come, after a head without
/// `Content-Length` (Server-Sent Events, for one). Made by
/// `HTTPResponder.startStream`.
///
/// Loop thread only (asserted). Bytes wait in a buffer until lws says the
/// socket is writable; the buffer is bounded by `maxBufferedBytes`, and a
/// `send` that would exceed it drops the client, so a slow reader costs at
/// most that much memory and never blocks the loop.
///
/// A client that closes is noticed when a write to it fails (lws does not
/// read from an HTTP/1 connection while its answer is open), so a stream
/// that may stay quiet should send something now and then (an SSE comment).
public final class HTTPStream: @unchecked Sendable {
    // @unchecked Sendable: every field is loop-thread-only (asserted in the
    // public methods); Sendable so loop tasks can capture it.

    /// Why a stream ended.
    public enum CloseReason: String, Sendable {
        /// `finish()` was called and everything buffered was written.
        case finished
        /// The client closed the connection (or lws dropped it).
        case clientGone
        /// The client read too slowly: the buffer would have exceeded `maxBufferedBytes`.
        case overflow
    }

    /// The most bytes that may wait for the client.
    public let maxBufferedBytes: Int
    /// Called once, on the loop thread, when the stream has ended.
    public var onClose: ((CloseReason) -> Void)?
    /// Called on the loop thread each time a piece of the buffer was handed
    /// to the socket: a producer that paces itself (waits while
    /// `bufferedBytes` is above its window) resumes here, so a slow reader is
    /// slowed down instead of dropped.
    public var onWritten: (() -> Void)?
    /// False once the stream has ended or is ending (sends are then ignored).
    public private(set) var isOpen = true

    private let loop: EventLoop
    private let head: HTTPResponse
    /// The `Content-Length` sent in the head (-1: none; the body ends when
    /// the connection closes).
    private let contentLength: Int64
    /// Keeps the wsi's peer reachable while the stream writes.
    private weak var responder: HTTPResponder?
    private var headSent = false
    private var pending: [UInt8] = []
    private var pendingStart = 0
    private var finishing = false
    private var closeReason: CloseReason = .clientGone
    private var reported = false

    init(loop: EventLoop, head: HTTPResponse, contentLength: Int64, maxBufferedBytes: Int, responder: HTTPResponder) {
        self.loop = loop
        self.head = head
        self.contentLength = contentLength
        self.maxBufferedBytes = maxBufferedBytes
        self.responder = responder
    }

    /// Bytes queued and not yet handed to the socket.
    public var bufferedBytes: Int { pending.count - pendingStart }

    /// Queues `bytes` for the client. Returns false when the stream has
    /// ended, or when the bytes would overflow the buffer, in which case the
    /// client is dropped (`onClose(.overflow)` follows). Loop thread only.
    @discardableResult
    public func send(_ bytes: [UInt8]) -> Bool {
        loop.preconditionInEventLoop()
        guard isOpen, !finishing else { return false }
        if bufferedBytes + bytes.count > maxBufferedBytes {
            drop(.overflow)
            return false
        }
        pending.append(contentsOf: bytes)
        if let wsi = responder?.wsi { lws_callback_on_writable(wsi) }
        return true
    }

    /// Ends the stream once what is buffered has been written. Loop thread only.
    public func finish() {
        loop.preconditionInEventLoop()
        guard isOpen, !finishing else { return }
        finishing = true
        closeReason = .finished
        if let wsi = responder?.wsi { lws_callback_on_writable(wsi) } else { didClose() }
    }

    /// Closes the connection at once, discarding what is buffered.
    private func drop(_ reason: CloseReason) {
        isOpen = false
        closeReason = reason
        pending = []
        pendingStart = 0
        // Outside any lws callback, from the next loop turn (see roomkit_lws_close_now).
        loop.execute { [self] in
            if let wsi = responder?.wsi { roomkit_lws_close_now(wsi) } else { didClose() }
        }
    }

    /// Writes the head, then buffered bytes in chunks; -1 tells lws to close.
    func didBecomeWritable(_ wsi: OpaquePointer) -> Int32 {
        if !isOpen { return -1 }
        if !headSent {
            headSent = true
            guard HTTPResponder.writeHead(wsi, head, contentLength: contentLength) else { return -1 }
            // No idle timeout from here on: the stream is quiet between events.
            // (What lws_http_mark_sse does for HTTP/1, without its h2-only
            // complaint in lws 4.1.)
            lws_set_timeout(wsi, NO_PENDING_TIMEOUT, 0)
            if bufferedBytes > 0 || finishing { lws_callback_on_writable(wsi) }
            return 0
        }
        if bufferedBytes == 0 {
            return finishing ? -1 : 0
        }
        let chunk = min(65536, bufferedBytes)
        let headroom = WebSocketFrame.headroom
        var buffer = [UInt8](repeating: 0, count: headroom + chunk)
        buffer.replaceSubrange(headroom..<(headroom + chunk), with: pending[pendingStart..<(pendingStart + chunk)])
        pendingStart += chunk
        if pendingStart == pending.count {
            pending.removeAll(keepingCapacity: pending.capacity <= 1 << 16)
            pendingStart = 0
        } else if pendingStart > 1 << 16 && pendingStart * 2 > pending.count {
            pending.removeFirst(pendingStart)
            pendingStart = 0
        }
        let written = buffer.withUnsafeMutableBufferPointer { pointer in
            lws_write(wsi, pointer.baseAddress! + headroom, chunk, LWS_WRITE_HTTP)
        }
        if written < 0 { return -1 }
        if bufferedBytes > 0 || finishing { lws_callback_on_writable(wsi) }
        onWritten?()
        return 0
    }

    /// The connection has closed; reports once.
    func didClose() {
        isOpen = false
        pending = []
        pendingStart = 0
        guard !reported else { return }
        reported = true
        let handler = onClose
        onClose = nil
        onWritten = nil
        handler?(closeReason)
    }
}
