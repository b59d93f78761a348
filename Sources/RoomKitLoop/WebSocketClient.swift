import CLibWebSockets
import CRoomKitShims
import Foundation
import Logging

/// Settings for outgoing WebSocket connections.
public struct WebSocketClientConfiguration: Sendable, Hashable {
    /// How long a connection may take to open (TCP, TLS and upgrade).
    public var connectTimeout: Duration = .seconds(10)
    /// Largest message accepted from the server; larger closes with 1009.
    public var maxMessageBytes = 16 << 20
    /// PEM file of certificate authorities to trust for `wss://` (default: the system's).
    public var tlsCAFile: String?
    /// Accept a self-signed server certificate (development only).
    public var allowSelfSigned = false
    /// Skip the check that the certificate names the host (development only).
    public var skipHostnameCheck = false
    /// For `wss://`: the name the server's certificate must carry, sent as
    /// SNI and in the `Host` header, when it differs from the URL's host
    /// (a private CA's certificate for `roomd.internal` reached by IP
    /// address). Nil: the URL's host.
    public var tlsServerName: String?

    public init() {}
}

/// A parsed `ws://` or `wss://` URL.
public struct WebSocketURL: Sendable, Hashable, CustomStringConvertible {
    /// Whether the URL is `wss://`.
    public let secure: Bool
    /// Host name or address.
    public let host: String
    /// Port (default 80 or 443).
    public let port: Int
    /// Path including any query (default `/`).
    public let path: String

    /// Parses `string`; throws `.invalidURL` naming what is wrong.
    public init(_ string: String) throws(WebSocketError) {
        guard let components = URLComponents(string: string), let scheme = components.scheme?.lowercased() else {
            throw WebSocketError(.invalidURL, "not a URL: \(string)")
        }
        guard scheme == "ws" || scheme == "wss" else {
            throw WebSocketError(.invalidURL, "scheme must be ws or wss: \(string)")
        }
        guard let host = components.host, !host.isEmpty else {
            throw WebSocketError(.invalidURL, "missing host: \(string)")
        }
        secure = scheme == "wss"
        self.host = host
        port = components.port ?? (secure ? 443 : 80)
        var path = components.percentEncodedPath.isEmpty ? "/" : components.percentEncodedPath
        if let query = components.percentEncodedQuery { path += "?" + query }
        self.path = path
    }

    public var description: String { "\(secure ? "wss" : "ws")://\(host):\(port)\(path)" }
}

/// Opens outgoing WebSocket connections on the event loop, all through one
/// libwebsockets client context.
///
/// Loop thread only. `shutdown()` (or the loop's shutdown) closes every
/// connection it made.
public final class WebSocketClient: LWSCallbackTarget, @unchecked Sendable {
    // @unchecked Sendable: loop thread only (asserted); Sendable so loop
    // tasks may capture it.

    /// The loop the connections run on.
    public let loop: EventLoop
    /// The settings every connection uses.
    public let configuration: WebSocketClientConfiguration
    private let logger: Logger
    private var context: LWSContext?
    /// Set for `shared(on:configuration:)` clients, which live as long as their loop.
    var isShared = false
    /// Connect-time C strings, alive until the connect call returns.
    private var connecting: WebSocketConnection?

    /// Creates the client's lws context. Loop thread only.
    public init(loop: EventLoop, configuration: WebSocketClientConfiguration = .init(),
                logger: Logger? = nil) throws(LoopError) {
        loop.preconditionInEventLoop()
        self.loop = loop
        self.configuration = configuration
        self.logger = logger ?? loop.logger
        context = try LWSContext(loop: loop, target: self, options: .init(
            options: roomkit_lws_options_client(),
            protocols: [.init(name: "roomkit-client", rxBufferSize: 65536)],
            tlsCAFile: configuration.tlsCAFile,
            clientTLS: .trustStore,
            // 64 KiB per read instead of lws's 4 KiB: under a burst of pushes
            // one loop turn takes in ~16x more messages, so the per-read and
            // per-turn costs (recv, the plugins' batch hop and wake-up) are
            // shared by that many more events.
            serviceBufferSize: 64 << 10))
    }

    /// Number of connections that are open or opening.
    public var connectionCount: Int { context?.peerCount ?? 0 }

    /// Starts connecting to `url` offering `subprotocol`. Loop thread only.
    ///
    /// Every outcome arrives through `delegate`, never from inside this call:
    /// `webSocketDidOpen`, or `webSocket(_:didCloseWith: .failedToConnect(...))`
    /// with `.connectFailed`, `.handshakeFailed` or `.timedOut`.
    public func connect(to url: WebSocketURL, subprotocol: String?,
                        delegate: any WebSocketDelegate) -> WebSocketConnection {
        loop.preconditionInEventLoop()
        let connection = WebSocketConnection(loop: loop, isClient: true, path: url.path,
                                             maxMessageBytes: configuration.maxMessageBytes)
        connection.delegate = delegate
        connection.remoteAddress = "\(url.host):\(url.port)"
        guard let context, let lwsContext = context.context else {
            fail(connection, WebSocketError(.shutdown, "the WebSocket client is shut down"))
            return connection
        }
        connection.owner = context
        context.retain(connection)

        var flags: Int32 = 0
        if url.secure {
            flags |= Int32(LCCSCF_USE_SSL.rawValue)
            if configuration.allowSelfSigned { flags |= Int32(LCCSCF_ALLOW_SELFSIGNED.rawValue) }
            if configuration.skipHostnameCheck { flags |= Int32(LCCSCF_SKIP_SERVER_CERT_HOSTNAME_CHECK.rawValue) }
        }
        // lws takes SNI and the certificate name check from `host`, and the
        // TCP peer from `address`.
        let serverName = url.secure ? configuration.tlsServerName ?? url.host : url.host
        let wsi: OpaquePointer? = url.host.withCString { address in
            serverName.withCString { host in
                url.path.withCString { path in
                    func connect(offering proto: UnsafePointer<CChar>?) -> OpaquePointer? {
                        var info = clientConnectInfo(context: lwsContext, address: address, port: url.port, path: path,
                                                     host: host, ssl: flags, peer: connection)
                        info.origin = host
                        info.protocol = proto
                        connecting = connection
                        defer { connecting = nil }
                        return lws_client_connect_via_info(&info)
                    }
                    guard let subprotocol else { return connect(offering: nil) }
                    return subprotocol.withCString { connect(offering: $0) }
                }
            }
        }
        if let wsi {
            connection.wsi = wsi
            do {
                // Strong, not weak: a weak reference gives the connection a
                // side table, and then every retain and release of it (a few
                // per received message) takes the runtime's slow path. The
                // cycle through `connectTimer` ends when the connection opens
                // or finishes (both cancel the timer and drop it).
                connection.connectTimer = try loop.scheduleTimer(after: configuration.connectTimeout) { [connection] _ in
                    guard connection.state == .connecting else { return }
                    connection.abort(WebSocketError(.timedOut, "no connection to \(url) within \(self.configuration.connectTimeout)"))
                }
            } catch {
                connection.abort(WebSocketError(.shutdown, "\(error)"))
            }
        } else if connection.state != .closed {
            let error = connection.pendingFailure ?? WebSocketError(.connectFailed, "could not start connecting to \(url)")
            fail(connection, error)
        }
        return connection
    }

    /// Reports a connect failure on the next loop turn (never re-entrantly).
    private func fail(_ connection: WebSocketConnection, _ error: WebSocketError) {
        connection.pendingFailure = error
        loop.execute { connection.finish(.failedToConnect(error)) }
    }

    /// Closes every connection and the client's lws context. Idempotent.
    /// Loop thread only.
    public func shutdown() {
        loop.preconditionInEventLoop()
        guard !isShared, let context else { return }
        self.context = nil
        // Never destroy a context from inside its own callback.
        loop.execute { context.destroy() }
    }

    func lwsCallback(wsi: OpaquePointer, reason: lws_callback_reasons, peer: LWSPeer?,
                     input: UnsafeMutableRawPointer?, length: Int) -> Int32 {
        guard let connection = peer as? WebSocketConnection else {
            return lws_callback_http_dummy(wsi, reason, nil, input, length)
        }
        switch reason {
        case LWS_CALLBACK_CLIENT_ESTABLISHED:
            connection.wsi = wsi
            connection.didOpen()
            return 0
        case LWS_CALLBACK_CLIENT_RECEIVE:
            return connection.didReceive(input, length)
        case LWS_CALLBACK_CLIENT_WRITEABLE:
            return connection.didBecomeWritable()
        case LWS_CALLBACK_WS_PEER_INITIATED_CLOSE:
            connection.didReceivePeerClose(input, length)
            return 0
        case LWS_CALLBACK_CLIENT_CONNECTION_ERROR:
            let text = input.map { String(cString: $0.assumingMemoryBound(to: CChar.self)) } ?? "connection error"
            let error = connection.pendingFailure ?? Self.upgradeRefused(wsi, connection, text) ?? Self.classify(text)
            if connection === connecting {
                connection.pendingFailure = error
                connection.state = .closed
                loop.execute { connection.finish(.failedToConnect(error)) }
                context?.detach(connection)
            } else {
                connection.finish(.failedToConnect(error))
            }
            return 0
        case LWS_CALLBACK_CLIENT_CLOSED:
            connection.didClose()
            return 0
        case LWS_CALLBACK_WSI_DESTROY:
            if connection.state != .closed { connection.didClose() }
            return 0
        default:
            return lws_callback_http_dummy(wsi, reason, nil, input, length)
        }
    }

    /// The server answered the upgrade with an HTTP status other than 101
    /// (a wrong port or path: lws only logs "got bad HTTP response '400'",
    /// naming no URL): a `.handshakeFailed` naming the address, path and
    /// status. Nil when no response was read. The response headers are
    /// still attached while lws reports the connection error.
    static func upgradeRefused(_ wsi: OpaquePointer, _ connection: WebSocketConnection, _ text: String) -> WebSocketError? {
        var status = Int(lws_http_client_http_response(wsi))
        if status == 0 {
            var buffer = [CChar](repeating: 0, count: 64)
            if lws_hdr_copy(wsi, &buffer, Int32(buffer.count), WSI_TOKEN_HTTP) > 0 {
                let line = buffer.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
                status = Int(line.prefix(3)) ?? 0
            }
        }
        guard status != 0, status != 101 else { return nil }
        return WebSocketError(.handshakeFailed, "\(connection.remoteAddress.isEmpty ? "the server" : connection.remoteAddress) answered the WebSocket upgrade of "
                              + "\(connection.path) with HTTP \(status), not 101 (wrong port or path?): \(text)")
    }

    /// Maps lws's connection-error text to a typed error, keeping the text.
    static func classify(_ text: String) -> WebSocketError {
        let lower = text.lowercased()
        if lower.contains("hs:") || lower.contains("upgrade") || lower.contains("101")
            || lower.contains("protocol") || lower.contains("accept") {
            return WebSocketError(.handshakeFailed, text)
        }
        return WebSocketError(.connectFailed, text)
    }
}

