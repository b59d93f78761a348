import CLibUV
import CLibWebSockets
import CRoomKitShims
import Logging
import Foundation
import Synchronization

/// The common base of `WebSocketConnection` and `HTTPResponder`: something
/// libwebsockets calls back about. It has no public API of its own.
///
/// Its address is the wsi's opaque user data (unretained); the owning
/// `LWSContext` holds the strong reference until the wsi closes.
public class TransportPeer {
    /// The wsi while lws keeps it. Loop thread only.
    var wsi: OpaquePointer?
    init() {}
}

typealias LWSPeer = TransportPeer

/// Reacts to the callbacks of one lws context. Loop thread only.
protocol LWSCallbackTarget: AnyObject {
    func lwsCallback(wsi: OpaquePointer, reason: lws_callback_reasons, peer: LWSPeer?,
                     input: UnsafeMutableRawPointer?, length: Int) -> Int32
}

/// Owns one `lws_context` that runs on the event loop as a foreign loop.
///
/// The protocol table, the C strings it points to, and the callback target
/// stay alive until the loop has closed every handle, because lws keeps
/// calling back (and reading the table) while it tears itself down.
///
/// Destruction has two stages (lws 4.1 with a foreign libuv loop):
/// `destroy()` starts it (lws closes every connection and its uv handles,
/// asynchronously), and once the loop has finished every close callback a
/// second `lws_context_destroy` frees the vhosts, their TLS contexts and the
/// context itself. Without that second call all of it leaks (lws issue 1969,
/// and lws's own foreign-loop example calls it twice).
final class LWSContext: @unchecked Sendable {
    // @unchecked Sendable: loop thread only; Sendable so loop tasks can capture it.
    let loop: EventLoop
    private(set) var context: OpaquePointer?
    /// The owner (client or server), which holds this object in turn: the
    /// cycle is broken in the loop finalizer, after lws's last callback.
    private var target: (any LWSCallbackTarget)?
    /// lws writes NULL here (`info.pcontext`) once it has freed the context,
    /// which tells the finalizer whether the second destroy call is needed.
    private let liveContext: UnsafeMutablePointer<OpaquePointer?>
    /// A client context's TLS context, which we own and free after lws has
    /// finished (see `roomkit_client_ssl_ctx_new` for why lws does not).
    private var clientTLSContext: OpaquePointer?
    /// Strong references to the peers whose wsi is alive. Loop thread only.
    private var peers: [ObjectIdentifier: LWSPeer] = [:]
    private var shutdownHookID: Int?
    private var storage: [UnsafeMutableRawPointer] = []

    struct ProtocolSpec {
        var name: String
        var rxBufferSize: Int
    }

    struct Options {
        var port: Int32 = CONTEXT_PORT_NO_LISTEN
        var interface: String?
        var options: UInt64
        var protocols: [ProtocolSpec]
        var tlsCertificateFile: String?
        var tlsKeyFile: String?
        var tlsCAFile: String?
        /// The client TLS context lws makes for a context with TLS on; we
        /// make it instead (see `roomkit_client_ssl_ctx_new`).
        var clientTLS: ClientTLS = .none
        /// Bytes lws reads from one socket per service of it (its per-thread
        /// `pt_serv_buf_size`); 0 keeps lws's 4096. A server raises it so one
        /// loop turn takes in a whole burst of pipelined requests, not 4 KiB
        /// of it (roomd's group commit then writes them in one transaction).
        var serviceBufferSize = 0
        /// The most sockets lws may hold in this context (its
        /// `fd_limit_per_thread`); 0 keeps lws's default, the whole process
        /// limit. At this many lws stops polling its listen socket until one
        /// closes, so a server out of descriptors waits instead of spinning on
        /// a failing `accept` (see `WebServer.descriptorBudget`).
        var fdLimit: UInt32 = 0
    }

    enum ClientTLS {
        /// TLS off: lws makes no client TLS context.
        case none
        /// A client that may open `wss://` or `https://`: the OS's CAs plus `tlsCAFile`.
        case trustStore
        /// A TLS listener: lws wants a client context it never uses.
        case unused
    }

    init(loop: EventLoop, target: any LWSCallbackTarget, options: Options) throws(LoopError) {
        loop.preconditionInEventLoop()
        if loop.isShuttingDown {
            throw LoopError(code: .shutdown, function: "lws_create_context", detail: "the loop is shutting down")
        }
        self.loop = loop
        self.target = target
        liveContext = .allocate(capacity: 1)
        liveContext.initialize(to: nil)
        LWSLogging.configure(logger: loop.logger)

        let count = options.protocols.count
        let table = UnsafeMutablePointer<lws_protocols>.allocate(capacity: count + 1)
        storage.append(UnsafeMutableRawPointer(table))
        for (index, spec) in options.protocols.enumerated() {
            var entry = lws_protocols()
            entry.name = UnsafePointer(cString(spec.name))
            entry.callback = roomkitLWSCallback
            entry.per_session_data_size = 0
            entry.rx_buffer_size = spec.rxBufferSize
            entry.id = UInt32(index)
            (table + index).initialize(to: entry)
        }
        (table + count).initialize(to: lws_protocols())

        var info = lws_context_creation_info()
        info.port = options.port
        info.iface = options.interface.map { UnsafePointer(cString($0)) }
        info.protocols = UnsafePointer(table)
        info.options = options.options
        info.gid = -1
        info.uid = -1
        info.ssl_cert_filepath = options.tlsCertificateFile.map { UnsafePointer(cString($0)) }
        info.ssl_private_key_filepath = options.tlsKeyFile.map { UnsafePointer(cString($0)) }
        info.timeout_secs = 20
        if options.serviceBufferSize > 0 { info.pt_serv_buf_size = UInt32(options.serviceBufferSize) }
        if options.fdLimit > 0 { info.fd_limit_per_thread = options.fdLimit }
        if options.clientTLS != .none {
            var caLoaded: Int32 = 1
            let trust: Int32 = options.clientTLS == .trustStore ? 1 : 0
            guard let tls = roomkit_client_ssl_ctx_new(trust, options.tlsCAFile, &caLoaded) else {
                freeStorage()
                throw LoopError(code: .lws, function: "SSL_CTX_new", detail: "OpenSSL could not create a client TLS context")
            }
            if caLoaded == 0, let file = options.tlsCAFile {
                // As lws itself: the client is made, and its TLS connections fail verification.
                loop.logger.error("cannot load the CA file; TLS connections will fail verification", metadata: ["file": "\(file)"])
            }
            clientTLSContext = tls
            info.provided_client_ssl_ctx = tls
        }
        let holder = Unmanaged.passUnretained(self).toOpaque()
        info.user = holder
        info.pcontext = liveContext

        let created: OpaquePointer? = withUnsafeMutablePointer(to: &info) { infoPointer in
            var loops: [UnsafeMutableRawPointer?] = [UnsafeMutableRawPointer(loop.uv)]
            return loops.withUnsafeMutableBufferPointer { buffer in
                infoPointer.pointee.foreign_loops = buffer.baseAddress
                defer { infoPointer.pointee.foreign_loops = nil }
                return lws_create_context(infoPointer)
            }
        }
        guard let created else {
            freeStorage()
            if let tls = clientTLSContext {
                clientTLSContext = nil
                roomkit_client_ssl_ctx_free(tls)
            }
            throw LoopError(code: .lws, function: "lws_create_context",
                            detail: "libwebsockets could not create the context (see the log above)")
        }
        context = created
        liveContext.pointee = created
        // Retain self until the loop has finished with every handle; then
        // finish lws's teardown and let go of the owner.
        let retained = Unmanaged.passRetained(self)
        loop.addFinalizer {
            retained.takeUnretainedValue().finalize()
            retained.release()
        }
        shutdownHookID = loop.addShutdownHook { [unowned self] in destroy() }
    }

    /// The second stage of destruction, once the loop has run every close
    /// callback: lws frees what is left (vhosts, TLS contexts, the context)
    /// and, through `info.pcontext`, clears `liveContext`. Then the target,
    /// which holds this object, is released. Loop thread, from a finalizer.
    private func finalize() {
        // `context` is nil once `destroy()` ran, which the loop's shutdown
        // hooks guarantee before any finalizer.
        if context == nil, let remaining = liveContext.pointee {
            lws_context_destroy(remaining)
        }
        // Ours to free once lws has freed its vhosts (each live TLS connection
        // holds its own reference); if lws somehow did not finish, keep it.
        if liveContext.pointee == nil, let tls = clientTLSContext {
            clientTLSContext = nil
            roomkit_client_ssl_ctx_free(tls)
        }
        target = nil
        peers.removeAll()
    }

    /// A C copy of `string` that lives as long as this context.
    private func cString(_ string: String) -> UnsafeMutablePointer<CChar> {
        let bytes = Array(string.utf8CString)
        let pointer = UnsafeMutablePointer<CChar>.allocate(capacity: bytes.count)
        pointer.initialize(from: bytes, count: bytes.count)
        storage.append(UnsafeMutableRawPointer(pointer))
        return pointer
    }

    private func freeStorage() {
        for pointer in storage { pointer.deallocate() }
        storage.removeAll()
    }

    deinit {
        freeStorage()
        liveContext.deallocate()
    }

    /// Destroys the lws context; lws closes every connection (each peer gets
    /// its close callback) and then its handles. Idempotent. Loop thread only,
    /// and never from inside one of this context's callbacks.
    func destroy() {
        loop.assertInEventLoop()
        if let id = shutdownHookID, !loop.isShuttingDown {
            loop.removeShutdownHook(id)
        }
        shutdownHookID = nil
        guard let context else { return }
        self.context = nil
        lws_context_destroy(context)
    }

    // MARK: Peers

    func attach(_ peer: LWSPeer, to wsi: OpaquePointer) {
        peer.wsi = wsi
        peers[ObjectIdentifier(peer)] = peer
        lws_set_opaque_user_data(wsi, Unmanaged.passUnretained(peer).toOpaque())
    }

    /// Keeps `peer` alive before lws has given it a wsi (client connects).
    func retain(_ peer: LWSPeer) {
        peers[ObjectIdentifier(peer)] = peer
    }

    func detach(_ peer: LWSPeer) {
        if let wsi = peer.wsi, lws_get_opaque_user_data(wsi) == Unmanaged.passUnretained(peer).toOpaque() {
            lws_set_opaque_user_data(wsi, nil)
        }
        peer.wsi = nil
        peers.removeValue(forKey: ObjectIdentifier(peer))
    }

    var peerCount: Int { peers.count }

    fileprivate func dispatch(wsi: OpaquePointer, reason: lws_callback_reasons,
                              user: UnsafeMutableRawPointer?, input: UnsafeMutableRawPointer?,
                              length: Int) -> Int32 {
        var peer: LWSPeer?
        if let opaque = lws_get_opaque_user_data(wsi) {
            peer = Unmanaged<LWSPeer>.fromOpaque(opaque).takeUnretainedValue()
        }
        guard let target else { return lws_callback_http_dummy(wsi, reason, nil, input, length) }
        return target.lwsCallback(wsi: wsi, reason: reason, peer: peer, input: input, length: length)
    }
}

/// The one C callback for every protocol of every context: finds the
/// context's owner and forwards.
private func roomkitLWSCallback(_ wsi: OpaquePointer?, _ reason: lws_callback_reasons,
                                _ user: UnsafeMutableRawPointer?, _ input: UnsafeMutableRawPointer?,
                                _ length: Int) -> Int32 {
    guard let wsi, let context = lws_get_context(wsi), let holder = lws_context_user(context) else {
        return lws_callback_http_dummy(wsi, reason, user, input, length)
    }
    // No retain and release of the context per callback (it has a side
    // table, so each would take the runtime's slow path): it outlives every
    // callback of its lws context (see `LWSContext`: freed only after lws's
    // last callback, in the loop finalizer).
    return Unmanaged<LWSContext>.fromOpaque(holder)._withUnsafeGuaranteedRef { owner in
        owner.dispatch(wsi: wsi, reason: reason, user: user, input: input, length: length)
    }
}

/// Routes libwebsockets' own log lines to swift-log (process-wide: lws has
/// one log sink per process).
enum LWSLogging {
    private static let sink = LockedValue<Logger?>(nil)

    static func configure(logger: Logger) {
        let first = sink.withLock { current -> Bool in
            defer { if current == nil { current = logger } }
            return current == nil
        }
        if first {
            let verbose = logger.logLevel <= .debug || ProcessInfo.processInfo.environment["ROOMKIT_LWS_VERBOSE"] != nil
            roomkit_lws_set_log(verbose ? 1 : 0) { level, line in
                guard let line else { return }
                var text = String(cString: line)
                while text.last == "\n" { text.removeLast() }
                LWSLogging.emit(level: level, text)
            }
        }
    }

    /// lws repeats some lines on every loop turn while a condition lasts
    /// (`accept: errno 24` while the process is out of file descriptors):
    /// each distinct line is logged at most once per `repeatInterval`, then
    /// with the number of copies held back.
    private static let repeats = LockedValue(RepeatedLineLimiter(intervalNanoseconds: repeatIntervalNanoseconds))

    /// `ROOMKIT_LWS_REPEAT_INTERVAL` (seconds, tests shrink or grow it), default 5 s.
    private static var repeatIntervalNanoseconds: UInt64 {
        let seconds = ProcessInfo.processInfo.environment["ROOMKIT_LWS_REPEAT_INTERVAL"].flatMap(Double.init) ?? 5
        return seconds.isFinite && seconds >= 0 && seconds < 86_400 ? UInt64(seconds * 1e9) : 5_000_000_000
    }

    static func emit(level: Int32, _ line: String) {
        guard let logger = sink.withLock({ $0 }) else { return }
        let verdict = repeats.withLock { $0.line(line, now: DispatchTime.now().uptimeNanoseconds) }
        let text: String
        switch verdict {
        case .suppress: return
        case .log(let suppressed):
            text = suppressed == 0 ? line : "\(line) (\(suppressed) more like it suppressed)"
        }
        // LLL_ERR is bit 0 and LLL_WARN bit 1 (lws-logs.h).
        if level & 1 != 0 {
            logger.error("lws: \(text)")
        } else if level & 2 != 0 {
            logger.warning("lws: \(text)")
        } else if ProcessInfo.processInfo.environment["ROOMKIT_LWS_VERBOSE"] != nil {
            logger.notice("lws: \(text)")
        } else {
            logger.debug("lws: \(text)")
        }
    }
}

/// The fields every client connection of ours fills (the WebSocket client
/// and the HTTP client): where to connect, the request line's path and Host,
/// TLS flags, and the peer object lws hands back in every callback. Callers
/// add what only they need (origin and subprotocol, method and ALPN). The C
/// strings must outlive the `lws_client_connect_via_info` call.
func clientConnectInfo(context: OpaquePointer?, address: UnsafePointer<CChar>?, port: Int, path: UnsafePointer<CChar>?,
                       host: UnsafePointer<CChar>?, ssl: Int32, peer: LWSPeer) -> lws_client_connect_info {
    var info = lws_client_connect_info()
    info.context = context
    info.address = address
    info.port = Int32(port)
    info.path = path
    info.host = host
    info.ssl_connection = ssl
    info.opaque_user_data = Unmanaged.passUnretained(peer).toOpaque()
    return info
}
