import Foundation
import RoomKitProtocol
import XCTest

/// PROTOCOL.md §1 server limits: request rate (1009004, close 1008) and the
/// outbound queue (close 1013); and the connection limits of docs/PROTOCOL.md
/// (an upgrade beyond them: HTTP 503). Message size and pre-hello rules are
/// in ConnectionTests.
final class LimitTests: ServerTestCase {
    /// Sends `count` cheap requests back to back; returns their ids.
    private func burst(_ client: RawClient, _ count: Int) throws -> [Int64] {
        try (0..<count).map { _ in try client.sendRequest("logout", room: "nowhere") }
    }

    func testRequestsBeyondTheBucket_reply1009004() throws {
        let server = try startServer {
            $0.rateLimitBurst = 5
            $0.rateLimitPerSecond = 1
        }
        let client = try server.connect()  // hello took one token
        let ids = try burst(client, 10)
        let codes = try ids.map { try client.reply(to: $0).code }
        XCTAssertEqual(codes.prefix(4).map { $0 }, Array(repeating: 1_002_002, count: 4), "admitted requests run")
        XCTAssertEqual(codes.suffix(5).map { $0 }, Array(repeating: 1_009_004, count: 5), "then the bucket is empty")
        XCTAssertTrue(try client.isOpen())
        // Pings are not requests: still answered.
        try client.send(["op": "ping", "t": 5])
        XCTAssertEqual(try client.waitFor("pong").int("t"), 5)
    }

    func testBriefBurstThenCalm_isNotClosed() throws {
        let server = try startServer {
            $0.rateLimitBurst = 5
            $0.rateLimitPerSecond = 20
        }
        let client = try server.connect()
        let ids = try burst(client, 12)
        let codes = try ids.map { try client.reply(to: $0).code }
        XCTAssertTrue(codes.contains(1_009_004))
        // Then well under the rate for longer than the grace period.
        let calmUntil = Date().addingTimeInterval(2.5)
        while Date() < calmUntil {
            Thread.sleep(forTimeInterval: 0.1)
            XCTAssertEqual(try client.failure("logout", room: "nowhere"), 1_002_002)
        }
        XCTAssertTrue(try client.isOpen())
    }

    func testContinuousFlood_repliesRateLimitedThenCloses1008AfterTwoSeconds() throws {
        let server = try startServer {
            $0.rateLimitBurst = 5
            $0.rateLimitPerSecond = 5
        }
        let client = try server.connect()
        let start = Date()
        var firstRejection: Date?
        var ids: [Int64] = []
        while try client.isOpen(), Date().timeIntervalSince(start) < 4 {
            ids.append(try client.sendRequest("logout", room: "nowhere"))
            usleep(2_000)
            if firstRejection == nil,
               try client.history().contains(where: { $0.op == "reply" && $0.code == 1_009_004 }) {
                firstRejection = Date()
            }
        }
        XCTAssertEqual(try client.waitForClose(timeout: 1), 1008)
        let rejectedAt = try XCTUnwrap(firstRejection)
        let overFor = Date().timeIntervalSince(rejectedAt)
        XCTAssertGreaterThanOrEqual(overFor, 1.9, "closed before 2 s over the limit")
        XCTAssertLessThan(overFor, 3.0, "not closed within about 2 s over the limit")
        let codes = try client.history().filter { $0.op == "reply" }.compactMap(\.code)
        XCTAssertTrue(codes.contains(1_002_002))
        XCTAssertGreaterThan(codes.filter { $0 == 1_009_004 }.count, 100)
    }

    /// Not in PROTOCOL.md §1 (which limits requests): messages without `id`
    /// draw on a bucket of their own. Each is still answered (§2), but a
    /// connection continuously over it for 2 s is closed 1008, so a flood
    /// that never asks for a reply cannot keep the server answering.
    func testFloodOfPingsAndMalformedText_isAnswered_butClosed1008AfterTwoSecondsOverTheLimit() throws {
        let server = try startServer {
            $0.rateLimitBurst = 5
            $0.rateLimitPerSecond = 5
        }
        let client = try server.connect()
        for t in 0..<20 {
            try client.send(["op": "ping", "t": .int(Int64(t))])
        }
        XCTAssertEqual(try client.waitFor("pong").int("t"), 0)
        let deadline = Date().addingTimeInterval(3)
        while try client.history().filter({ $0.op == "pong" }).count < 20, Date() < deadline { usleep(10_000) }
        XCTAssertEqual(try client.history().filter { $0.op == "pong" }.count, 20, "every ping of a burst is answered")
        XCTAssertTrue(try client.isOpen(), "a short burst is answered and does not close")

        Thread.sleep(forTimeInterval: 1.2)  // calm for longer than an episode gap: the flood starts a new episode
        let start = Date()
        var sent = 0
        while try client.isOpen(), Date().timeIntervalSince(start) < 4 {
            try? client.sendText(sent % 2 == 0 ? #"{"op":"ping","t":1}"# : "garbage")
            sent += 1
            usleep(2_000)
        }
        XCTAssertEqual(try client.waitForClose(timeout: 1), 1008)
        let closedAfter = Date().timeIntervalSince(start)
        XCTAssertGreaterThanOrEqual(closedAfter, 1.9, "closed only after about 2 s continuously over")
        XCTAssertLessThan(closedAfter, 3.5)
        XCTAssertTrue(try client.history().contains { $0.op == "error" && $0.code == 1_009_001 }, "malformed text is answered")
        let overLimit = try server.http("GET", "/metrics").text.split(separator: "\n")
            .first { $0.hasPrefix("roomd_unsolicited_over_limit_total ") }.flatMap { Int($0.split(separator: " ")[1]) }
        XCTAssertGreaterThan(overLimit ?? 0, sent / 2, "counted in /metrics")
    }

    func testSlowConsumer_overTheOutboundLimit_isClosed1013_andStaysAMember() throws {
        let server = try startServer { $0.maxOutboundBytes = 4096 }
        // Read off the wire: the loop's lws 4.1 client would report 1013 as 1002.
        let slow = try WireSocket(port: server.port)
        slow.sendText(#"{"op":"hello","id":1}"#)
        XCTAssertTrue(slow.readText()?.contains(#""ok":true"#) ?? false)
        slow.sendText(#"{"op":"login","id":2,"room":"r1","token":"\#(makeToken(user: "u1"))","user":{"id":"u1"}}"#)
        XCTAssertTrue(slow.readText()?.contains(#""session""#) ?? false)
        let (writer, _) = try server.join("r1", user: "u2")
        let big = String(repeating: "z", count: 6000)
        try writer.ok("setState", room: "r1", ["patch": ["globalState": ["big": .string(big)]]])
        let (code, texts, _) = slow.readUntilClose()
        XCTAssertEqual(code, 1013)
        XCTAssertFalse(texts.contains { $0.contains("zzzz") }, "the oversized push was dropped, not sent")
        // Closed, not logged out: membership outlives the socket.
        try writer.expectNothing(for: 0.2)
        let rooms = try server.http("GET", "/v1/admin/rooms", token: makeToken(user: "ops", role: .admin))
        XCTAssertEqual(rooms.json, [["room": "r1", "members": 2, "seq": 3]])
    }

    // MARK: Connections (docs/PROTOCOL.md "Connection limits")

    /// The `/metrics` line that starts with `name` (with its labels), e.g. `roomd_connections 3`.
    private func metric(_ server: ServerHarness, _ name: String) throws -> String? {
        try server.http("GET", "/metrics").text.split(separator: "\n").first { $0.hasPrefix(name + " ") }.map(String.init)
    }

    /// Waits until the server counts `count` open WebSocket connections.
    private func waitForConnections(_ server: ServerHarness, _ count: Int, file: StaticString = #filePath,
                                    line: UInt = #line) throws {
        let deadline = Date().addingTimeInterval(5)
        // Gauges render as doubles (`roomd_connections 3.0`): compare the number.
        while try metric(server, "roomd_connections").flatMap({ Double($0.split(separator: " ").last ?? "") }) != Double(count) {
            guard Date() < deadline else {
                XCTFail("the server never counted \(count) connections", file: file, line: line)
                throw TestTimeout(description: "connection count")
            }
            usleep(5_000)
        }
    }

    func testUpgradeBeyondMaxConnections_isRefused503_openConnectionsKeepWorking_andAFreedSlotIsReused() throws {
        let server = try startServer { $0.maxConnections = 3 }
        let (member, _) = try server.join("r1", user: "u1")
        let (other, _) = try server.join("r1", user: "u2")
        let third = try server.connect()
        guard case .refused(let status, let text) = WireSocket.upgrade(port: server.port) else {
            return XCTFail("a fourth upgrade must be refused")
        }
        XCTAssertEqual(status, 503, text)
        XCTAssertTrue(text.contains("try again later"), text)
        XCTAssertEqual(try metric(server, #"roomd_connections_refused_total{limit="process"}"#),
                       #"roomd_connections_refused_total{limit="process"} 1"#)
        XCTAssertEqual(try server.http("GET", "/healthz").text, "ok", "plain HTTP is not counted")

        // The connections already open are unaffected.
        let seq = try XCTUnwrap(member.ok("magix", room: "r1", ["event": "e", "payload": 1]).int("seq"))
        XCTAssertEqual(try other.waitFor("magix", room: "r1").int("seq"), seq)
        try third.send(["op": "ping", "t": 7])
        XCTAssertEqual(try third.waitFor("pong").int("t"), 7)

        // Closing one frees its slot for the next upgrade.
        try third.close()
        try waitForConnections(server, 2)
        guard case .open(let next) = WireSocket.upgrade(port: server.port) else {
            return XCTFail("an upgrade into a freed slot must succeed")
        }
        next.sendText(#"{"op":"hello","id":1}"#)
        XCTAssertTrue(next.readText()?.contains(#""ok":true"#) ?? false)
        guard case .refused(503, _) = WireSocket.upgrade(port: server.port) else {
            return XCTFail("full again")
        }
        XCTAssertTrue(try member.isOpen() && other.isOpen())
    }

    func testUpgradeBeyondMaxConnectionsPerAddress_isRefused503_whileAnotherAddressGetsIn() throws {
        let server = try startServer { $0.maxConnectionsPerAddress = 2 }
        let first = try server.connect()
        _ = try server.connect()
        guard case .refused(let status, _) = WireSocket.upgrade(port: server.port) else {
            return XCTFail("a third upgrade from 127.0.0.1 must be refused")
        }
        XCTAssertEqual(status, 503)
        // Another loopback address is another peer.
        guard case .open(let elsewhere) = WireSocket.upgrade(port: server.port, from: "127.0.0.2") else {
            return XCTFail("an upgrade from 127.0.0.2 must succeed")
        }
        elsewhere.sendText(#"{"op":"hello","id":1}"#)
        XCTAssertTrue(elsewhere.readText()?.contains(#""ok":true"#) ?? false)
        XCTAssertEqual(try metric(server, #"roomd_connections_refused_total{limit="address"}"#),
                       #"roomd_connections_refused_total{limit="address"} 1"#)
        XCTAssertEqual(try metric(server, #"roomd_connections_refused_total{limit="process"}"#),
                       #"roomd_connections_refused_total{limit="process"} 0"#)
        try first.close()
        try waitForConnections(server, 2)
        guard case .open = WireSocket.upgrade(port: server.port) else {
            return XCTFail("127.0.0.1 has a free slot again")
        }
    }
}
