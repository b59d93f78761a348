import Foundation
import Logging
@testable import RoomKitBot
import RoomKitLoop
import RoomKitTestSupport
import XCTest

/// The event feed behind `GET /v1/events/stream`, with settings shrunk so a
/// quiet stream's keep-alive can be watched: a real `WebServer`, real sockets.
final class EventFeedTests: XCTestCase {
    private final class FeedServer: WebServerDelegate, @unchecked Sendable {
        // @unchecked Sendable: loop thread only.
        let feed: EventFeed
        init(feed: EventFeed) { self.feed = feed }
        func webServer(_ server: WebServer, didAccept connection: WebSocketConnection) {}
        func webServer(_ server: WebServer, didReceive request: HTTPRequest, responder: HTTPResponder) {
            feed.open(responder)
        }
    }

    func testQuietStream_getsKeepAlives_andAClosedClientIsFreedByThemWithoutEvents() throws {
        var logger = Logger(label: "test.feed")
        logger.logLevel = .critical
        let loop = try EventLoop(name: "test-feed", logger: logger)
        var settings = EventStreamSettings()
        settings.keepAliveInterval = .milliseconds(50)
        settings.maxClients = 1
        let feed = EventFeed(loop: loop, settings: settings, logger: logger)
        let log = try EventLog(destination: nil)
        feed.attach(to: log)
        let delegate = FeedServer(feed: feed)
        var configuration = WebServerConfiguration()
        configuration.webSocketPath = nil
        let config = configuration
        let server = try loop.runAndWait { try WebServer(loop: loop, configuration: config, delegate: delegate) }

        var first: StreamReader? = try StreamReader(port: server.port, token: "unused")
        XCTAssertTrue(first!.read { $0.components(separatedBy: ": keep-alive\n\n").count > 3 }, first!.text)
        XCTAssertEqual(get503(server.port), 503, "one client allowed")

        // Lines written to the log reach the client as they are.
        log.write("throwError", ["domain": "test", "code": 1, "message": "hello"])
        XCTAssertTrue(first!.read { $0.contains(#"data: {"ts":"#) && $0.contains(#""message":"hello"}"#) }, first!.text)

        first = nil  // closes its socket; no event follows, only keep-alives
        let deadline = Date().addingTimeInterval(5)
        var admitted = false
        while !admitted && Date() < deadline {
            let candidate = try StreamReader(port: server.port, token: "unused")
            admitted = candidate.read(until: { $0.contains("\r\n\r\n") }) && candidate.text.hasPrefix("HTTP/1.1 200")
            if !admitted { usleep(20_000) }
        }
        XCTAssertTrue(admitted, "the keep-alive found the closed client and freed its place")

        try loop.runAndWait {
            feed.stop()
            server.stop()
        }
        try loop.shutdown()
    }

    private func get503(_ port: Int) -> Int {
        let text = httpRequest(port: port, "GET", "/v1/events/stream")
        return Int(text.split(separator: " ").dropFirst().first ?? "") ?? 0
    }
}
