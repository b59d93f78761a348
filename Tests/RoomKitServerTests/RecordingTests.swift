import Foundation
import RoomKitProtocol
import XCTest

/// PROTOCOL.md §10 `GET /v1/rooms/{room}/recording`: NDJSON, a header with
/// the snapshot at `from`, then every event with from ≤ ts ≤ to, as members saw it.
final class RecordingTests: ServerTestCase {
    private let reader = makeToken(user: "viewer", room: "r1", role: .reader)

    /// The events of a small lesson in r1; returns what u2 received (every
    /// event but its own login's add and the magix not addressed to it).
    private func recordLesson(_ server: ServerHarness) throws -> (u1: RawClient, u2: RawClient, seen: [JSON]) {
        let (u1, _) = try server.join("r1", user: "u1", name: "Teacher")
        let (u2, _) = try server.join("r1", user: "u2")
        try u1.ok("setState", room: "r1", ["patch": ["globalState": ["topic": "fractions"]]])
        try u1.ok("magix", room: "r1", ["event": "hint", "payload": ["for": "u2"], "to": ["u2"]])
        try u1.ok("magix", room: "r1", ["event": "note", "payload": 1, "to": ["u3"]])
        try u1.ok("putScenes", room: "r1", ["dir": "/", "scenes": [["name": "p2"]]])
        try u1.ok("setExtraInfo", room: "r1", ["key": "k", "value": "v"])
        try u2.ok("setMemberState", room: "r1", ["memberState": ["hand": "up"]])
        try u1.waitFor("memberState", room: "r1")
        let seen = try ["state", "magix", "state", "extraInfo"].map { try u2.waitFor($0, room: "r1") }
        return (u1, u2, seen)
    }

    func testRecording_isNDJSONWithHeaderThenEveryEventAsMembersSawIt() throws {
        let server = try startServer()
        let (_, _, seen) = try recordLesson(server)
        let before = nowMilliseconds()
        let reply = try server.http("GET", "/v1/rooms/r1/recording", token: reader)
        XCTAssertEqual(reply.status, 200, reply.text)
        XCTAssertEqual(reply.headers["content-type"], "application/x-ndjson")
        XCTAssertTrue(reply.text.hasSuffix("\n"))
        let lines = reply.lines
        XCTAssertFalse(lines.contains { $0 == nil }, "every line is one JSON object")
        let header = try XCTUnwrap(lines.first ?? nil)
        let frames = lines.dropFirst().compactMap { $0 }
        XCTAssertEqual(header.string("room"), "r1")
        XCTAssertEqual(header.int("framesCount"), 8)
        XCTAssertEqual(frames.count, 8)
        let begin = try XCTUnwrap(header.int("beginTimestamp"))
        let end = try XCTUnwrap(header.int("endTimestamp"))
        XCTAssertTrue(begin <= end && abs(end - before) < 2000, "to defaults to now")
        // The snapshot at the room's creation: an empty new room.
        XCTAssertEqual(header["snapshot"], [
            "globalState": [:],
            "sceneState": ["scenePath": "/init", "scenes": [["name": "init", "ppt": nil, "images": []]], "index": 0],
            "broadcastState": ["mode": "freedom", "broadcasterId": nil],
            "members": [], "streams": [], "extraInfo": [:],
        ])
        XCTAssertEqual(frames.map { $0.int("seq") }, Array(1...8).map { Int64($0) })
        XCTAssertEqual(frames.map { $0.op }, ["userUpdate", "userUpdate", "state", "magix", "magix", "state",
                                              "extraInfo", "memberState"])
        var previous: Int64 = 0
        for frame in frames {
            let t = try XCTUnwrap(frame.int("t"))
            XCTAssertGreaterThanOrEqual(t, previous, "t is ms since beginTimestamp, in order")
            previous = t
            XCTAssertEqual(frame.string("room"), "r1")
        }
        // Each line is the push as members saw it, plus `t`.
        for push in seen {
            var line = try XCTUnwrap(frames.first { $0.int("seq") == push.int("seq") }?.objectValue)
            line["t"] = nil
            XCTAssertEqual(JSON.object(line), push)
        }
        // magix is recorded with its `to`, even one that reached nobody.
        XCTAssertEqual(frames[3]["to"], ["u2"])
        XCTAssertEqual(frames[4]["to"], ["u3"])
        XCTAssertEqual(frames[4].string("event"), "note")
        XCTAssertNil(frames[2]["to"])
        XCTAssertEqual(frames[0]["users"]?[0]?["name"], "Teacher")
    }

    func testRecording_window_snapshotIsTheStateBeforeFrom_framesWithinFromTo() throws {
        let server = try startServer()
        let (u1, _) = try server.join("r1", user: "u1")
        try u1.ok("setState", room: "r1", ["patch": ["globalState": ["step": 1]]])
        try u1.ok("setExtraInfo", room: "r1", ["key": "k", "value": "early"])
        Thread.sleep(forTimeInterval: 0.02)
        let from = nowMilliseconds()
        Thread.sleep(forTimeInterval: 0.02)
        try u1.ok("setState", room: "r1", ["patch": ["globalState": ["step": 2]]])
        try u1.ok("setMemberState", room: "r1", ["memberState": ["m": 1]])
        Thread.sleep(forTimeInterval: 0.02)
        let to = nowMilliseconds()
        Thread.sleep(forTimeInterval: 0.02)
        try u1.ok("setState", room: "r1", ["patch": ["globalState": ["step": 3]]])
        let reply = try server.http("GET", "/v1/rooms/r1/recording?from=\(from)&to=\(to)", token: reader)
        XCTAssertEqual(reply.status, 200, reply.text)
        let lines = reply.lines.compactMap { $0 }
        let header = try XCTUnwrap(lines.first)
        XCTAssertEqual(header.int("beginTimestamp"), from)
        XCTAssertEqual(header.int("endTimestamp"), to)
        XCTAssertEqual(header.int("framesCount"), 2)
        XCTAssertEqual(header["snapshot"]?["globalState"], ["step": 1])
        XCTAssertEqual(header["snapshot"]?["extraInfo"], ["k": "early"])
        XCTAssertEqual(header["snapshot"]?["members"]?[0]?["userId"], "u1")
        XCTAssertEqual(header["snapshot"]?["members"]?[0]?["memberState"], [:])
        XCTAssertEqual(lines.dropFirst().map { $0.int("seq") }, [4, 5])
        for frame in lines.dropFirst() {
            let t = try XCTUnwrap(frame.int("t"))
            XCTAssertTrue((0...(to - from)).contains(t), "t \(t) is relative to from")
        }
    }

    func testRecording_fromAtAnEventsTimestamp_includesThatEvent() throws {
        // A snapshot after every event, so the seek starts from a stored snapshot.
        let server = try startServer { $0.snapshotEvery = 1 }
        let (u1, _) = try server.join("r1", user: "u1")
        for step in 1...4 {
            Thread.sleep(forTimeInterval: 0.005)
            try u1.ok("setState", room: "r1", ["patch": ["globalState": ["step": .int(Int64(step))]]])
        }
        let full = try server.http("GET", "/v1/rooms/r1/recording", token: reader).lines.compactMap { $0 }
        XCTAssertEqual(full.dropFirst().map { $0.int("seq") }, [1, 2, 3, 4, 5],
                       "from defaults to the room's creation: its first event is a frame, not in the snapshot")
        XCTAssertEqual(full.first?["snapshot"]?["members"], [])
        let begin = try XCTUnwrap(full.first?.int("beginTimestamp"))
        let third = try XCTUnwrap(full.first { $0.int("seq") == 4 })
        let at = begin + (third.int("t") ?? 0)
        let window = try server.http("GET", "/v1/rooms/r1/recording?from=\(at)", token: reader).lines.compactMap { $0 }
        let expected = full.dropFirst().filter { begin + ($0.int("t") ?? 0) >= at }.map { $0.int("seq") }
        XCTAssertEqual(window.dropFirst().map { $0.int("seq") }, expected, "every event with ts >= from is a frame")
        XCTAssertTrue(expected.contains(4))
        let before = full.dropFirst().filter { begin + ($0.int("t") ?? 0) < at }.count - 1  // minus the login
        XCTAssertEqual(window.first?["snapshot"]?["globalState"], before > 0 ? ["step": .int(Int64(before))] : [:],
                       "the snapshot is the state before from")
    }

    func testRecording_errors_401_403_404_withCodeAndMessage() throws {
        let server = try startServer()
        _ = try server.join("r1", user: "u1")
        let path = "/v1/rooms/r1/recording"
        let cases: [(String?, Int)] = [
            (nil, 401),
            ("garbage", 401),
            (makeToken(user: "x", room: "r1", secret: "other"), 401),
            (makeToken(user: "x", room: "r1", ttl: -60), 401),
            (makeToken(user: "x", room: "r2"), 403),
        ]
        for (token, status) in cases {
            let reply = try server.http("GET", path, token: token)
            XCTAssertEqual(reply.status, status, "token \(token ?? "none"): \(reply.text)")
            XCTAssertNotNil(reply.json?.int("code"), reply.text)
            XCTAssertNotNil(reply.json?.string("message"), reply.text)
        }
        let unknown = try server.http("GET", "/v1/rooms/never-used/recording", token: makeToken(user: "x"))
        XCTAssertEqual(unknown.status, 404)
        XCTAssertNotNil(unknown.json?.int("code"))
        XCTAssertNotNil(unknown.json?.string("message"))
        for role in [TokenRole.reader, .writer, .admin] {
            XCTAssertEqual(try server.http("GET", path, token: makeToken(user: "x", room: "r1", role: role)).status, 200,
                           "any role may read the recording")
        }
        XCTAssertEqual(try server.http("GET", path, token: makeToken(user: "x", room: "*")).status, 200)
    }
}
