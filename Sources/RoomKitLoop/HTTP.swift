import Foundation
import CLibWebSockets
import CRoomKitShims

/// One HTTP request received by a `WebServer`, with its whole body.
public struct HTTPRequest: Sendable {
    /// `GET`, `POST`, `OPTIONS` or `HEAD`.
    public let method: String
    /// The path, without the query (percent-encoding as sent).
    public let path: String
    /// The query without `?` (empty when none), for logs and display: as
    /// received from a client, its arguments are already percent-decoded
    /// (by libwebsockets) and joined by `&`, so an argument whose value held
    /// an encoded `&` cannot be told apart here. Read values with `queryValue`.
    public let query: String
    /// The query's `name=value` arguments, each percent-decoded once.
    public let queryArguments: [String]
    /// The `Authorization` header, if sent.
    public let authorization: String?
    /// The `Content-Type` header, if sent.
    public let contentType: String?
    /// The `Host` header, if sent (`name` or `name:port`, as the client wrote it).
    public let host: String?
    /// The `Origin` header, if sent (browsers send it on cross-origin and
    /// on non-GET requests).
    public let origin: String?
    /// The request body (empty for GET).
    public let body: [UInt8]

    /// A request whose `query` is in its raw form (percent-encoded, `+` for
    /// a space), as a client sends it: its arguments are decoded here.
    public init(method: String, path: String, query: String = "", authorization: String? = nil,
                contentType: String? = nil, host: String? = nil, origin: String? = nil, body: [UInt8] = []) {
        let arguments = query.split(separator: "&").map { argument in
            String(argument).replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? String(argument)
        }
        self.init(method: method, path: path, query: query, arguments: arguments, authorization: authorization,
                  contentType: contentType, host: host, origin: origin, body: body)
    }

    /// A request with its query's arguments already decoded (`WebServer`: libwebsockets decodes them).
    init(method: String, path: String, query: String, arguments: [String], authorization: String?,
         contentType: String?, host: String?, origin: String?, body: [UInt8]) {
        self.method = method
        self.path = path
        self.query = query
        self.queryArguments = arguments
        self.authorization = authorization
        self.contentType = contentType
        self.host = host
        self.origin = origin
        self.body = body
    }

    /// This request with `body` as its body (the head arrives before the body).
    func with(body: [UInt8]) -> HTTPRequest {
        HTTPRequest(method: method, path: path, query: query, arguments: queryArguments, authorization: authorization,
                    contentType: contentType, host: host, origin: origin, body: body)
    }

    /// The first value of query parameter `name`, percent-decoded once (an
    /// encoded `%`, `&` or `=` stays in the value as that character).
    public func queryValue(_ name: String) -> String? {
        for argument in queryArguments {
            let parts = argument.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            if parts.first.map(String.init) == name {
                return parts.count > 1 ? String(parts[1]) : ""
            }
        }
        return nil
    }

    /// The bearer token of the `Authorization` header, if it has one.
    public var bearerToken: String? {
        guard let authorization else { return nil }
        let prefix = "bearer "
        guard authorization.count > prefix.count, authorization.lowercased().hasPrefix(prefix) else { return nil }
        return String(authorization.dropFirst(prefix.count)).trimmingCharacters(in: .whitespaces)
    }
}

/// A response to send: status, content type, extra headers and body.
public struct HTTPResponse: Sendable {
    public var status: Int
    public var contentType: String
    public var headers: [(String, String)]
    public var body: [UInt8]

    public init(status: Int, contentType: String = "application/json",
                headers: [(String, String)] = [], body: [UInt8] = []) {
        self.status = status
        self.contentType = contentType
        self.headers = headers
        self.body = body
    }

    /// A response with a UTF-8 body.
    public init(status: Int, contentType: String = "application/json", text: String) {
        self.init(status: status, contentType: contentType, body: Array(text.utf8))
    }
}

/// Answers one HTTP request, at most once, possibly later (after the
/// handler has waited for an outcome). Safe from any thread.
public final class HTTPResponder: TransportPeer, @unchecked Sendable {
    // @unchecked Sendable: fields are loop-thread-only; `respond` hops to the loop.
    private let loop: EventLoop
    weak var owner: LWSContext?
    private var response: HTTPResponse?
    private var headSent = false
    private var bodyOffset = 0
    private(set) var answered = false
    var body: [UInt8] = []
    var request: HTTPRequest?
    var bodyLimitExceeded = false
    /// Whether the client is still there to receive the answer. Loop thread only.
    public private(set) var isOpen = true
    /// The streamed answer, once `startStream` was called. Loop thread only.
    private var stream: HTTPStream?

    init(loop: EventLoop) {
        self.loop = loop
    }

    /// Sends `response`. Only the first call counts; later ones are ignored.
    public func respond(_ response: HTTPResponse) {
        guard loop.inEventLoop else {
            loop.execute { [self] in respond(response) }
            return
        }
        guard !answered else { return }
        answered = true
        guard isOpen, let wsi else { return }
        self.response = response
        lws_callback_on_writable(wsi)
    }

    /// Sends a status with a UTF-8 body.
    public func respond(status: Int, contentType: String = "application/json", text: String) {
        respond(HTTPResponse(status: status, contentType: contentType, text: text))
    }

    /// Answers with a head now and a body sent in pieces later (Server-Sent
    /// Events): no `Content-Length`, and the connection closes when the
    /// stream ends. Returns nil when the request was already answered or the
    /// client has gone. Loop thread only.
    ///
    /// `maxBufferedBytes` bounds what may wait for a slow client; a `send`
    /// beyond it drops the client instead of growing (or blocking the loop).
    /// A producer that paces itself on `HTTPStream.onWritten` never reaches it.
    /// `contentLength`, when known, is sent in the head (the client can then
    /// tell a cut-off body from a whole one); the connection still closes
    /// when the stream ends.
    public func startStream(status: Int = 200, contentType: String, headers: [(String, String)] = [],
                            contentLength: Int64? = nil, maxBufferedBytes: Int = 1 << 20) -> HTTPStream? {
        loop.preconditionInEventLoop()
        guard !answered, isOpen, let wsi else { return nil }
        answered = true
        let stream = HTTPStream(loop: loop, head: HTTPResponse(status: status, contentType: contentType, headers: headers),
                                contentLength: contentLength ?? -1, maxBufferedBytes: maxBufferedBytes,
                                responder: self)
        self.stream = stream
        lws_callback_on_writable(wsi)
        return stream
    }

    /// Writes the head, then the body in chunks; -1 tells lws to close.
    func didBecomeWritable() -> Int32 {
        if let stream, let wsi { return stream.didBecomeWritable(wsi) }
        guard let wsi, let response else { return 0 }
        if !headSent {
            headSent = true
            if !Self.writeHead(wsi, response, contentLength: Int64(response.body.count)) { return -1 }
            if response.body.isEmpty {
                return complete(wsi)
            }
            lws_callback_on_writable(wsi)
            return 0
        }
        let chunk = min(65536, response.body.count - bodyOffset)
        let headroom = WebSocketFrame.headroom
        var buffer = [UInt8](repeating: 0, count: headroom + chunk)
        buffer.replaceSubrange(headroom..<(headroom + chunk), with: response.body[bodyOffset..<(bodyOffset + chunk)])
        bodyOffset += chunk
        let last = bodyOffset >= response.body.count
        let written = buffer.withUnsafeMutableBufferPointer { pointer in
            lws_write(wsi, pointer.baseAddress! + headroom, chunk, last ? LWS_WRITE_HTTP_FINAL : LWS_WRITE_HTTP)
        }
        if written < 0 { return -1 }
        if last { return complete(wsi) }
        lws_callback_on_writable(wsi)
        return 0
    }

    /// Writes the status line and headers; a negative `contentLength` sends
    /// none (the body then ends when the connection closes). False on failure.
    static func writeHead(_ wsi: OpaquePointer, _ response: HTTPResponse, contentLength: Int64) -> Bool {
        let names = response.headers.map { strdup($0.0 + ":") }
        let values = response.headers.map { strdup($0.1) }
        defer {
            names.forEach { free($0) }
            values.forEach { free($0) }
        }
        let namePointers: [UnsafePointer<CChar>?] = names.map { UnsafePointer($0) }
        let valuePointers: [UnsafePointer<CChar>?] = values.map { UnsafePointer($0) }
        let rc = namePointers.withUnsafeBufferPointer { n in
            valuePointers.withUnsafeBufferPointer { v in
                roomkit_lws_write_http_head(wsi, UInt32(response.status), response.contentType, contentLength,
                                            n.baseAddress, v.baseAddress, Int32(response.headers.count))
            }
        }
        return rc == 0
    }

    private func complete(_ wsi: OpaquePointer) -> Int32 {
        self.response = nil
        owner?.detach(self)
        return lws_http_transaction_completed(wsi) != 0 ? -1 : 0
    }

    func didClose() {
        isOpen = false
        response = nil
        owner?.detach(self)
        if let stream {
            self.stream = nil
            stream.didClose()
        }
    }
}
