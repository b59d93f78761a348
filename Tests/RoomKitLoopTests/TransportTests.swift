import Dispatch
import Foundation
import RoomKitLoop
import RoomKitTestSupport
import XCTest

final class TransportTests: XCTestCase {
    var loop: EventLoop!

    override func setUpWithError() throws {
        loop = try EventLoop(name: "test-transport")
    }

    override func tearDownWithError() throws {
        // Every test ends with the loop closing cleanly (uv_loop_close == 0).
        XCTAssertNoThrow(try loop.shutdown())
    }

    private func startServer(_ delegate: EchoServer, configure: (inout WebServerConfiguration) -> Void = { _ in }) throws -> WebServer {
        var configuration = WebServerConfiguration()
        configure(&configuration)
        let loop = self.loop!
        let config = configuration
        return try onLoop(loop) { try WebServer(loop: loop, configuration: config, delegate: delegate) }
    }

    private func makeClient(_ configure: (inout WebSocketClientConfiguration) -> Void = { _ in }) throws -> WebSocketClient {
        var configuration = WebSocketClientConfiguration()
        configure(&configuration)
        let loop = self.loop!
        let config = configuration
        return try onLoop(loop) { try WebSocketClient(loop: loop, configuration: config) }
    }

    /// Payload i of the echo test: sizes from 0 B to exactly 1 MiB.
    static func payload(_ i: Int) -> (bytes: [UInt8], binary: Bool) {
        let size: Int
        switch i {
        case 0: size = 0
        case 9_999: size = 1 << 20
        case 9_990..<9_999: size = (1 << 20) >> (9_999 - i)
        case _ where i % 500 == 0: size = 65_536 + (i % 7) - 3 // around lws's rx buffer
        default: size = (i &* 7_919) % 4_096
        }
        let binary = i % 2 == 1
        var state = UInt32(truncatingIfNeeded: i &* 2_654_435_761)
        var bytes = [UInt8](repeating: 0, count: size)
        for k in 0..<size {
            state = state &* 1_664_525 &+ 1_013_904_223
            // Text frames carry printable ASCII (valid UTF-8); binary any byte.
            bytes[k] = binary ? UInt8(truncatingIfNeeded: state >> 24) : 32 + UInt8(truncatingIfNeeded: state >> 24) % 95
        }
        return (bytes, binary)
    }

    func testEcho_tenThousandMessagesFromZeroBytesToOneMiB_areByteExact() throws {
        let echo = EchoServer()
        let server = try startServer(echo)
        let client = try makeClient()
        let recorder = RecordingClient()
        let url = try WebSocketURL("ws://127.0.0.1:\(server.port)/v1/rooms")
        let connection = try onLoop(loop) { client.connect(to: url, subprotocol: "room.v1", delegate: recorder) }
        waitUntil(loop) { recorder.opened }
        let count = 10_000
        // Send from a background thread: send() hops to the loop, in order.
        for i in 0..<count {
            let (bytes, binary) = Self.payload(i)
            connection.send(WebSocketFrame(bytes: bytes, isBinary: binary))
        }
        waitUntil(loop, timeout: 120) { recorder.messages.count == count || recorder.closeEvent != nil }
        let messages = try onLoop(loop) { recorder.messages }
        XCTAssertEqual(messages.count, count)
        for (i, message) in messages.enumerated() {
            let (bytes, binary) = Self.payload(i)
            if message.bytes != bytes || message.isBinary != binary {
                XCTFail("message \(i) (\(bytes.count) B) differs: got \(message.bytes.count) B binary=\(message.isBinary)")
                break
            }
        }
    }

    func testTLSEcho_withSelfSignedCertificateGeneratedInTheTest() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("roomkit-tls-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let cert = directory.appendingPathComponent("cert.pem").path
        let key = directory.appendingPathComponent("key.pem").path
        let openssl = Process()
        openssl.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        openssl.arguments = ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert,
                             "-days", "1", "-subj", "/CN=localhost",
                             "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"]
        openssl.standardError = FileHandle.nullDevice
        try openssl.run()
        openssl.waitUntilExit()
        XCTAssertEqual(openssl.terminationStatus, 0, "openssl could not make a certificate")

        let echo = EchoServer()
        let server = try startServer(echo) { $0.tlsCertificateFile = cert; $0.tlsKeyFile = key }
        // Trust exactly the generated certificate (as a CA), nothing looser.
        let client = try makeClient { $0.tlsCAFile = cert }
        let recorder = RecordingClient()
        let url = try WebSocketURL("wss://localhost:\(server.port)/v1/rooms")
        let connection = try onLoop(loop) { client.connect(to: url, subprotocol: "room.v1", delegate: recorder) }
        waitUntil(loop) { recorder.opened || recorder.closeEvent != nil }
        XCTAssertNil(try onLoop(loop) { recorder.closeEvent })
        for i in 0..<50 { connection.send(text: "secure \(i) " + String(repeating: "x", count: i * 1000)) }
        waitUntil(loop) { recorder.messages.count == 50 }
        let texts = try onLoop(loop) { recorder.messages.map { $0.text ?? "" } }
        XCTAssertEqual(texts, (0..<50).map { "secure \($0) " + String(repeating: "x", count: $0 * 1000) })

        // A client that does not trust the certificate must fail the handshake.
        let strict = try makeClient()
        let rejected = RecordingClient()
        _ = try onLoop(loop) { strict.connect(to: url, subprotocol: "room.v1", delegate: rejected) }
        waitUntil(loop) { rejected.closeEvent != nil }
        guard case .failedToConnect = try onLoop(loop, { rejected.closeEvent! }) else {
            return XCTFail("an untrusted certificate was accepted")
        }
    }

    func testConnect_toClosedPort_failsWithConnectFailed() throws {
        let client = try makeClient()
        let recorder = RecordingClient()
        let url = try WebSocketURL("ws://127.0.0.1:\(closedPort())/v1/rooms")
        _ = try onLoop(loop) { client.connect(to: url, subprotocol: "room.v1", delegate: recorder) }
        waitUntil(loop) { recorder.closeEvent != nil }
        guard case .failedToConnect(let error) = try onLoop(loop, { recorder.closeEvent! }) else {
            return XCTFail("expected failedToConnect")
        }
        XCTAssertEqual(error.kind, .connectFailed, "\(error)")
        XCTAssertFalse(try onLoop(loop) { recorder.opened })
    }

    func testConnect_toPeerThatResetsOnAccept_failsWithTypedError() throws {
        let listener = MisbehavingListener(mode: .resetOnAccept)
        defer { listener.stop() }
        let client = try makeClient()
        let recorder = RecordingClient()
        let url = try WebSocketURL("ws://127.0.0.1:\(listener.port)/v1/rooms")
        _ = try onLoop(loop) { client.connect(to: url, subprotocol: "room.v1", delegate: recorder) }
        waitUntil(loop) { recorder.closeEvent != nil }
        guard case .failedToConnect(let error) = try onLoop(loop, { recorder.closeEvent! }) else {
            return XCTFail("expected failedToConnect")
        }
        XCTAssertTrue([.connectFailed, .handshakeFailed].contains(error.kind), "\(error)")
    }

    func testConnect_toSilentPeer_timesOut() throws {
        let listener = MisbehavingListener(mode: .blackhole)
        defer { listener.stop() }
        let client = try makeClient { $0.connectTimeout = .milliseconds(300) }
        let recorder = RecordingClient()
        let url = try WebSocketURL("ws://127.0.0.1:\(listener.port)/v1/rooms")
        let started = Date()
        _ = try onLoop(loop) { client.connect(to: url, subprotocol: "room.v1", delegate: recorder) }
        waitUntil(loop) { recorder.closeEvent != nil }
        guard case .failedToConnect(let error) = try onLoop(loop, { recorder.closeEvent! }) else {
            return XCTFail("expected failedToConnect")
        }
        XCTAssertEqual(error.kind, .timedOut, "\(error)")
        XCTAssertLessThan(Date().timeIntervalSince(started), 5)
    }

    func testOpenConnection_whenServerAborts_reportsAbortedToClient() throws {
        let echo = EchoServer()
        let server = try startServer(echo)
        let client = try makeClient()
        let recorder = RecordingClient()
        let url = try WebSocketURL("ws://127.0.0.1:\(server.port)/v1/rooms")
        _ = try onLoop(loop) { client.connect(to: url, subprotocol: "room.v1", delegate: recorder) }
        waitUntil(loop) { recorder.opened && echo.accepted.count == 1 }
        try onLoop(loop) { echo.accepted[0].abort() }
        waitUntil(loop) { recorder.closeEvent != nil }
        guard case .aborted = try onLoop(loop, { recorder.closeEvent! }) else {
            return XCTFail("expected aborted, got \(String(describing: try? onLoop(loop, { recorder.closeEvent })))")
        }
        XCTAssertEqual(try onLoop(loop) { recorder.closeEvent?.code }, 1006)
    }

    func testClose_withCodeAndReason_reachesThePeer() throws {
        let echo = EchoServer()
        let server = try startServer(echo)
        let client = try makeClient()
        let recorder = RecordingClient()
        let url = try WebSocketURL("ws://127.0.0.1:\(server.port)/v1/rooms")
        let connection = try onLoop(loop) { client.connect(to: url, subprotocol: "room.v1", delegate: recorder) }
        waitUntil(loop) { recorder.opened }
        connection.send(text: "last words")
        connection.close(code: 4001, reason: "bye")
        waitUntil(loop) { recorder.closeEvent != nil && !echo.closes.isEmpty }
        XCTAssertEqual(try onLoop(loop) { echo.closes.first }, .closed(code: 4001, reason: "bye", initiatedByPeer: true))
        XCTAssertEqual(try onLoop(loop) { recorder.closeEvent }, .closed(code: 4001, reason: "bye", initiatedByPeer: false))
    }

    func testOversizeMessage_closesWith1009() throws {
        let echo = EchoServer()
        let server = try startServer(echo) { $0.maxMessageBytes = 1000 }
        let client = try makeClient()
        let recorder = RecordingClient()
        let url = try WebSocketURL("ws://127.0.0.1:\(server.port)/v1/rooms")
        let connection = try onLoop(loop) { client.connect(to: url, subprotocol: "room.v1", delegate: recorder) }
        waitUntil(loop) { recorder.opened }
        connection.send(text: String(repeating: "a", count: 1000)) // exactly the limit: fine
        connection.send(text: String(repeating: "b", count: 1001))
        waitUntil(loop) { recorder.closeEvent != nil }
        XCTAssertEqual(try onLoop(loop) { recorder.messages.count }, 1)
        XCTAssertEqual(try onLoop(loop) { recorder.closeEvent?.code }, 1009)
    }

    /// A query argument is percent-decoded exactly once: `%2541` is the
    /// text `%41`, not `A`; an encoded `&` or `=` stays in its value; `+`
    /// is a space (form encoding); a name may be encoded too.
    func testHTTP_queryValue_decodesEachArgumentOnce() throws {
        let echo = EchoServer()
        let server = try startServer(echo)
        let reply = rawExchange(port: server.port,
                                "GET /query?x=%2541&y=a%26b%3Dc&z=1+2&a%20b=%E2%9C%93 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        XCTAssertTrue(reply.hasPrefix("HTTP/1.1 200"), reply)
        let body = reply.components(separatedBy: "\r\n\r\n").dropFirst().joined(separator: "\r\n\r\n")
        XCTAssertEqual(body.split(separator: "\n", omittingEmptySubsequences: false).map(String.init),
                       ["%41", "a&b=c", "1 2", "\u{2713}"], reply)
    }

    func testHTTP_getAndPostAreRoutedOnTheWebSocketListener() throws {
        let echo = EchoServer()
        let server = try startServer(echo)
        let health = rawExchange(port: server.port, "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        XCTAssertTrue(health.hasPrefix("HTTP/1.1 200"), health)
        XCTAssertTrue(health.hasSuffix("\r\n\r\nok"), health)

        let body = String(repeating: "0123456789", count: 20_000) // 200 kB, several body chunks
        let post = rawExchange(port: server.port,
                               "POST /echo?a=1&b=two HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: text/plain\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)")
        XCTAssertTrue(post.hasPrefix("HTTP/1.1 200"), String(post.prefix(200)))
        XCTAssertTrue(post.hasSuffix("\r\n\r\n" + body), "POST body not echoed byte-exact")
        XCTAssertTrue(post.lowercased().contains("x-query: a=1&b=two"), String(post.prefix(300)))

        let later = rawExchange(port: server.port, "GET /later HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        XCTAssertTrue(later.hasPrefix("HTTP/1.1 202"), later)
        let missing = rawExchange(port: server.port, "GET /nope HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        XCTAssertTrue(missing.hasPrefix("HTTP/1.1 404"), missing)

        // And the same port still upgrades WebSockets.
        let client = try makeClient()
        let recorder = RecordingClient()
        let url = try WebSocketURL("ws://127.0.0.1:\(server.port)/v1/rooms")
        let connection = try onLoop(loop) { client.connect(to: url, subprotocol: "room.v1", delegate: recorder) }
        waitUntil(loop) { recorder.opened }
        connection.send(text: "hi")
        waitUntil(loop) { recorder.messages.count == 1 }
        let requests = try onLoop(loop) { echo.requests.map { "\($0.method) \($0.path)" } }
        XCTAssertEqual(requests, ["GET /healthz", "POST /echo", "GET /later", "GET /nope"])
    }

    func testUpgrade_withoutOrWithWrongSubprotocol_isRefusedWith400() throws {
        let echo = EchoServer()
        let server = try startServer(echo)
        let upgrade = "GET /v1/rooms HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
        let bare = rawExchange(port: server.port, upgrade + "\r\n", timeout: 3)
        XCTAssertTrue(bare.hasPrefix("HTTP/1.1 400") || bare.hasPrefix("HTTP/1.0 400"), bare)
        let good = rawExchange(port: server.port, upgrade + "Sec-WebSocket-Protocol: room.v1\r\n\r\n", timeout: 1)
        XCTAssertTrue(good.hasPrefix("HTTP/1.1 101"), good)
        XCTAssertTrue(good.lowercased().contains("sec-websocket-protocol: room.v1"), good)

        let client = try makeClient()
        let recorder = RecordingClient()
        let url = try WebSocketURL("ws://127.0.0.1:\(server.port)/v1/rooms")
        _ = try onLoop(loop) { client.connect(to: url, subprotocol: "chat.v9", delegate: recorder) }
        waitUntil(loop) { recorder.closeEvent != nil }
        guard case .failedToConnect(let error) = try onLoop(loop, { recorder.closeEvent! }) else {
            return XCTFail("expected failedToConnect")
        }
        XCTAssertEqual(error.kind, .handshakeFailed, "\(error)")
    }

    func testManyConnectionsOnOneLoop_eachEchoes() throws {
        let echo = EchoServer()
        let server = try startServer(echo)
        let client = try makeClient()
        let url = try WebSocketURL("ws://127.0.0.1:\(server.port)/v1/rooms")
        let recorders = (0..<300).map { _ in RecordingClient() }
        let connections = try onLoop(loop) {
            recorders.map { client.connect(to: url, subprotocol: "room.v1", delegate: $0) }
        }
        waitUntil(loop, timeout: 30) { recorders.allSatisfy(\.opened) }
        for (i, connection) in connections.enumerated() { connection.send(text: "conn \(i)") }
        waitUntil(loop, timeout: 30) { recorders.allSatisfy { $0.messages.count == 1 } }
        for (i, recorder) in recorders.enumerated() {
            XCTAssertEqual(try onLoop(loop) { recorder.messages.first?.text }, "conn \(i)")
        }
        XCTAssertEqual(try onLoop(loop) { server.peerCount }, 300)
    }

    func testInvalidURL_isRejectedWithAClearError() {
        XCTAssertThrowsError(try WebSocketURL("http://127.0.0.1/x")) { error in
            XCTAssertEqual((error as? WebSocketError)?.kind, .invalidURL)
        }
        XCTAssertThrowsError(try WebSocketURL("ws:///nohost"))
        XCTAssertEqual(try WebSocketURL("wss://example.org/v1/rooms").port, 443)
    }
}
