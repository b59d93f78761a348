import CLibWebSockets
import CRoomKitShims
import Logging
import Synchronization

/// Sends HTTP GET requests on the event loop, all through one
/// libwebsockets client context (libwebsockets parses; we never do).
///
/// Loop thread only, except the `async` `get`, which may be called from
/// anywhere and hops to the loop. `shutdown()` (or the loop's shutdown)
/// fails every running request with `.shutdown`.
public final class HTTPClient: LWSCallbackTarget, @unchecked Sendable {
    // @unchecked Sendable: loop thread only (asserted); Sendable so loop
    // tasks may capture it.

    /// The loop the requests run on.
    public let loop: EventLoop
    /// The settings every request uses.
    public let configuration: HTTPClientConfiguration
    private let logger: Logger
    private var context: LWSContext?
    private static let protocolName = "roomkit-http-client"
    /// Requests that have not finished. Loop thread only.
    private var running: [ObjectIdentifier: HTTPClientRequest] = [:]
    private var shutdownHookID: Int?
    /// Set on the loop's shared clients, which `shutdown()` leaves alone.
    var isShared = false

    /// Creates the client's lws context. Loop thread only.
    public init(loop: EventLoop, configuration: HTTPClientConfiguration = .init(), logger: Logger? = nil) throws(LoopError) {
        loop.preconditionInEventLoop()
        self.loop = loop
        self.configuration = configuration
        self.logger = logger ?? loop.logger
        context = try LWSContext(loop: loop, target: self, options: .init(
            options: roomkit_lws_options_client(),
            protocols: [.init(name: Self.protocolName, rxBufferSize: 0)],
            tlsCAFile: configuration.tlsCAFile,
            clientTLS: .trustStore))
        // Registered after the context's own hook, so it runs first (reverse order).
        shutdownHookID = loop.addShutdownHook { [weak self] in self?.failAll(.shutdown, "the loop is shutting down") }
    }

    /// Number of requests that have not finished. Loop thread only.
    public var runningCount: Int { running.count }

    /// Starts `GET url` with `headers` (e.g. `("Authorization", "Bearer …")`)
    /// and streams the response to `handler` (see `HTTPClientEvent`). Any
    /// status is reported as a head, not as an error. Loop thread only.
    @discardableResult
    public func getStreaming(_ url: HTTPURL, headers: [(String, String)] = [],
                             handler: @escaping (HTTPClientEvent) -> Void) -> HTTPClientRequest {
        loop.preconditionInEventLoop()
        let request = HTTPClientRequest(url: url, loop: loop, headers: headers,
                                        maxBodyBytes: configuration.maxBodyBytes, handler: handler)
        request.client = self
        guard let context, let lwsContext = context.context else {
            request.finish(.failure(HTTPClientError(.shutdown, "the HTTP client is shut down")))
            return request
        }
        request.owner = context
        context.retain(request)
        running[ObjectIdentifier(request)] = request

        var flags = Int32(LCCSCF_HTTP_NO_FOLLOW_REDIRECT.rawValue)
        if url.secure {
            flags |= Int32(LCCSCF_USE_SSL.rawValue)
            if configuration.allowSelfSigned { flags |= Int32(LCCSCF_ALLOW_SELFSIGNED.rawValue) }
            if configuration.skipHostnameCheck { flags |= Int32(LCCSCF_SKIP_SERVER_CERT_HOSTNAME_CHECK.rawValue) }
        }
        // lws copies what it needs from these strings during the call.
        let wsi: OpaquePointer? = url.host.withCString { host in
            url.hostHeader.withCString { hostHeader in
                url.path.withCString { path in
                    "GET".withCString { method in
                        Self.protocolName.withCString { local in
                        "http/1.1".withCString { alpn in
                            var info = clientConnectInfo(context: lwsContext, address: host, port: url.port, path: path,
                                                         host: hostHeader, ssl: flags, peer: request)
                            info.method = method
                            // Binding the protocol by name is what makes lws
                            // deliver the body (RECEIVE_CLIENT_HTTP_READ).
                            info.local_protocol_name = local
                            info.alpn = alpn
                            return lws_client_connect_via_info(&info)
                        }
                        }
                    }
                }
            }
        }
        guard let wsi else {
            // lws may already have reported the failure through a callback.
            if !request.isFinished {
                request.finish(.failure(HTTPClientError(.connectFailed, "could not start connecting to \(url)")))
            }
            context.detach(request)
            return request
        }
        guard !request.isFinished else { return request }
        request.wsi = wsi
        do {
            request.connectTimer = try loop.scheduleTimer(after: configuration.connectTimeout) { [weak request, configuration] _ in
                guard let request, !request.connected else { return }
                request.abort(HTTPClientError(.timedOut, "no connection to \(url) within \(configuration.connectTimeout)"))
            }
            request.deadlineTimer = try loop.scheduleTimer(after: configuration.timeout) { [weak request, configuration] _ in
                request?.abort(HTTPClientError(.timedOut, "no complete response from \(url) within \(configuration.timeout)"))
            }
        } catch {
            request.abort(HTTPClientError(.shutdown, "\(error)"))
        }
        return request
    }

    /// Starts `GET url` and collects the body; `completion` gets the
    /// response, or `.httpStatus` (with the server's body) for a status
    /// outside 200–299, or another failure. Loop thread only; `completion`
    /// runs on the loop, never from inside this call.
    @discardableResult
    public func get(_ url: HTTPURL, headers: [(String, String)] = [],
                    completion: @escaping (Result<HTTPClientResponse, HTTPClientError>) -> Void) -> HTTPClientRequest {
        var status = 0
        var contentType: String?
        var body: [UInt8] = []
        return getStreaming(url, headers: headers) { event in
            switch event {
            case .head(let code, let type):
                status = code
                contentType = type
            case .body(let bytes):
                body.append(contentsOf: bytes)
            case .end:
                if (200..<300).contains(status) {
                    completion(.success(HTTPClientResponse(status: status, contentType: contentType, body: body)))
                } else {
                    completion(.failure(HTTPClientError(.httpStatus, "\(url) answered \(status)", status: status, body: body)))
                }
            case .failure(let error):
                completion(.failure(error))
            }
        }
    }

    /// Fails every running request with `.shutdown` and closes the client's
    /// lws context. Idempotent; does nothing on a shared client (see
    /// `shared(on:configuration:)`), which lives as long as its loop. Loop
    /// thread only.
    ///
    /// Caution (libwebsockets 4.1 with libuv): destroying a context closes
    /// its internal event fd twice, once at once and once when libuv has
    /// closed its handle; an fd that the process opens in between (an
    /// `accept` on the same loop, a file on another thread) is closed under
    /// its owner. Clients that come and go should use a shared client.
    public func shutdown() {
        loop.preconditionInEventLoop()
        guard !isShared else { return }
        if let id = shutdownHookID, !loop.isShuttingDown { loop.removeShutdownHook(id) }
        shutdownHookID = nil
        failAll(.shutdown, "the HTTP client is shut down")
        guard let context else { return }
        self.context = nil
        // After the requests' connections closed (queued first), and never
        // from inside one of the context's callbacks.
        loop.execute { context.destroy() }
    }

    private func failAll(_ code: HTTPClientError.Code, _ detail: String) {
        for request in Array(running.values) {
            request.abort(HTTPClientError(code, detail))
        }
    }

    func forget(_ request: HTTPClientRequest) {
        running.removeValue(forKey: ObjectIdentifier(request))
    }

    // MARK: lws callbacks (loop thread)

    func lwsCallback(wsi: OpaquePointer, reason: lws_callback_reasons, peer: LWSPeer?,
                     input: UnsafeMutableRawPointer?, length: Int) -> Int32 {
        guard let request = peer as? HTTPClientRequest else {
            return lws_callback_http_dummy(wsi, reason, nil, input, length)
        }
        switch reason {
        case LWS_CALLBACK_CLIENT_APPEND_HANDSHAKE_HEADER:
            request.wsi = wsi
            request.didConnect()
            for header in request.headers {
                guard let input, roomkit_lws_client_append_header(wsi, input, length, header.name, header.value) == 0 else {
                    request.abort(HTTPClientError(.connectFailed, "request headers do not fit"))
                    return -1
                }
            }
            return 0
        case LWS_CALLBACK_ESTABLISHED_CLIENT_HTTP:
            request.didConnect()
            request.didReceiveHead(status: Int(lws_http_client_http_response(wsi)),
                                   contentType: Self.header(wsi, ROOMKIT_HEADER_CONTENT_TYPE))
            return 0
        case LWS_CALLBACK_RECEIVE_CLIENT_HTTP:
            return roomkit_lws_client_http_read(wsi) < 0 ? -1 : 0
        case LWS_CALLBACK_RECEIVE_CLIENT_HTTP_READ:
            request.didReceive(input, length)
            return 0
        case LWS_CALLBACK_COMPLETED_CLIENT_HTTP:
            request.didComplete()
            return 0
        case LWS_CALLBACK_CLIENT_CONNECTION_ERROR:
            let text = input.map { String(cString: $0.assumingMemoryBound(to: CChar.self)) } ?? "connection error"
            request.didFail(text)
            return 0
        case LWS_CALLBACK_CLOSED_CLIENT_HTTP:
            request.didClose()
            return 0
        case LWS_CALLBACK_WSI_DESTROY:
            request.didClose()
            return 0
        default:
            return lws_callback_http_dummy(wsi, reason, nil, input, length)
        }
    }

    /// A response header through the shared header shim.
    private static func header(_ wsi: OpaquePointer, _ which: roomkit_header) -> String? {
        var buffer = [CChar](repeating: 0, count: 1024)
        let n = buffer.withUnsafeMutableBufferPointer { roomkit_lws_header(wsi, which, $0.baseAddress!, Int32($0.count)) }
        guard n >= 0 else { return nil }
        return buffer.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
    }
}

extension HTTPClient {
    /// `GET url`, collecting the body: the response, or `.httpStatus` for
    /// a status outside 200–299, or another failure. Safe from any thread;
    /// cancelling the awaiting task cancels the request.
    public func get(_ url: HTTPURL, headers: [(String, String)] = []) async throws(HTTPClientError) -> HTTPClientResponse {
        let handle = LockedValue<(request: HTTPClientRequest?, cancelled: Bool)>((nil, false))
        let result: Result<HTTPClientResponse, HTTPClientError> = await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let accepted = loop.execute { [self] in
                    let request = get(url, headers: headers, completion: { continuation.resume(returning: $0) })
                    let cancelled = handle.withLock { state -> Bool in
                        state.request = request
                        return state.cancelled
                    }
                    if cancelled { request.cancel() }
                }
                if !accepted {
                    continuation.resume(returning: .failure(HTTPClientError(.shutdown, "the loop is shut down")))
                }
            }
        } onCancel: {
            let request = handle.withLock { state -> HTTPClientRequest? in
                state.cancelled = true
                return state.request
            }
            request?.cancel()
        }
        return try result.get()
    }
}
