import CLibWebSockets
import CRoomKitShims
import Foundation
import Logging

/// Settings for a `WebServer` listener.
public struct WebServerConfiguration: Sendable {
    /// Address to bind (default loopback).
    public var host = "127.0.0.1"
    /// Port to bind; 0 picks a free one (read it back from `WebServer.port`).
    public var port = 0
    /// PEM certificate and key files; both set means the listener speaks TLS.
    public var tlsCertificateFile: String?
    public var tlsKeyFile: String?
    /// The path that accepts WebSocket upgrades (nil: HTTP only).
    public var webSocketPath: String? = "/v1/rooms"
    /// The subprotocol a client must offer; an upgrade without it gets HTTP 400.
    public var subprotocol = "room.v1"
    /// Largest WebSocket message accepted; larger closes the connection with 1009.
    public var maxMessageBytes = 1 << 20
    /// Largest HTTP request body accepted; larger is answered 413.
    public var maxRequestBodyBytes = 1 << 20
    /// Most WebSocket connections open at once; an upgrade beyond it is
    /// refused with HTTP 503. Plain HTTP requests are not counted.
    public var maxConnections = 10_000
    /// Most WebSocket connections open at once from one remote address
    /// (as `WebSocketConnection.remoteAddress` spells it); beyond it: HTTP 503.
    public var maxConnectionsPerAddress = 1_000

    public init() {}
}

/// Receives a `WebServer`'s connections and requests, on the loop thread.
public protocol WebServerDelegate: AnyObject {
    /// A WebSocket upgrade on the configured path and subprotocol succeeded.
    /// Set `connection.delegate` here to receive its messages.
    func webServer(_ server: WebServer, didAccept connection: WebSocketConnection)
    /// An HTTP request arrived with its whole body. Answer through
    /// `responder`, now or later, exactly once.
    func webServer(_ server: WebServer, didReceive request: HTTPRequest, responder: HTTPResponder)
}

/// One listening port serving WebSocket upgrades on one path and plain HTTP
/// on every other path, over TCP or TLS, on the event loop.
///
/// Loop thread only. Parsing and framing are libwebsockets'; this class
/// routes its callbacks to the delegate.
public final class WebServer: LWSCallbackTarget, @unchecked Sendable {
    // @unchecked Sendable: loop thread only (asserted).

    /// The loop it serves on.
    public let loop: EventLoop
    /// Its settings.
    public let configuration: WebServerConfiguration
    /// Receives connections and requests. Held weakly.
    public weak var delegate: (any WebServerDelegate)?
    private let logger: Logger
    private var context: LWSContext?
    /// The bound port (useful with `port = 0`).
    public private(set) var port = 0
    /// Remote address of each open WebSocket connection, by connection ID. Loop thread only.
    private var openConnections: [UInt64: String] = [:]
    /// Open WebSocket connections per remote address. Loop thread only.
    private var openPerAddress: [String: Int] = [:]
    /// Upgrades refused because `maxConnections` was reached. Loop thread only.
    public private(set) var refusedAtConnectionLimit = 0
    /// Upgrades refused because `maxConnectionsPerAddress` was reached. Loop thread only.
    public private(set) var refusedAtAddressLimit = 0

    /// Binds and starts listening. Loop thread only. Throws when the
    /// address is in use or the TLS files cannot be loaded.
    public init(loop: EventLoop, configuration: WebServerConfiguration,
                delegate: (any WebServerDelegate)?, logger: Logger? = nil) throws(LoopError) {
        loop.preconditionInEventLoop()
        self.loop = loop
        self.configuration = configuration
        self.delegate = delegate
        self.logger = logger ?? loop.logger
        let tls = configuration.tlsCertificateFile != nil && configuration.tlsKeyFile != nil
        for file in [configuration.tlsCertificateFile, configuration.tlsKeyFile].compactMap({ $0 }) {
            guard FileManager.default.isReadableFile(atPath: file) else {
                throw LoopError(code: .lws, function: "WebServer.init", detail: "cannot read TLS file \(file)")
            }
        }
        // A name such as `localhost` is resolved here: libwebsockets would
        // take it for an interface name and crash (BindCheck.numericAddress).
        guard let address = BindCheck.numericAddress(host: configuration.host) else {
            throw LoopError(code: .lws, function: "WebServer.init", detail: "cannot resolve host '\(configuration.host)'")
        }
        var protocols: [LWSContext.ProtocolSpec] = [.init(name: "http", rxBufferSize: 0)]
        if configuration.webSocketPath != nil {
            protocols.append(.init(name: configuration.subprotocol, rxBufferSize: 65536))
        }
        let context = try LWSContext(loop: loop, target: self, options: .init(
            port: Int32(configuration.port),
            interface: address,
            options: roomkit_lws_options_server(tls ? 1 : 0),
            protocols: protocols,
            tlsCertificateFile: configuration.tlsCertificateFile,
            tlsKeyFile: configuration.tlsKeyFile,
            clientTLS: tls ? .unused : .none,
            serviceBufferSize: 256 << 10,
            fdLimit: WebServer.descriptorBudget()))
        self.context = context
        guard let lwsContext = context.context, let vhost = lws_get_vhost_by_name(lwsContext, "default") else {
            context.destroy()
            throw LoopError(code: .lws, function: "lws_get_vhost_by_name", detail: "no default vhost")
        }
        port = Int(lws_get_vhost_listen_port(vhost))
        if port <= 0 {
            context.destroy()
            throw LoopError(code: .lws, function: "lws_create_context",
                            detail: "could not listen on \(configuration.host):\(configuration.port)")
        }
    }

    /// How many sockets the listener's lws context may hold: the process's
    /// descriptor limit (RLIMIT_NOFILE) less what is open now and a reserve
    /// of 64 for what the process opens later (SQLite files, recording
    /// readers, plugin pipes). At that many lws stops accepting until a
    /// socket closes. Without it lws believes it may use the whole limit, so
    /// `accept` fails with EMFILE first, and lws retries it on every loop turn
    /// (issue 27: 203,973 "accept: errno 24" lines in 10 s).
    static func descriptorBudget() -> UInt32 {
        var limit = rlimit()
        guard getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit) == 0, limit.rlim_cur < rlim_t(1) << 40 else { return 0 }
        let open = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").count) ?? 0
        let budget = Int64(clamping: limit.rlim_cur) - Int64(open) - 64
        return UInt32(clamping: max(16, budget))
    }

    /// Number of live WebSocket connections and pending HTTP requests.
    public var peerCount: Int { context?.peerCount ?? 0 }

    /// Number of open WebSocket connections (what `maxConnections` counts). Loop thread only.
    public var connectionCount: Int { openConnections.count }

    /// Stops listening and drops every connection (after this loop turn).
    /// Idempotent. Loop thread only.
    public func stop() {
        loop.preconditionInEventLoop()
        guard let context else { return }
        self.context = nil
        loop.execute { context.destroy() }
    }

    func lwsCallback(wsi: OpaquePointer, reason: lws_callback_reasons, peer: LWSPeer?,
                     input: UnsafeMutableRawPointer?, length: Int) -> Int32 {
        switch reason {
        // MARK: WebSocket
        case LWS_CALLBACK_HTTP_CONFIRM_UPGRADE:
            return confirmUpgrade(wsi)
        case LWS_CALLBACK_ESTABLISHED:
            return accept(wsi)
        case LWS_CALLBACK_RECEIVE:
            return (peer as? WebSocketConnection)?.didReceive(input, length) ?? -1
        case LWS_CALLBACK_SERVER_WRITEABLE:
            return (peer as? WebSocketConnection)?.didBecomeWritable() ?? 0
        case LWS_CALLBACK_WS_PEER_INITIATED_CLOSE:
            (peer as? WebSocketConnection)?.didReceivePeerClose(input, length)
            return 0
        case LWS_CALLBACK_CLOSED:
            if let connection = peer as? WebSocketConnection {
                release(connection)
                connection.didClose()
            }
            return 0

        // MARK: HTTP
        case LWS_CALLBACK_HTTP:
            return beginRequest(wsi, input: input)
        case LWS_CALLBACK_HTTP_BODY:
            guard let responder = peer as? HTTPResponder else { return 0 }
            if responder.body.count + length > configuration.maxRequestBodyBytes {
                responder.bodyLimitExceeded = true
            } else if let input, length > 0 {
                responder.body.append(contentsOf: UnsafeRawBufferPointer(start: input, count: length))
            }
            return 0
        case LWS_CALLBACK_HTTP_BODY_COMPLETION:
            guard let responder = peer as? HTTPResponder else { return 0 }
            dispatch(responder)
            return 0
        case LWS_CALLBACK_HTTP_WRITEABLE:
            return (peer as? HTTPResponder)?.didBecomeWritable() ?? 0
        case LWS_CALLBACK_CLOSED_HTTP:
            (peer as? HTTPResponder)?.didClose()
            return 0
        case LWS_CALLBACK_WSI_DESTROY:
            if let connection = peer as? WebSocketConnection, connection.state != .closed {
                release(connection)
                connection.didClose()
            } else if let responder = peer as? HTTPResponder {
                responder.didClose()
            }
            return 0
        default:
            return lws_callback_http_dummy(wsi, reason, nil, input, length)
        }
    }

    /// Allows an upgrade only on the WebSocket path with our subprotocol
    /// (else HTTP 400), and only while the connection limits leave room
    /// (else HTTP 503: the client may retry later). Returning >0 says we answered.
    private func confirmUpgrade(_ wsi: OpaquePointer) -> Int32 {
        let path = header(wsi) { roomkit_lws_http_path(wsi, $0, $1) }
        let offered = header(wsi) { roomkit_lws_header(wsi, ROOMKIT_HEADER_WS_PROTOCOL, $0, $1) } ?? ""
        let protocols = offered.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
        let pathOK = configuration.webSocketPath != nil && path == configuration.webSocketPath
        guard pathOK && protocols.contains(configuration.subprotocol) else {
            let why = pathOK ? "the \(configuration.subprotocol) subprotocol is required" : "no WebSocket endpoint at this path"
            logger.debug("refused WebSocket upgrade", metadata: ["path": "\(path ?? "?")", "why": "\(why)"])
            _ = lws_return_http_status(wsi, 400, why)
            return 1
        }
        let address = peerAddress(wsi)
        let why: String
        if openConnections.count >= configuration.maxConnections {
            refusedAtConnectionLimit += 1
            why = "connection limit reached, try again later"
        } else if openPerAddress[address, default: 0] >= configuration.maxConnectionsPerAddress {
            refusedAtAddressLimit += 1
            why = "connection limit for this address reached, try again later"
        } else {
            return 0
        }
        logger.debug("refused WebSocket upgrade", metadata: ["peer": "\(address)", "why": "\(why)"])
        _ = lws_return_http_status(wsi, 503, why)
        return 1
    }

    /// The remote address of `wsi` without a reverse lookup ("" when unknown).
    private func peerAddress(_ wsi: OpaquePointer) -> String {
        var address = [CChar](repeating: 0, count: 128)
        guard lws_get_peer_simple(wsi, &address, address.count) != nil else { return "" }
        return address.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
    }

    /// Stops counting `connection` against the limits (idempotent).
    private func release(_ connection: WebSocketConnection) {
        guard let address = openConnections.removeValue(forKey: connection.id) else { return }
        let left = openPerAddress[address, default: 1] - 1
        openPerAddress[address] = left > 0 ? left : nil
    }

    private func accept(_ wsi: OpaquePointer) -> Int32 {
        guard let context else { return -1 }
        let path = header(wsi) { roomkit_lws_http_path(wsi, $0, $1) } ?? configuration.webSocketPath ?? "/"
        let connection = WebSocketConnection(loop: loop, isClient: false, path: path,
                                             maxMessageBytes: configuration.maxMessageBytes)
        connection.owner = context
        connection.remoteAddress = peerAddress(wsi)
        openConnections[connection.id] = connection.remoteAddress
        openPerAddress[connection.remoteAddress, default: 0] += 1
        context.attach(connection, to: wsi)
        if let delegate {
            delegate.webServer(self, didAccept: connection)
        }
        connection.didOpen()
        return 0
    }

    private func beginRequest(_ wsi: OpaquePointer, input: UnsafeMutableRawPointer?) -> Int32 {
        guard let context else { return -1 }
        let responder = HTTPResponder(loop: loop)
        responder.owner = context
        let method = roomkit_lws_http_method(wsi).map { String(cString: $0) } ?? "GET"
        let path = header(wsi) { roomkit_lws_http_path(wsi, $0, $1) }
            ?? input.map { String(cString: $0.assumingMemoryBound(to: CChar.self)) } ?? "/"
        let query = header(wsi, capacity: 8192) { roomkit_lws_http_query(wsi, $0, $1) } ?? ""
        var arguments: [String] = []
        while arguments.count < Self.maxQueryArguments,
              let argument = header(wsi, capacity: 8192, { roomkit_lws_http_query_argument(wsi, Int32(arguments.count), $0, $1) }) {
            arguments.append(argument)
        }
        responder.request = HTTPRequest(
            method: method, path: path, query: query, arguments: arguments,
            authorization: header(wsi) { roomkit_lws_header(wsi, ROOMKIT_HEADER_AUTHORIZATION, $0, $1) },
            contentType: header(wsi) { roomkit_lws_header(wsi, ROOMKIT_HEADER_CONTENT_TYPE, $0, $1) },
            host: header(wsi) { roomkit_lws_header(wsi, ROOMKIT_HEADER_HOST, $0, $1) },
            origin: header(wsi) { roomkit_lws_header(wsi, ROOMKIT_HEADER_ORIGIN, $0, $1) }, body: [])
        context.attach(responder, to: wsi)
        if method == "POST" || method == "PUT" {
            // The body follows in LWS_CALLBACK_HTTP_BODY; dispatch on completion.
            let length = header(wsi) { roomkit_lws_header(wsi, ROOMKIT_HEADER_CONTENT_LENGTH, $0, $1) }
            if length == nil || length == "0" {
                dispatch(responder)
            }
            return 0
        }
        dispatch(responder)
        return 0
    }

    private func dispatch(_ responder: HTTPResponder) {
        guard let head = responder.request else { return }
        responder.request = nil
        if responder.bodyLimitExceeded {
            responder.respond(status: 413, text: #"{"code":1009006,"message":"request body too large"}"#)
            return
        }
        let request = head.with(body: responder.body)
        responder.body = []
        guard let delegate else {
            responder.respond(status: 503, text: #"{"code":1009500,"message":"no handler"}"#)
            return
        }
        delegate.webServer(self, didReceive: request, responder: responder)
    }

    /// Reads a header through a shim that fills a C buffer.
    /// The most query arguments a request's `queryArguments` keeps (the rest are ignored).
    static let maxQueryArguments = 64

    private func header(_ wsi: OpaquePointer, capacity: Int = 4096,
                        _ read: (UnsafeMutablePointer<CChar>, Int32) -> Int32) -> String? {
        var buffer = [CChar](repeating: 0, count: capacity)
        let n = buffer.withUnsafeMutableBufferPointer { read($0.baseAddress!, Int32($0.count)) }
        guard n >= 0 else { return nil }
        return buffer.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
    }
}
