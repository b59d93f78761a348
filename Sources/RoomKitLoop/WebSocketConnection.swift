import CLibWebSockets
import CRoomKitShims
import Synchronization

/// One WebSocket connection, client or server side, on the event loop.
///
/// Loop thread only, except `send`, `close` and `abort`, which hop to the
/// loop when called elsewhere. Outbound messages queue in order; the queue
/// is written whenever lws reports the socket writable, and `bufferedAmount`
/// counts the bytes not yet handed to the kernel (for back-pressure).
public final class WebSocketConnection: TransportPeer, @unchecked Sendable {
    // @unchecked Sendable: state is loop-thread-only; the cross-thread
    // methods hop to the loop before touching it.

    /// Connection lifecycle.
    public enum State: Sendable, Hashable {
        case connecting, open, closing, closed
    }

    /// The loop this connection runs on.
    public let loop: EventLoop
    /// Whether this is the client side.
    public let isClient: Bool
    /// A process-unique identifier (for logs and maps).
    public let id: UInt64
    /// The request path (server side) or the connected URL's path (client side).
    public let path: String
    /// The remote peer's address, when known.
    public internal(set) var remoteAddress: String = ""
    /// Current state. Loop thread only.
    public internal(set) var state: State = .connecting
    /// The delegate, held strongly until the close event has been delivered.
    public var delegate: (any WebSocketDelegate)?
    /// Bytes queued and not yet written to the socket. Loop thread only.
    public private(set) var bufferedAmount = 0
    /// Largest message accepted; a larger one closes the connection with 1009.
    public let maxMessageBytes: Int

    weak var owner: LWSContext?
    private var outbound: [WebSocketFrame] = []
    private var outboundHead = 0
    // The receive state: loop thread only, each access a plain statement
    // (none spans a call that could reach back here), so without the
    // run-time exclusivity check it paid on every frame.
    @exclusivity(unchecked) private var receiving: [UInt8] = []
    @exclusivity(unchecked) private var receivingBinary = false
    @exclusivity(unchecked) private var discardingOversize = false
    private var closeRequest: (code: UInt16, reason: String)?
    private var peerClose: (code: UInt16, reason: String)?
    private var scratch: UnsafeMutableRawPointer?
    private var scratchCapacity = 0
    private var reported = false
    private var closeFrameQueued = false
    /// Set when the transport decided why it is going away (timeout, oversize).
    var pendingFailure: WebSocketError?
    var connectTimer: LoopTimer?

    private static let nextID = Atomic<UInt64>(0)

    init(loop: EventLoop, isClient: Bool, path: String, maxMessageBytes: Int) {
        self.loop = loop
        self.isClient = isClient
        self.path = path
        self.maxMessageBytes = maxMessageBytes
        self.id = Self.nextID.add(1, ordering: .relaxed).newValue
    }

    deinit {
        scratch?.deallocate()
    }

    // MARK: Sending

    /// Queues a text message. Returns false if the connection is not open.
    @discardableResult
    public func send(text: String) -> Bool {
        send(WebSocketFrame(text: text))
    }

    /// Queues `frame`; the same frame may be queued on many connections.
    /// Returns false if the connection is closing or closed (the frame is dropped).
    /// From another thread the frame is queued asynchronously and `true` is returned.
    @discardableResult
    public func send(_ frame: WebSocketFrame) -> Bool {
        guard loop.inEventLoop else {
            loop.execute { [self] in _ = send(frame) }
            return true
        }
        guard state == .open || state == .connecting, closeRequest == nil else { return false }
        let wasIdle = outboundHead == outbound.count
        outbound.append(frame)
        bufferedAmount += frame.count
        // A non-empty queue already has a writable callback coming (asked
        // for when it stopped being empty, or by a partial write), so one
        // request per burst, not per frame (fan-out queues many per turn).
        if wasIdle, state == .open, let wsi {
            lws_callback_on_writable(wsi)
        }
        return true
    }

    /// Sends the queued messages (or drops them when `discardQueued`), then a
    /// close frame with `code` and `reason`. Dropping is for peers that do not
    /// read: a graceful close would wait behind everything they left unread.
    public func close(code: UInt16 = 1000, reason: String = "", discardQueued: Bool = false) {
        guard loop.inEventLoop else {
            loop.execute { [self] in close(code: code, reason: reason, discardQueued: discardQueued) }
            return
        }
        guard state == .open || state == .connecting, closeRequest == nil else { return }
        if discardQueued {
            outbound.removeAll()
            outboundHead = 0
            bufferedAmount = 0
        }
        closeRequest = (code, String(reason.utf8.prefix(120)) ?? "")
        if state == .connecting {
            abort(WebSocketError(.aborted, "closed before the connection opened"))
            return
        }
        state = .closing
        if let wsi { lws_callback_on_writable(wsi) }
    }

    /// Drops the connection at once, without a close handshake (the peer
    /// sees an abnormal closure). Used for forced-drop tests and dead peers.
    public func abort() {
        guard loop.inEventLoop else {
            loop.execute { [self] in abort() }
            return
        }
        abort(WebSocketError(.aborted, "aborted locally"))
    }

    func abort(_ error: WebSocketError) {
        guard state != .closed else { return }
        if pendingFailure == nil { pendingFailure = error }
        if wsi != nil {
            // A connection that never opened stays `.connecting`, so its
            // close is reported as a failure to connect.
            if state == .open { state = .closing }
            closeOnNextTurn()
        } else {
            finish(.failedToConnect(error))
        }
    }

    // MARK: lws events (loop thread)

    func didOpen() {
        connectTimer?.cancel()
        connectTimer = nil
        guard state == .connecting else { return }
        state = .open
        delegate?.webSocketDidOpen(self)
        if outboundHead < outbound.count || closeRequest != nil, let wsi {
            lws_callback_on_writable(wsi)
        }
    }

    /// Sets or clears `TCP_CORK` on the connection's socket; false if it could not.
    private static func cork(_ wsi: OpaquePointer, _ on: Bool) -> Bool {
        let fd = lws_get_socket_fd(wsi)
        guard fd >= 0 else { return false }
        var value: Int32 = on ? 1 : 0
        return setsockopt(fd, Int32(IPPROTO_TCP), tcpCork, &value, socklen_t(MemoryLayout<Int32>.size)) == 0
    }

    /// `TCP_CORK` of <netinet/tcp.h> (Linux), which Swift's Glibc module does not export.
    private static let tcpCork: Int32 = 3
    /// The largest receive buffer kept for the next message (a bigger one,
    /// e.g. after a snapshot, is dropped rather than held for the connection's life).
    private static let reusedBufferLimit = 64 << 10

    /// Handles a chunk of an incoming message; returns -1 to make lws close.
    func didReceive(_ input: UnsafeMutableRawPointer?, _ length: Int) -> Int32 {
        guard let wsi else { return -1 }
        if receiving.isEmpty && !discardingOversize {
            receivingBinary = lws_frame_is_binary(wsi) != 0
        }
        let final = lws_is_final_fragment(wsi) != 0 && lws_remaining_packet_payload(wsi) == 0
        if !discardingOversize {
            if receiving.count + length > maxMessageBytes {
                discardingOversize = true
                receiving = []
                closeRequest = nil
                close(code: 1009, reason: "message too big")
            } else if let input, length > 0 {
                receiving.append(contentsOf: UnsafeRawBufferPointer(start: input, count: length))
            }
        }
        if final {
            if discardingOversize {
                discardingOversize = false
            } else {
                var bytes = receiving
                receiving = []
                if state == .open {
                    delegate?.webSocket(self, didReceive: WebSocketMessage(bytes: bytes, isBinary: receivingBinary))
                }
                // The next message reuses the buffer when nothing kept this
                // one (the usual case: no allocation per message); one kept
                // (or a large one) leaves it and the next starts a new one.
                if receiving.isEmpty, bytes.capacity <= Self.reusedBufferLimit {
                    bytes.removeAll(keepingCapacity: true)
                    receiving = bytes
                } else if receiving.isEmpty {
                    receiving.reserveCapacity(256)
                }
            }
        }
        return 0
    }

    /// Writes as much of the queue as the socket takes; returns -1 to close.
    ///
    /// Several queued frames go out corked (`TCP_CORK`): the kernel packs
    /// them into as few segments as fit instead of sending one per frame, and
    /// the last one leaves when the cork is pulled at the end. Between frames
    /// only `lws_partial_buffered` is checked (no syscall), as lws asks; a
    /// full socket makes the write partial, lws keeps the rest, and the queue
    /// waits for the next writable callback.
    func didBecomeWritable() -> Int32 {
        guard let wsi else { return -1 }
        let corked = outbound.count - outboundHead > 1 && Self.cork(wsi, true)
        defer { if corked { _ = Self.cork(wsi, false) } }
        while outboundHead < outbound.count {
            let frame = outbound[outboundHead]
            let protocolFlag = frame.isBinary ? LWS_WRITE_BINARY : LWS_WRITE_TEXT
            let pointer = isClient ? clientCopy(of: frame) : frame.payload
            let written = lws_write(wsi, pointer.assumingMemoryBound(to: UInt8.self), frame.count, protocolFlag)
            if written < 0 {
                return -1
            }
            outbound[outboundHead] = Self.emptyFrame
            outboundHead += 1
            bufferedAmount -= frame.count
            if outboundHead < outbound.count && lws_partial_buffered(wsi) != 0 {
                lws_callback_on_writable(wsi)
                return 0
            }
        }
        outbound.removeAll(keepingCapacity: outbound.count < 1024)
        outboundHead = 0
        if let request = closeRequest, !closeFrameQueued {
            closeFrameQueued = true
            var reason = Array(request.reason.utf8)
            reason.withUnsafeMutableBufferPointer { buffer in
                lws_close_reason(wsi, lws_close_status(rawValue: UInt32(request.code)),
                                 buffer.baseAddress, buffer.count)
            }
            closeOnNextTurn()
            return 0
        }
        delegate?.webSocketDidDrain(self)
        return 0
    }

    func didReceivePeerClose(_ input: UnsafeMutableRawPointer?, _ length: Int) {
        // The ack of a close we started is not a peer-initiated close.
        if closeRequest != nil { return }
        var code: UInt16 = 1005
        var reason = ""
        if let input, length >= 2 {
            let bytes = input.assumingMemoryBound(to: UInt8.self)
            code = UInt16(bytes[0]) << 8 | UInt16(bytes[1])
            if length > 2 {
                reason = String(decoding: UnsafeRawBufferPointer(start: input + 2, count: length - 2), as: UTF8.self)
            }
        }
        peerClose = (code, reason)
        state = .closing
    }

    /// lws closed the wsi; deliver the one close event.
    func didClose() {
        if let peerClose {
            finish(.closed(code: peerClose.code, reason: peerClose.reason, initiatedByPeer: true))
        } else if let closeRequest, pendingFailure == nil {
            finish(.closed(code: closeRequest.code, reason: closeRequest.reason, initiatedByPeer: false))
        } else if state == .connecting {
            finish(.failedToConnect(pendingFailure ?? WebSocketError(.connectFailed, "closed before the connection opened")))
        } else {
            finish(.aborted(pendingFailure ?? WebSocketError(.aborted, "connection dropped without a close frame")))
        }
    }

    func finish(_ event: WebSocketCloseEvent) {
        connectTimer?.cancel()
        connectTimer = nil
        state = .closed
        outbound.removeAll()
        outboundHead = 0
        bufferedAmount = 0
        owner?.detach(self)
        guard !reported else { return }
        reported = true
        let delegate = self.delegate
        self.delegate = nil
        delegate?.webSocket(self, didCloseWith: event)
    }

    /// Closes the wsi from the next loop turn, outside any lws callback (see
    /// `roomkit_lws_close_now`): with a prepared reason lws sends the close
    /// frame and awaits the ack; without one it drops the socket.
    private func closeOnNextTurn() {
        loop.execute { [self] in
            guard let wsi, state != .closed else { return }
            roomkit_lws_close_now(wsi)
        }
    }

    private func clientCopy(of frame: WebSocketFrame) -> UnsafeMutableRawPointer {
        let needed = WebSocketFrame.headroom + max(frame.count, 1)
        if scratchCapacity < needed {
            scratch?.deallocate()
            scratchCapacity = max(needed, 4096)
            scratch = UnsafeMutableRawPointer.allocate(byteCount: scratchCapacity, alignment: 16)
        }
        let payload = scratch! + WebSocketFrame.headroom
        payload.copyMemory(from: frame.payload, byteCount: frame.count)
        return payload
    }

    private static let emptyFrame = WebSocketFrame(bytes: [])
}
