import Foundation
import RoomKitLoop
import RoomKitTestSupport
import XCTest

/// Streams on `GET /stream`: `chunks` pieces of `chunkSize` bytes, one per
/// millisecond whether or not the client keeps up (as the event feed does),
/// then `finish()`; answers `GET /healthz` plainly.
private final class StreamServer: WebServerDelegate, @unchecked Sendable {
    // @unchecked Sendable: loop thread only.
    let loop: EventLoop
    let maxBuffered: Int
    var closes: [HTTPStream.CloseReason] = []
    var refusedSends = 0
    var acceptedBytes = 0
    private var streams: [HTTPStream] = []
    private var chunks: Int
    private let chunkSize: Int

    init(loop: EventLoop, chunks: Int, chunkSize: Int, maxBuffered: Int) {
        self.loop = loop
        self.chunks = chunks
        self.chunkSize = chunkSize
        self.maxBuffered = maxBuffered
    }

    func webServer(_ server: WebServer, didAccept connection: WebSocketConnection) {}

    func webServer(_ server: WebServer, didReceive request: HTTPRequest, responder: HTTPResponder) {
        switch request.path {
        case "/stream":
            guard let stream = responder.startStream(contentType: "text/event-stream", maxBufferedBytes: maxBuffered) else {
                return XCTFail("startStream refused a fresh request")
            }
            XCTAssertNil(responder.startStream(contentType: "text/plain"), "a second answer is refused")
            stream.onClose = { [self] in closes.append($0) }
            streams.append(stream)
            pump(stream, index: 0)
        default:
            responder.respond(status: 200, contentType: "text/plain", text: "ok")
        }
    }

    /// One chunk per millisecond, so other requests are served in between.
    private func pump(_ stream: HTTPStream, index: Int) {
        guard stream.isOpen else { return }
        if index == chunks {
            stream.finish()
            return
        }
        let byte = UInt8(97 + index % 26)
        if stream.send([UInt8](repeating: byte, count: chunkSize)) {
            acceptedBytes += chunkSize
        } else {
            refusedSends += 1
            return
        }
        _ = loop.schedule(after: .milliseconds(1)) { [self] in pump(stream, index: index + 1) }
    }
}

final class HTTPStreamTests: XCTestCase {
    var loop: EventLoop!

    override func setUpWithError() throws {
        loop = try EventLoop(name: "test-http-stream")
    }

    override func tearDownWithError() throws {
        XCTAssertNoThrow(try loop.shutdown())
    }

    private func serve(_ delegate: StreamServer) throws -> WebServer {
        let loop = self.loop!
        var configuration = WebServerConfiguration()
        configuration.webSocketPath = nil
        let config = configuration
        return try onLoop(loop) { try WebServer(loop: loop, configuration: config, delegate: delegate) }
    }

    func testStream_aReadingClient_getsEveryByteInOrderThenTheEnd() throws {
        let delegate = StreamServer(loop: loop, chunks: 300, chunkSize: 10_000, maxBuffered: 1 << 20)
        let server = try serve(delegate)
        let text = rawExchange(port: server.port, "GET /stream HTTP/1.1\r\nHost: x\r\n\r\n", timeout: 10)
        let parts = text.components(separatedBy: "\r\n\r\n")
        let head = parts[0].lowercased()
        XCTAssertTrue(head.hasPrefix("http/1.1 200"), head)
        XCTAssertTrue(head.contains("content-type: text/event-stream"), head)
        XCTAssertFalse(head.contains("content-length"), "a stream has no length: it ends when the connection closes")
        let body = Array(parts.dropFirst().joined(separator: "\r\n\r\n").utf8)
        XCTAssertEqual(body.count, 300 * 10_000)
        var expected: [UInt8] = []
        for index in 0..<300 { expected += [UInt8](repeating: UInt8(97 + index % 26), count: 10_000) }
        XCTAssertTrue(body == expected, "bytes arrive whole and in order")
        waitUntil(loop) { delegate.closes == [.finished] }
        try onLoop(loop) { server.stop() }
    }

    func testStream_aClientThatDoesNotRead_isDroppedAtTheBound_andTheLoopKeepsServing() throws {
        // 64 MiB offered to a client that never reads: far beyond what the
        // kernel's socket buffers hold, so once they are full the 256 KiB
        // bound must trip.
        let delegate = StreamServer(loop: loop, chunks: 2048, chunkSize: 32_768, maxBuffered: 256 << 10)
        let server = try serve(delegate)
        let fd = try XCTUnwrap(connectLoopback(port: server.port))
        defer { close(fd) }
        var small: Int32 = 4096
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, socklen_t(MemoryLayout<Int32>.size))
        let request = "GET /stream HTTP/1.1\r\nHost: x\r\n\r\n"
        _ = request.withCString { send(fd, $0, strlen($0), 0) }

        waitUntil(loop, timeout: 20) { delegate.closes == [.overflow] }
        let (refused, accepted) = try onLoop(loop) { (delegate.refusedSends, delegate.acceptedBytes) }
        XCTAssertEqual(refused, 1, "the send that overflowed was refused, and no later send was tried")
        XCTAssertGreaterThan(accepted, 256 << 10, "the kernel's buffers took some before the bound tripped")
        XCTAssertLessThan(accepted, 64 << 20, "the stream stopped long before all 64 MiB")
        // The loop was never blocked: a plain request is answered at once.
        XCTAssertEqual(http(server.port, "GET", "/healthz").1, "ok")
        try onLoop(loop) { server.stop() }
    }
}
