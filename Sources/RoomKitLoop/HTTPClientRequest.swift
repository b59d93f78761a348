import CLibWebSockets
import CRoomKitShims

/// One outgoing HTTP request of an `HTTPClient`.
///
/// Loop thread only, except `cancel()`, which hops to the loop when called
/// elsewhere. Its handler hears the request's events on the loop thread:
/// head and body chunks as libwebsockets delivers them, and the final `end`
/// or `failure` on a later loop turn, never from inside the call that
/// started or cancelled the request.
public final class HTTPClientRequest: TransportPeer, @unchecked Sendable {
    // @unchecked Sendable: every field is loop-thread-only; `cancel()` hops
    // to the loop before touching them.

    /// The requested URL.
    public let url: HTTPURL
    /// The loop the request runs on.
    public let loop: EventLoop
    /// The response status, once the head arrived. Loop thread only.
    public private(set) var status: Int?
    /// Whether the request has ended (successfully or not). Loop thread only.
    public private(set) var isFinished = false

    weak var owner: LWSContext?
    weak var client: HTTPClient?
    /// Request headers, names ending with ':' (as lws wants them).
    let headers: [(name: String, value: String)]
    private let maxBodyBytes: Int
    private var handler: ((HTTPClientEvent) -> Void)?
    private var received = 0
    /// The request has gone out on an open connection.
    private(set) var connected = false
    var connectTimer: LoopTimer?
    var deadlineTimer: LoopTimer?

    init(url: HTTPURL, loop: EventLoop, headers: [(String, String)], maxBodyBytes: Int,
         handler: @escaping (HTTPClientEvent) -> Void) {
        self.url = url
        self.loop = loop
        self.headers = headers.map { ($0.0.hasSuffix(":") ? $0.0 : $0.0 + ":", $0.1) }
        self.maxBodyBytes = maxBodyBytes
        self.handler = handler
    }

    /// Stops the request. Its handler hears `.failure(.cancelled)` unless it
    /// already finished. Safe from any thread.
    public func cancel() {
        guard loop.inEventLoop else {
            loop.execute { [self] in cancel() }
            return
        }
        abort(HTTPClientError(.cancelled, "cancelled"))
    }

    // MARK: Engine side (loop thread)

    /// Ends the request with `error` and drops its connection (next turn).
    func abort(_ error: HTTPClientError) {
        guard !isFinished else { return }
        finish(.failure(error))
        closeOnNextTurn()
    }

    /// Ends the request: cancels its timers, forgets the handler, and hands
    /// it `event` on the next loop turn.
    func finish(_ event: HTTPClientEvent) {
        guard !isFinished else { return }
        isFinished = true
        connectTimer?.cancel()
        connectTimer = nil
        deadlineTimer?.cancel()
        deadlineTimer = nil
        client?.forget(self)
        // The loop refuses work only once its shutdown drained everything;
        // then there is no later turn, so deliver now.
        if !loop.execute({ [self] in deliverFinal(event) }) {
            deliverFinal(event)
        }
    }

    private func deliverFinal(_ event: HTTPClientEvent) {
        guard let handler else { return }
        self.handler = nil
        handler(event)
    }

    /// Closes the wsi from the next loop turn, outside any lws callback
    /// (lws 4.1; see `roomkit_lws_close_now`).
    func closeOnNextTurn() {
        loop.execute { [self] in
            guard let wsi else { return }
            roomkit_lws_close_now(wsi)
        }
    }

    func didConnect() {
        connected = true
        connectTimer?.cancel()
        connectTimer = nil
    }

    func didReceiveHead(status: Int, contentType: String?) {
        guard !isFinished else { return }
        self.status = status
        handler?(.head(status: status, contentType: contentType))
    }

    func didReceive(_ input: UnsafeMutableRawPointer?, _ length: Int) {
        guard !isFinished, let input, length > 0 else { return }
        received += length
        if received > maxBodyBytes {
            abort(HTTPClientError(.bodyTooLarge, "the body of \(url) is larger than \(maxBodyBytes) bytes"))
            return
        }
        handler?(.body(Array(UnsafeRawBufferPointer(start: input, count: length))))
    }

    func didComplete() {
        finish(.end)
        // No keep-alive reuse: the connection's job is done.
        closeOnNextTurn()
    }

    /// lws gave up on the connection (before or after the request went out).
    func didFail(_ text: String) {
        if connected {
            finish(.failure(HTTPClientError(.aborted, "\(url): \(text)")))
        } else {
            finish(.failure(HTTPClientError(.connectFailed, "\(url): \(text)")))
        }
    }

    /// The wsi closed; a request still running lost its connection.
    func didClose() {
        if !isFinished {
            finish(.failure(HTTPClientError(.aborted, "the connection to \(url) closed before the response was complete")))
        }
        owner?.detach(self)
    }
}
