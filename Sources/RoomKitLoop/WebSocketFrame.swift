import CRoomKitShims

/// One outbound WebSocket message, encoded once and sendable on any number
/// of server-side connections (fan-out without re-encoding or copying).
///
/// The bytes sit behind the `LWS_PRE` headroom that libwebsockets writes the
/// frame header into. The payload itself is never modified, so a frame may
/// be queued on many connections at once. Client-side sends (which lws masks
/// in place) copy the payload into a scratch buffer first.
public final class WebSocketFrame: @unchecked Sendable {
    // @unchecked Sendable: the payload is immutable after init; the headroom
    // is scratch space written by lws on the loop thread only.

    /// Headroom libwebsockets needs in front of every payload.
    static let headroom = roomkit_lws_pre()

    let storage: UnsafeMutableRawPointer
    /// Payload length in bytes.
    public let count: Int
    /// Whether this is a binary (not a text) message.
    public let isBinary: Bool

    /// A frame holding `bytes` (for a text frame they must be UTF-8).
    public init(bytes: some Collection<UInt8>, isBinary: Bool = false) {
        count = bytes.count
        self.isBinary = isBinary
        storage = UnsafeMutableRawPointer.allocate(byteCount: Self.headroom + max(count, 1), alignment: 16)
        let payload = UnsafeMutableRawBufferPointer(start: storage + Self.headroom, count: count)
        // One memcpy for contiguous bytes (arrays, every caller today): the
        // generic element-by-element copy was ~13% of a client's login CPU.
        let copied: Void? = bytes.withContiguousStorageIfAvailable { source in
            payload.copyMemory(from: UnsafeRawBufferPointer(source))
        }
        if copied == nil { _ = payload.initializeMemory(as: UInt8.self, from: bytes) }
    }

    /// A frame of `count` bytes written once by `fill` (joined frames,
    /// WebSocketFrame+Joined.swift: no intermediate array).
    init(count: Int, isBinary: Bool, fill: (UnsafeMutableRawBufferPointer) -> Void) {
        self.count = count
        self.isBinary = isBinary
        storage = UnsafeMutableRawPointer.allocate(byteCount: Self.headroom + max(count, 1), alignment: 16)
        fill(UnsafeMutableRawBufferPointer(start: storage + Self.headroom, count: count))
    }

    /// A text frame holding `text` as UTF-8.
    public convenience init(text: String) {
        var text = text
        let bytes = text.withUTF8 { Array($0) }
        self.init(bytes: bytes, isBinary: false)
    }

    /// The payload (valid while the frame lives).
    var payload: UnsafeMutableRawPointer { storage + Self.headroom }

    /// A copy of the payload bytes.
    public var bytes: [UInt8] {
        Array(UnsafeRawBufferPointer(start: payload, count: count))
    }

    deinit {
        storage.deallocate()
    }
}

/// One received WebSocket message, reassembled from all its fragments.
public struct WebSocketMessage: Sendable {
    /// The payload.
    public let bytes: [UInt8]
    /// Whether it arrived as a binary (not a text) message.
    public let isBinary: Bool

    public init(bytes: [UInt8], isBinary: Bool) {
        self.bytes = bytes
        self.isBinary = isBinary
    }

    /// The payload as a String when it is valid UTF-8.
    public var text: String? {
        String(validating: bytes, as: UTF8.self)
    }
}

/// Why a connection could not be made or ended abnormally.
public struct WebSocketError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The failure's kind.
    public enum Kind: String, Hashable, Sendable {
        /// The URL was not a ws:// or wss:// URL.
        case invalidURL
        /// TCP connect failed (refused, unreachable, DNS).
        case connectFailed
        /// The connection did not open within the connect timeout.
        case timedOut
        /// The server answered the upgrade with something other than 101,
        /// or without the requested subprotocol.
        case handshakeFailed
        /// The peer or the network dropped the connection without a close frame.
        case aborted
        /// The transport is shut down.
        case shutdown
    }

    /// The failure's kind.
    public let kind: Kind
    /// What libwebsockets or the transport said.
    public let detail: String

    public init(_ kind: Kind, _ detail: String) {
        self.kind = kind
        self.detail = detail
    }

    public var description: String { "\(kind.rawValue): \(detail)" }
}

/// How a connection ended, reported once through `webSocket(_:didCloseWith:)`.
public enum WebSocketCloseEvent: Sendable, Hashable {
    /// A client connection never opened.
    case failedToConnect(WebSocketError)
    /// A close handshake: `initiatedByPeer` tells who sent the first close frame.
    case closed(code: UInt16, reason: String, initiatedByPeer: Bool)
    /// The connection dropped without a close handshake (close code 1006).
    case aborted(WebSocketError)

    /// The close code the application should consider (1006 when there was none).
    public var code: UInt16 {
        switch self {
        case .closed(let code, _, _): return code
        case .failedToConnect, .aborted: return 1006
        }
    }

    /// One word for how it ended, for logs and metric labels:
    /// `connect_failed`, `closed_by_peer`, `closed` (by this side) or `aborted`.
    public var kind: String {
        switch self {
        case .failedToConnect: return "connect_failed"
        case .closed(_, _, let byPeer): return byPeer ? "closed_by_peer" : "closed"
        case .aborted: return "aborted"
        }
    }
}

extension WebSocketCloseEvent: CustomStringConvertible {
    /// In words, for people: `closed by the peer with 1001 (going away)`,
    /// `connection failed: connect: ECONNREFUSED`, `aborted: …`.
    public var description: String {
        switch self {
        case .failedToConnect(let error): return "connection failed: \(error)"
        case .closed(let code, let reason, let byPeer):
            let who = byPeer ? "closed by the peer" : "closed"
            return reason.isEmpty ? "\(who) with \(code)" : "\(who) with \(code) (\(reason))"
        case .aborted(let error): return "aborted: \(error)"
        }
    }
}

/// Receives a connection's events, on the loop thread. All methods have
/// default no-op implementations.
public protocol WebSocketDelegate: AnyObject {
    /// The connection is open (client: upgrade accepted; server: accepted).
    func webSocketDidOpen(_ connection: WebSocketConnection)
    /// A whole message arrived.
    func webSocket(_ connection: WebSocketConnection, didReceive message: WebSocketMessage)
    /// Every queued byte has been handed to the kernel.
    func webSocketDidDrain(_ connection: WebSocketConnection)
    /// The connection ended; the last event it delivers.
    func webSocket(_ connection: WebSocketConnection, didCloseWith event: WebSocketCloseEvent)
}

extension WebSocketDelegate {
    public func webSocketDidOpen(_ connection: WebSocketConnection) {}
    public func webSocket(_ connection: WebSocketConnection, didReceive message: WebSocketMessage) {}
    public func webSocketDidDrain(_ connection: WebSocketConnection) {}
    public func webSocket(_ connection: WebSocketConnection, didCloseWith event: WebSocketCloseEvent) {}
}
