import Foundation
import Logging
import RoomKit
@testable import RoomKitBot
import RoomKitProtocol
import RoomKitTokens
import RoomKitTestSupport
import XCTest

/// Reads a `text/event-stream` answer from a raw socket, as a browser would.
final class StreamReader {
    let fd: Int32
    private(set) var text = ""

    init(port: Int, token: String) throws {
        fd = try XCTUnwrap(connectLoopback(port: port, receiveTimeout: 0.2))
        let request = "GET /v1/events/stream HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(token)\r\nAccept: text/event-stream\r\n\r\n"
        _ = request.withCString { send(fd, $0, strlen($0), 0) }
    }

    /// Reads until `condition(text)` holds or `timeout` passes.
    @discardableResult
    func read(until condition: (String) -> Bool, timeout: TimeInterval = 10) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        var buffer = [UInt8](repeating: 0, count: 65536)
        var bytes = Array(text.utf8)
        while !condition(text) {
            if Date() > deadline { return false }
            let n = recv(fd, &buffer, buffer.count, 0)
            if n > 0 {
                bytes += buffer[0..<n]
                text = String(decoding: bytes, as: UTF8.self)
            } else if n == 0 {
                return condition(text)
            }
        }
        return true
    }

    /// The `data:` payloads received so far, each one event-log line.
    var events: [String] {
        text.components(separatedBy: "\n\n").compactMap { message in
            message.split(separator: "\n").first { $0.hasPrefix("data: ") }.map { String($0.dropFirst(6)) }
        }
    }

    deinit { close(fd) }
}

final class DashboardTests: XCTestCase {
    private let controlToken = "dashboard-test-token-0123"

    private func startBot(_ harness: BotHarness, rooms: [String]) async throws -> BotRunner {
        var json = harness.standardConfig(rooms: rooms)
        if case .object(var fields) = json { fields["controlToken"] = .string(controlToken); json = .object(fields) }
        let path = try harness.writeConfig(json)
        var logger = Logger(label: "test.bot")
        logger.logLevel = .error
        let runner = try BotRunner(config: try BotConfig(path: path), logger: logger)
        try await runner.start()
        return runner
    }

    private func adminToken(_ harness: BotHarness) -> String {
        let now = Int64(Date().timeIntervalSince1970)
        return TokenSigner(secret: harness.secret).sign(TokenClaims(sub: "ops", room: "*", role: .admin, exp: now + 3600, iat: now))
    }

    private func get(_ port: Int, _ path: String, token: String?) -> (Int, String, String) {
        let text = httpRequest(port: port, "GET", path, token: token)
        let parts = text.components(separatedBy: "\r\n\r\n")
        let status = Int(text.split(separator: " ").dropFirst().first ?? "") ?? 0
        return (status, parts[0].lowercased(), parts.dropFirst().joined(separator: "\r\n\r\n"))
    }

    func testPage_loadsWithoutTheToken_butEveryDataRouteNeedsIt() async throws {
        let harness = try BotHarness()
        let runner = try await startBot(harness, rooms: ["lobby"])
        let port = try XCTUnwrap(runner.controlPort)

        let (status, head, body) = get(port, "/", token: nil)
        XCTAssertEqual(status, 200)
        XCTAssertTrue(head.contains("content-type: text/html"), head)
        XCTAssertTrue(head.contains("content-security-policy: default-src 'none'; script-src 'nonce-"), head)
        XCTAssertTrue(body.contains("<title>roombot dashboard</title>"))
        XCTAssertTrue(body.contains("const TOKEN_REQUIRED = true;"), "the page knows to ask for the token")
        XCTAssertFalse(body.contains("lobby"), "the page itself carries no data")
        XCTAssertFalse(body.contains("{{NONCE}}"))
        XCTAssertFalse(body.contains("http://") || body.contains("https://"), "self-contained: nothing from another origin")
        for path in ["/v1/rooms?limit=10", "/v1/events/stream", "/v1/rooms", "/v1/plugins"] {
            XCTAssertEqual(get(port, path, token: nil).0, 401, path)
            XCTAssertEqual(get(port, path, token: "wrong-token-wrong-token").0, 401, path)
        }
        XCTAssertEqual(get(port, "/v1/rooms?limit=10", token: controlToken).0, 200)
        // The fleet view reads /v1/fleet only in fleet mode (which needs the
        // token too, and answers 404 for a bot not in fleet mode).
        XCTAssertTrue(body.contains("const FLEET_MODE = false;") && body.contains(#"id="fleet-section" hidden"#))
        XCTAssertEqual(DashboardPage.html(nonce: "n", tokenRequired: true, fleetMode: true).contains("const FLEET_MODE = true;"), true)
        XCTAssertEqual(get(port, "/v1/fleet", token: nil).0, 401)
        XCTAssertEqual(get(port, "/v1/fleet", token: controlToken).0, 404)

        await runner.stop()
        try harness.close()
    }

    func testRoomsPage_filtersAndPagesOnTheServer_andThePlainListingKeepsItsShape() async throws {
        let harness = try BotHarness()
        let runner = try await startBot(harness, rooms: ["a1", "b3", "a2", "b1", "b2"])
        let port = try XCTUnwrap(runner.controlPort)

        var (status, _, body) = get(port, "/v1/rooms?offset=1&limit=2&filter=b", token: controlToken)
        XCTAssertEqual(status, 200, body)
        var page = try JSON.parse(body)
        XCTAssertEqual(page["total"], 5)
        XCTAssertEqual(page["matched"], 3)
        XCTAssertEqual(page["byReason"], ["LOGINED": 5])
        XCTAssertEqual(page["rooms"]?.arrayValue?.compactMap { $0["room"]?.stringValue }, ["b2", "b3"])
        let row = try XCTUnwrap(page["rooms"]?[0])
        XCTAssertEqual(row["reason"], "LOGINED")
        XCTAssertEqual(row["phase"], "connected")
        XCTAssertEqual(row["writable"], true)
        XCTAssertNotNil(row["lastEventTs"]?.int64Value, "the login raised events, so the room has a last event time")

        (status, _, body) = get(port, "/v1/rooms?filter=logined%20a", token: controlToken)
        page = try JSON.parse(body)
        XCTAssertEqual(page["rooms"]?.arrayValue?.compactMap { $0["room"]?.stringValue }, ["a1", "a2"], "all terms must match")
        XCTAssertEqual(page["limit"], 100)

        (status, _, body) = get(port, "/v1/rooms?limit=0", token: controlToken)
        XCTAssertEqual(status, 400)
        XCTAssertTrue(try JSON.parse(body)["message"]?.stringValue?.contains("limit") == true, body)
        XCTAssertEqual(get(port, "/v1/rooms?offset=-1", token: controlToken).0, 400)

        // Without paging parameters: CLI.md's array, with exactly its fields.
        (status, _, body) = get(port, "/v1/rooms", token: controlToken)
        let plain = try XCTUnwrap(try JSON.parse(body).arrayValue)
        XCTAssertEqual(plain.count, 5)
        XCTAssertEqual(plain.compactMap { $0.objectValue.map { Set($0.keys) } }.first,
                       ["room", "reason", "phase", "errorCode", "memberId", "members", "seq", "writable"])

        await runner.stop()
        try harness.close()
    }

    func testEventStream_deliversTheEventLogsLines_aKickOnce_asItHappens() async throws {
        let harness = try BotHarness()
        let runner = try await startBot(harness, rooms: ["lobby", "other"])
        let port = try XCTUnwrap(runner.controlPort)
        let stream = try StreamReader(port: port, token: controlToken)
        XCTAssertTrue(stream.read { $0.contains("roombot event stream") }, stream.text)
        let head = stream.text.components(separatedBy: "\r\n\r\n")[0].lowercased()
        XCTAssertTrue(head.hasPrefix("http/1.1 200"), head)
        XCTAssertTrue(head.contains("content-type: text/event-stream"), head)
        XCTAssertFalse(head.contains("content-length"), head)

        // A kick through roomd's admin API.
        let kick = httpRequest(port: harness.server.port, "POST", "/v1/admin/rooms/lobby/kick", token: adminToken(harness),
                               body: #"{"user":"bot-1","reason":"dashboard test"}"#)
        XCTAssertTrue(kick.contains(#""kicked":1"#), kick)
        let kickedOut = { (line: String) in line.contains(#""event":"roomStateChanged""#) && line.contains(#""reason":"KICK_OUT""#) }
        XCTAssertTrue(stream.read { _ in stream.events.contains(where: kickedOut) }, stream.text)

        // A later event marks the end of what the kick raised.
        let login = http(port, "POST", "/v1/rooms/extra/login", "{}", headers: ["Authorization: Bearer \(controlToken)"])
        XCTAssertEqual(login.0, 200, login.1)
        XCTAssertTrue(stream.read { _ in stream.events.contains { $0.contains(#""reason":"LOGINED""#) && $0.contains(#""room":"extra""#) } },
                      stream.text)
        XCTAssertEqual(stream.events.filter(kickedOut).count, 1, "one kick, one line")
        XCTAssertEqual(stream.events.filter { $0.contains(#""event":"kickedWithReason""#) }.count, 1)

        // The same lines, byte for byte, as the event log got.
        let log = fileText(harness.directory + "/events.ndjson") ?? ""
        for line in stream.events {
            XCTAssertTrue(log.contains(line + "\n"), "not in the event log: \(line)")
        }
        let paged = try JSON.parse(get(port, "/v1/rooms?filter=KICK_OUT", token: controlToken).2)
        XCTAssertEqual(paged["rooms"]?.arrayValue?.compactMap { $0["room"]?.stringValue }, ["lobby"])

        await runner.stop()
        XCTAssertTrue(stream.read { _ in false } == false)
        XCTAssertTrue(stream.text.contains(#""reason":"LOGOUT""#), "the stream ends after the bot's own logout lines")
        try harness.close()
    }

    func testEventStream_admitsThirtyTwoClients_andAClosedOneFreesItsPlace() async throws {
        let harness = try BotHarness()
        let runner = try await startBot(harness, rooms: ["lobby"])
        let port = try XCTUnwrap(runner.controlPort)
        var streams: [StreamReader] = []
        for _ in 0..<32 {
            let stream = try StreamReader(port: port, token: controlToken)
            XCTAssertTrue(stream.read { $0.contains("roombot event stream") }, stream.text)
            streams.append(stream)
        }
        let refused = get(port, "/v1/events/stream", token: controlToken)
        XCTAssertEqual(refused.0, 503, refused.2)
        XCTAssertTrue(refused.2.contains("too many event stream clients"), refused.2)

        // A closed client is noticed when a write to it fails: at the next
        // events (or keep-alive), so events are made until its place is free.
        streams.removeLast()  // closes its socket
        var admitted: StreamReader?
        for round in 0..<50 where admitted == nil {
            let login = http(port, "POST", "/v1/rooms/wake-\(round)/login", "{}", headers: ["Authorization: Bearer \(controlToken)"])
            XCTAssertEqual(login.0, 200, login.1)
            let candidate = try StreamReader(port: port, token: controlToken)
            if candidate.read(until: { $0.contains("\r\n\r\n") }), candidate.text.hasPrefix("HTTP/1.1 200") {
                admitted = candidate
            }
        }
        XCTAssertNotNil(admitted, "a place freed by a closed client is given to the next")

        // Every admitted client gets the same next event.
        let login = http(port, "POST", "/v1/rooms/extra/login", "{}", headers: ["Authorization: Bearer \(controlToken)"])
        XCTAssertEqual(login.0, 200, login.1)
        for stream in streams + [admitted].compactMap({ $0 }) {
            XCTAssertTrue(stream.read { _ in stream.events.contains { $0.contains(#""room":"extra""#) && $0.contains("LOGINED") } })
            XCTAssertEqual(stream.events.filter { $0.contains(#""room":"extra""#) && $0.contains(#""reason":"LOGINED""#) }.count, 1)
        }
        await runner.stop()
        try harness.close()
    }

    func testPlugins_reportMeanLatency_andWhyAPluginFailed() async throws {
        let harness = try BotHarness()
        let rewrite = try builtProduct("liburl-rewrite.so")
        try Data("not a shared library".utf8).write(to: URL(fileURLWithPath: harness.directory + "/libbroken.so"))
        _ = try harness.writeConfig(["manifestVersion": 1, "plugins": [
            ["name": "url-rewrite", "library": .string(rewrite), "abi": 1, "hooks": ["urlInterrupter"],
             "config": ["from": "http://", "to": "https://cdn.example/"]],
            ["name": "broken", "library": "libbroken.so", "abi": 1, "hooks": ["urlInterrupter"]],
        ]], name: "plugins.json")
        var json = harness.standardConfig(rooms: ["lobby"])
        if case .object(var fields) = json { fields["manifest"] = "plugins.json"; json = .object(fields) }
        let path = try harness.writeConfig(json)
        var logger = Logger(label: "test.bot")
        logger.logLevel = .critical
        let runner = try BotRunner(config: try BotConfig(path: path), logger: logger)
        try await runner.start()
        let port = try XCTUnwrap(runner.controlPort)
        let image = http(port, "POST", "/v1/rooms/lobby/images", #"{"uuid":"i1","url":"http://img/1.png","x":0,"y":0,"width":1,"height":1}"#)
        XCTAssertEqual(image.0, 200, image.1)

        let plugins = try XCTUnwrap(try JSON.parse(http(port, "GET", "/v1/plugins").1).arrayValue)
        let loaded = try XCTUnwrap(plugins.first { $0["name"] == "url-rewrite" })
        XCTAssertEqual(loaded["status"], "loaded")
        XCTAssertEqual(loaded["calls"], 1)
        XCTAssertGreaterThan(loaded["meanMicroseconds"]?.doubleValue ?? 0, 0, "one call was timed")
        XCTAssertEqual(loaded["message"], .null)
        let broken = try XCTUnwrap(plugins.first { $0["name"] == "broken" })
        XCTAssertEqual(broken["status"], "failed")
        XCTAssertFalse(broken["message"]?.stringValue?.isEmpty ?? true, "the dashboard can say why: \(broken)")

        await runner.stop()
        try harness.close()
    }

    /// Pure logic of the paged listing, at the scale the dashboard promises.
    func testRoomListing_pagesAHundredThousandRooms() throws {
        let rows = (0..<100_000).map { i in
            RoomRow(room: String(format: "room-%06d", (i * 7_919) % 100_000), reason: i % 10 == 0 ? "KICK_OUT" : "LOGINED",
                    phase: i % 10 == 0 ? "disconnected" : "connected", errorCode: 0, memberId: Int64(i), members: 1,
                    seq: 1, writable: true, lastEventTs: nil)
        }
        var listing = RoomListing()
        listing.offset = 99_950
        let started = Date()
        let page = listing.page(rows)
        let elapsed = Date().timeIntervalSince(started)
        XCTAssertEqual(page["matched"], 100_000)
        XCTAssertEqual(page["rooms"]?.arrayValue?.count, 50, "the last page is short")
        XCTAssertEqual(page["rooms"]?[0]?["room"], "room-099950")
        XCTAssertEqual(page["byReason"], ["KICK_OUT": 10_000, "LOGINED": 90_000])
        listing.offset = 0
        listing.filter = "kick_out"
        XCTAssertEqual(listing.page(rows)["matched"], 10_000)
        listing.offset = 200_000
        XCTAssertEqual(listing.page(rows)["rooms"]?.arrayValue?.count, 0, "past the end: an empty page, not an error")
        print("RoomListing: one page of 100,000 rooms in \(Int(elapsed * 1000)) ms")
    }
}
