import Dispatch
import Foundation
import RoomKitLoop
import XCTest

/// A server delegate with a few fixed routes for the HTTP client.
private final class FixtureServer: WebServerDelegate, @unchecked Sendable {
    // @unchecked Sendable: loop thread only.
    var requests: [HTTPRequest] = []
    /// Requests left unanswered on purpose (`/never`).
    var parked: [HTTPResponder] = []
    static let bigBody: [UInt8] = (0..<(3 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ $0 >> 11) }

    func webServer(_ server: WebServer, didAccept connection: WebSocketConnection) {
        connection.close()
    }

    func webServer(_ server: WebServer, didReceive request: HTTPRequest, responder: HTTPResponder) {
        requests.append(request)
        switch request.path {
        case "/hello":
            responder.respond(status: 200, contentType: "text/plain", text: "hello \(request.query)")
        case "/big":
            responder.respond(HTTPResponse(status: 200, contentType: "application/octet-stream", body: Self.bigBody))
        case "/never":
            parked.append(responder)
        default:
            responder.respond(status: 404, text: #"{"code":404,"message":"no such thing"}"#)
        }
    }
}

final class HTTPClientTests: XCTestCase {
    private var loop: EventLoop!
    /// Held here: a `WebServer` holds its delegate weakly.
    private var fixture: FixtureServer?

    override func setUpWithError() throws {
        loop = try EventLoop(name: "test-http-client")
    }

    override func tearDownWithError() throws {
        // Every test ends with the loop closing cleanly (uv_loop_close == 0).
        XCTAssertNoThrow(try loop.shutdown())
        // XCTest keeps every test case for the whole run: let go of what this
        // one made (an object outliving its last weak reference reads as a
        // leak under LeakSanitizer).
        fixture = nil
        loop = nil
    }

    private func start(_ configure: (inout HTTPClientConfiguration) -> Void = { _ in })
        throws -> (FixtureServer, WebServer, HTTPClient) {
        let fixture = FixtureServer()
        self.fixture = fixture
        var configuration = HTTPClientConfiguration()
        configure(&configuration)
        let loop = self.loop!
        let config = configuration
        let (server, client) = try onLoop(loop) { () -> (WebServer, HTTPClient) in
            var web = WebServerConfiguration()
            web.webSocketPath = nil
            return (try WebServer(loop: loop, configuration: web, delegate: fixture),
                    try HTTPClient(loop: loop, configuration: config))
        }
        return (fixture, server, client)
    }

    private func stop(_ server: WebServer, _ client: HTTPClient) throws {
        _ = try onLoop(loop) {
            client.shutdown()
            server.stop()
        }
    }

    func testGet_sendsAuthorizationAndReturnsStatusTypeAndBody() async throws {
        let (fixture, server, client) = try start()
        let url = try HTTPURL("http://127.0.0.1:\(server.port)/hello?a=1&b=two")
        let response = try await client.get(url, headers: [("Authorization", "Bearer secret-token")])
        XCTAssertEqual(response.status, 200)
        XCTAssertEqual(response.contentType, "text/plain")
        XCTAssertEqual(response.text, "hello a=1&b=two")
        let seen = try onLoop(loop) { fixture.requests }
        XCTAssertEqual(seen.count, 1)
        XCTAssertEqual(seen.first?.method, "GET")
        XCTAssertEqual(seen.first?.bearerToken, "secret-token")
        try await waitForIdle(client)
        try stop(server, client)
    }

    func testGet_largeBody_arrivesByteExact_andStreamsInOrder() async throws {
        let (_, server, client) = try start()
        let url = try HTTPURL("http://127.0.0.1:\(server.port)/big")
        let collected = try await client.get(url)
        XCTAssertEqual(collected.body.count, FixtureServer.bigBody.count)
        XCTAssertTrue(collected.body == FixtureServer.bigBody, "the collected body is byte-exact")

        // The streaming form: one head, chunks, then end — nothing after.
        let log = EventLog()
        _ = try onLoop(loop) {
            client.getStreaming(url) { log.append($0) }
        }
        try await eventually { log.events.last == .end }
        let events = log.events
        XCTAssertEqual(events.first, .head(status: 200, contentType: "application/octet-stream"))
        XCTAssertEqual(events.filter { $0 == .end }.count, 1)
        let streamed = events.flatMap { event -> [UInt8] in
            if case .body(let bytes) = event { return bytes }
            return []
        }
        XCTAssertGreaterThan(events.count, 3, "a 3 MiB body arrives in several chunks")
        XCTAssertTrue(streamed == FixtureServer.bigBody)
        try await waitForIdle(client)
        try stop(server, client)
    }

    func testGet_404_collectingFailsWithHTTPStatusAndServerBody_streamingReportsTheHead() async throws {
        let (_, server, client) = try start()
        let url = try HTTPURL("http://127.0.0.1:\(server.port)/missing")
        do {
            _ = try await client.get(url)
            XCTFail("a 404 must throw")
        } catch {
            XCTAssertEqual(error.code, .httpStatus)
            XCTAssertEqual(error.status, 404)
            XCTAssertEqual(String(decoding: error.body, as: UTF8.self), #"{"code":404,"message":"no such thing"}"#)
        }
        let log = EventLog()
        _ = try onLoop(loop) { client.getStreaming(url) { log.append($0) } }
        try await eventually { log.events.last == .end }
        XCTAssertEqual(log.events.first, .head(status: 404, contentType: "application/json"))
        try await waitForIdle(client)
        try stop(server, client)
    }

    func testGet_connectionRefused_failsWithConnectFailed() async throws {
        let (_, server, client) = try start()
        let url = try HTTPURL("http://127.0.0.1:\(closedPort())/hello")
        do {
            _ = try await client.get(url)
            XCTFail("a refused connection must throw")
        } catch {
            XCTAssertEqual(error.code, .connectFailed, "\(error)")
        }
        try await waitForIdle(client)
        try stop(server, client)
    }

    func testGet_serverThatNeverAnswers_failsWithTimedOut() async throws {
        let (_, server, client) = try start { $0.timeout = .milliseconds(300) }
        let url = try HTTPURL("http://127.0.0.1:\(server.port)/never")
        let started = Date()
        do {
            _ = try await client.get(url)
            XCTFail("must time out")
        } catch {
            XCTAssertEqual(error.code, .timedOut, "\(error)")
        }
        XCTAssertLessThan(Date().timeIntervalSince(started), 3)
        try await waitForIdle(client)
        try stop(server, client)
    }

    func testGet_cancel_failsTheRequestOnceWithCancelled() async throws {
        let (_, server, client) = try start()
        let url = try HTTPURL("http://127.0.0.1:\(server.port)/never")
        let log = EventLog()
        let request = try onLoop(loop) { client.getStreaming(url) { log.append($0) } }
        request.cancel()
        try await eventually { !log.events.isEmpty }
        XCTAssertEqual(log.events, [.failure(HTTPClientError(.cancelled, "cancelled"))])
        try await waitForIdle(client)
        try stop(server, client)
    }

    func testShutdown_failsRunningRequestsWithShutdown_andLaterOnesAtOnce() async throws {
        let (fixture, server, client) = try start()
        let url = try HTTPURL("http://127.0.0.1:\(server.port)/never")
        let log = EventLog()
        _ = try onLoop(loop) { client.getStreaming(url) { log.append($0) } }
        // Connected and waiting for its answer (a context must not be destroyed
        // while the same loop accepts; see `HTTPClient.shutdown()`).
        let loop = self.loop!
        try await eventually { (try? onLoop(loop) { fixture.parked.count }) == 1 }
        try onLoop(loop) { client.shutdown() }
        try await eventually { !log.events.isEmpty }
        XCTAssertEqual(log.events.map(\.failureCode), [.shutdown])
        do {
            _ = try await client.get(url)
            XCTFail("a shut-down client must throw")
        } catch {
            XCTAssertEqual(error.code, .shutdown)
        }
        try onLoop(loop) { server.stop() }
    }

    func testShared_isOnePerLoopAndConfiguration_ignoresShutdown_andClosesWithTheLoop() async throws {
        let (_, server, client) = try start()
        let loop = self.loop!
        var fast = HTTPClientConfiguration()
        fast.timeout = .seconds(1)
        let fastConfiguration = fast
        let (a, b, c) = try onLoop(loop) {
            (try HTTPClient.shared(on: loop), try HTTPClient.shared(on: loop), try HTTPClient.shared(on: loop, configuration: fastConfiguration))
        }
        XCTAssertTrue(a === b)
        XCTAssertFalse(a === c)
        try onLoop(loop) { a.shutdown() }
        let url = try HTTPURL("http://127.0.0.1:\(server.port)/hello")
        let response = try await a.get(url)
        XCTAssertEqual(response.status, 200, "shutdown() leaves a shared client alone")
        try await waitForIdle(a)
        try stop(server, client)
    }

    func testLoopShutdown_whileARequestIsStillConnecting_failsItAndClosesCleanly() throws {
        let (_, server, client) = try start()
        let url = try HTTPURL("http://127.0.0.1:\(server.port)/never")
        let log = EventLog()
        _ = try onLoop(loop) { client.getStreaming(url) { log.append($0) } }
        // tearDown shuts the loop down at once and asserts it closes cleanly.
        try loop.shutdown()
        XCTAssertEqual(log.events.map(\.failureCode), [.shutdown])
    }

    func testHTTPURL_parsesSchemesPortsAndQueries_andRejectsOthers() throws {
        let plain = try HTTPURL("http://example.org/a/b?x=1")
        XCTAssertEqual([plain.host, plain.path, "\(plain.port)", "\(plain.secure)"], ["example.org", "/a/b?x=1", "80", "false"])
        XCTAssertEqual(plain.hostHeader, "example.org")
        let tls = try HTTPURL("https://127.0.0.1:8443")
        XCTAssertEqual([tls.path, "\(tls.port)", "\(tls.secure)", tls.hostHeader], ["/", "8443", "true", "127.0.0.1:8443"])
        for bad in ["ws://x/", "not a url", "http:///nohost"] {
            XCTAssertThrowsError(try HTTPURL(bad), bad) { XCTAssertEqual(($0 as? HTTPClientError)?.code, .invalidURL) }
        }
    }

    /// Waits until the client has no running request and every connection closed.
    private func waitForIdle(_ client: HTTPClient) async throws {
        let loop = self.loop!
        try await eventually { (try? onLoop(loop) { client.runningCount }) == 0 }
    }
}

/// Collects streamed events (appended on the loop, read by the test).
private final class EventLog: @unchecked Sendable {
    // @unchecked Sendable: guarded by lock.
    private let lock = NSLock()
    private var list: [HTTPClientEvent] = []
    var events: [HTTPClientEvent] {
        lock.lock(); defer { lock.unlock() }
        return list
    }
    func append(_ event: HTTPClientEvent) {
        lock.lock(); list.append(event); lock.unlock()
    }
}

extension HTTPClientEvent {
    fileprivate var failureCode: HTTPClientError.Code? {
        if case .failure(let error) = self { return error.code }
        return nil
    }
}

/// Polls `condition` every 5 ms for up to `timeout` seconds; fails the test otherwise.
private func eventually(timeout: TimeInterval = 5, file: StaticString = #filePath, line: UInt = #line,
                        _ condition: () -> Bool) async throws {
    let deadline = Date().addingTimeInterval(timeout)
    while Date() < deadline {
        if condition() { return }
        try await Task.sleep(for: .milliseconds(5))
    }
    XCTFail("condition not met within \(timeout) s", file: file, line: line)
}
