import Foundation
import RoomKitLoop
import RoomKitProtocol
import XCTest

/// PROTOCOL.md §1 and §4: transport, `hello`, heartbeat and connection limits.
final class ConnectionTests: ServerTestCase {
    func testHello_repliesWithConnectionAndConfiguredTimes() throws {
        let server = try startServer {
            $0.heartbeatInterval = .milliseconds(2500)
            $0.heartbeatTimeout = .seconds(7)
            $0.sessionRetention = .seconds(42)
            $0.maxMessageBytes = 65_536
        }
        let client = try server.connect(hello: false)
        let before = nowMilliseconds()
        let reply = try client.hello()
        XCTAssertEqual(reply["ok"], true)
        XCTAssertTrue(reply.string("connection")?.hasPrefix("c-") ?? false, "\(reply)")
        XCTAssertEqual(reply.int("heartbeatInterval"), 2500)
        XCTAssertEqual(reply.int("heartbeatTimeout"), 7000)
        XCTAssertEqual(reply.int("sessionRetention"), 42_000)
        XCTAssertEqual(reply.int("maxMessageBytes"), 65_536)
        let serverTime = try XCTUnwrap(reply.int("serverTime"))
        XCTAssertTrue(abs(serverTime - before) < 2000, "serverTime \(serverTime) vs \(before)")
    }

    func testHello_defaultsMatchTheSpec() throws {
        let server = try startServer {
            $0.heartbeatInterval = .seconds(10)
            $0.heartbeatTimeout = .seconds(90)
        }
        let reply = try server.connect(hello: false).hello()
        XCTAssertEqual(reply.int("heartbeatInterval"), 10_000)
        XCTAssertEqual(reply.int("heartbeatTimeout"), 90_000)
        XCTAssertEqual(reply.int("sessionRetention"), 1_200_000)
        XCTAssertEqual(reply.int("maxMessageBytes"), 1_048_576)
    }

    func testHello_sentTwice_replies1009006_andTheConnectionStaysUsable() throws {
        let server = try startServer()
        let client = try server.connect()
        XCTAssertEqual(try client.failure("hello"), 1_009_006)
        XCTAssertTrue(try client.isOpen())
        let login = try client.login("r1", token: makeToken(user: "u1"), user: "u1")
        XCTAssertEqual(login["ok"], true)
    }

    func testPing_getsPongEchoingTAndServerTime() throws {
        let server = try startServer()
        let client = try server.connect()
        try client.send(["op": "ping", "t": 1_732_147_200_123])
        let pong = try client.waitFor("pong")
        XCTAssertEqual(pong.int("t"), 1_732_147_200_123)
        XCTAssertNotNil(pong.int("serverTime"))
        XCTAssertNil(pong["id"], "a ping is not a request")
        // Any JSON value of t is echoed as is.
        try client.send(["op": "ping", "t": ["any": [1, 2]]])
        XCTAssertEqual(try client.waitFor("pong")["t"], ["any": [1, 2]])
    }

    func testAnythingBeforeHello_closes1002() throws {
        let server = try startServer()
        let firstMessages: [String] = [
            #"{"op":"ping","t":1}"#,
            #"{"op":"login","id":1,"room":"r1","token":"x","user":{"id":"u1"}}"#,
            #"{"op":"frobnicate","id":1}"#,
            "not json",
            "[1,2,3]",
            #"{"op":"hello"}"#,  // hello without id is still not a valid hello
        ]
        for text in firstMessages {
            let client = try server.connect(hello: false)
            try client.sendText(text)
            XCTAssertEqual(try client.waitForClose(), 1002, "after \(text)")
            XCTAssertEqual(try client.drain(), [], "no reply before the close, after \(text)")
        }
    }

    func testHandshakeWithoutSubprotocol_isRefusedWithHTTP400() throws {
        let server = try startServer()
        let upgrade = "GET /v1/rooms HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
        let without = rawTCPExchange(port: server.port, Array((upgrade + "\r\n").utf8), timeout: 3)
        XCTAssertEqual(parseHTTPReply(without)?.status, 400, String(decoding: without, as: UTF8.self))
        let wrong = rawTCPExchange(port: server.port, Array((upgrade + "Sec-WebSocket-Protocol: room.v2\r\n\r\n").utf8),
                                   timeout: 3)
        XCTAssertEqual(parseHTTPReply(wrong)?.status, 400, String(decoding: wrong, as: UTF8.self))
        // The same request offering room.v1 is upgraded (101).
        let right = rawTCPExchange(port: server.port,
                                   Array((upgrade + "Sec-WebSocket-Protocol: room.v1\r\n\r\n").utf8), timeout: 0.5)
        XCTAssertTrue(String(decoding: right, as: UTF8.self).hasPrefix("HTTP/1.1 101"),
                      String(decoding: right, as: UTF8.self))
    }

    func testMessageOverMaxMessageBytes_closes1009() throws {
        let server = try startServer { $0.maxMessageBytes = 16_384 }
        let client = try server.connect()
        let payload = String(repeating: "x", count: 16_384)
        try client.sendText(#"{"op":"ping","t":""# + payload + #""}"#)
        XCTAssertEqual(try client.waitForClose(), 1009)
    }

    func testMessageAtMaxMessageBytes_isAccepted() throws {
        let server = try startServer { $0.maxMessageBytes = 16_384 }
        let client = try server.connect()
        let skeleton = #"{"op":"ping","t":""}"#
        let text = #"{"op":"ping","t":""# + String(repeating: "y", count: 16_384 - skeleton.utf8.count) + #""}"#
        XCTAssertEqual(text.utf8.count, 16_384)
        try client.sendText(text)
        XCTAssertEqual(try client.waitFor("pong").string("t")?.count, 16_384 - skeleton.utf8.count)
        XCTAssertTrue(try client.isOpen())
    }

    /// The server's lifecycle states: a stop while stopping only adds its
    /// completion, one after the stop finished completes at once, and every
    /// completion runs exactly once.
    func testStop_calledWhileStoppingAndAfter_runsEachCompletionOnce() throws {
        let server = try startServer()
        let client = try server.connect()
        let calls = LockedValue<[String]>([])
        try server.loop.runAndWait {
            server.server.stop(gracePeriod: .seconds(2)) { calls.withLock { $0.append("first") } }
            server.server.stop { calls.withLock { $0.append("second") } }
        }
        XCTAssertEqual(try client.waitForClose(), 1001)
        let deadline = Date().addingTimeInterval(5)
        while calls.withLock({ $0.count }) < 2 && Date() < deadline { usleep(5_000) }
        try server.loop.runAndWait { server.server.stop { calls.withLock { $0.append("after") } } }
        XCTAssertEqual(calls.withLock { $0 }, ["first", "second", "after"])
        XCTAssertEqual(server.port, 0, "no longer listening")
    }

    func testSilentConnection_isClosed1001AfterHeartbeatTimeout() throws {
        let server = try startServer {
            $0.heartbeatInterval = .milliseconds(200)
            $0.heartbeatTimeout = .milliseconds(600)
        }
        let client = try server.connect()
        let start = Date()
        XCTAssertEqual(try client.waitForClose(timeout: 3), 1001)
        let elapsed = Date().timeIntervalSince(start)
        XCTAssertGreaterThanOrEqual(elapsed, 0.45, "closed too early")
        XCTAssertLessThan(elapsed, 1.5, "closed too late")
    }

    func testPingingConnection_staysOpenPastTheHeartbeatTimeout() throws {
        let server = try startServer {
            $0.heartbeatInterval = .milliseconds(200)
            $0.heartbeatTimeout = .milliseconds(600)
        }
        let client = try server.connect()
        try client.startPinging(every: .milliseconds(200))
        Thread.sleep(forTimeInterval: 1.5)
        XCTAssertTrue(try client.isOpen())
        XCTAssertFalse(try client.history().filter { $0.op == "pong" }.isEmpty)
    }

    func testAnyMessage_countsAsLiveness() throws {
        let server = try startServer {
            $0.heartbeatInterval = .milliseconds(200)
            $0.heartbeatTimeout = .milliseconds(600)
        }
        let client = try server.connect()
        // No ping at all: requests (even failing ones) keep the connection alive.
        for _ in 0..<6 {
            Thread.sleep(forTimeInterval: 0.25)
            XCTAssertEqual(try client.failure("logout", room: "nowhere"), 1_002_002)
        }
        XCTAssertTrue(try client.isOpen())
    }

    /// Whether the transport reports inbound WebSocket control frames to the
    /// server. It does not: libwebsockets 4.1 answers a ping itself and tells
    /// no callback, so RoomKitLoop cannot surface it. Flip this when it can.
    static let transportReportsControlFrames = false

    func testWebSocketControlFrames_countAsLiveness() throws {
        try XCTSkipUnless(Self.transportReportsControlFrames,
                          "known gap (PROTOCOL.md §4.3): WebSocket pings are invisible to the server, "
                              + "so a client that only sends control frames is closed 1001")
        let server = try startServer {
            $0.heartbeatInterval = .milliseconds(200)
            $0.heartbeatTimeout = .milliseconds(600)
        }
        let socket = try WireSocket(port: server.port)
        socket.sendText(#"{"op":"hello","id":1}"#)
        XCTAssertTrue(socket.readText()?.contains(#""ok":true"#) ?? false)
        // Only WebSocket pings from now on: no room.v1 message at all.
        let until = Date().addingTimeInterval(1.5)
        while Date() < until {
            socket.sendPing()
            let (code, _, closed) = socket.readUntilClose(timeout: 0.2)
            XCTAssertFalse(closed, "closed with \(code.map(String.init) ?? "no code") while pinging")
            if closed { break }
        }
    }
}
