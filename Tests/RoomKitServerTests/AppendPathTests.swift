import Foundation
import RoomKitProtocol
@testable import RoomKitServer
import RoomKitSQLite
import XCTest

/// The append path of issue #26: magix requests read from their bytes, every
/// push stored as the bytes members receive (recordings splice `t` into
/// them), the schema migration for databases of the previous roomd, and the
/// group commit's deadline.
final class AppendPathTests: ServerTestCase {
    private let reader = makeToken(user: "viewer", room: "r1", role: .reader)

    private func database(_ server: ServerHarness) throws -> SQLiteDatabase {
        try SQLiteDatabase(path: (server.dataDirectory as NSString).appendingPathComponent("rooms.sqlite"))
    }

    /// The recording's frame lines as the previous roomd wrote them: each
    /// stored push parsed, `t` and `to` added, serialised with sorted keys.
    private func reencodedFrames(_ db: SQLiteDatabase, begin: Int64) throws -> [String] {
        var lines: [String] = []
        try db.run("SELECT ts, push, recipients FROM events WHERE room = 'r1' ORDER BY seq") { row throws(SQLiteError) in
            guard var line = (try? JSON.parse(row.bytes(1) ?? []))?.objectValue else { return }
            line["t"] = .int(row.int64(0) - begin)
            if let recipients = row.bytes(2) { line["to"] = try? JSON.parse(recipients) }
            lines.append(String(decoding: JSON.object(line).serialized(sortedKeys: true), as: UTF8.self))
        }
        return lines
    }

    private func recordingFrames(_ server: ServerHarness) throws -> (begin: Int64, frames: [String]) {
        let reply = try server.http("GET", "/v1/rooms/r1/recording", token: reader)
        XCTAssertEqual(reply.status, 200, reply.text)
        var lines = reply.text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        XCTAssertEqual(lines.last, "", "the body ends with a newline")
        lines.removeLast()
        let header = try JSON.parse(Array(lines.removeFirst().utf8))
        return (try XCTUnwrap(header["beginTimestamp"]?.int64Value), lines)
    }

    func testMagixWrittenInAnyForm_reachesMembersAsTheSameSortedPush_andRecordsAsBefore() throws {
        let server = try startServer()
        let (writer, _) = try server.join("r1", user: "u1")
        let (watcher, _) = try server.join("r1", user: "u2")
        try writer.waitFor("userUpdate", room: "r1")
        // Taken by the byte scanner (unsorted payload, then addressed), and
        // declined by it (spaces, a 7.0 id): the same checks and the same push.
        try writer.sendText(#"{"op":"magix","id":101,"room":"r1","event":"e","payload":{"b":1,"a":{"d":2,"c":3}}}"#)
        try writer.sendText(#"{"op":"magix","id":102,"room":"r1","event":"e","payload":{"a":1},"to":["u2"]}"#)
        try writer.sendText(#"{ "op" : "magix", "id" : 103.0, "room":"r1","event":"e","payload":{"b":1,"a":{"d":2,"c":3}}}"#)
        for id in [101, 102, 103] as [Int64] {
            XCTAssertEqual(try writer.reply(to: id), ["op": "reply", "id": .int(id), "ok": true, "seq": .int(id - 98)])
        }
        let pushes = try watcher.waitForPushes(3, room: "r1")
        XCTAssertEqual(pushes[0], ["op": "magix", "room": "r1", "seq": 3, "from": 1, "event": "e",
                                   "payload": ["b": 1, "a": ["d": 2, "c": 3]]])
        XCTAssertEqual(pushes[1]["to"], ["u2"])
        var third = try XCTUnwrap(pushes[2].objectValue)
        third["seq"] = 3
        XCTAssertEqual(JSON.object(third), pushes[0], "the decoded path pushes the same event")

        // Stored as sent: sorted keys at every level, whichever path wrote it.
        let db = try database(server)
        defer { db.close() }
        var stored: [String] = []
        try db.run("SELECT push FROM events WHERE room = 'r1' AND seq IN (3, 5) ORDER BY seq") { row throws(SQLiteError) in
            stored.append(row.text(0) ?? "")
        }
        XCTAssertEqual(stored, [#"{"event":"e","from":1,"op":"magix","payload":{"a":{"c":3,"d":2},"b":1},"room":"r1","seq":3}"#,
                                #"{"event":"e","from":1,"op":"magix","payload":{"a":{"c":3,"d":2},"b":1},"room":"r1","seq":5}"#])

        // A recording splices `t` into the stored bytes: what re-encoding wrote.
        let (begin, frames) = try recordingFrames(server)
        XCTAssertEqual(frames, try reencodedFrames(db, begin: begin))
        XCTAssertEqual(frames.count, 5)
    }

    func testMagixFastPath_refusesLikeTheDecodedPath() throws {
        let server = try startServer()
        let (writer, _) = try server.join("r1", user: "u1", role: .reader)
        try writer.sendText(#"{"op":"magix","id":7,"room":"r1","event":"e","payload":1}"#)
        XCTAssertEqual(try writer.reply(to: 7).int("code"), 1_009_003, "a read-only session")
        try writer.sendText(#"{"op":"magix","id":8,"room":"r2","event":"e","payload":1}"#)
        XCTAssertEqual(try writer.reply(to: 8).int("code"), 1_009_005, "not logged in to r2")
    }

    /// A database written by the previous roomd (schema 0: no `t_at`, pushes
    /// in dictionary order) is migrated in place: its rooms and events are
    /// kept, its recording bytes do not change, and new events are stored
    /// with their `t` offset.
    func testDatabaseOfThePreviousSchema_isMigrated_andRecordsTheSameBytes() throws {
        let directory = try temporaryDirectory()
        let old = try SQLiteDatabase(path: (directory as NSString).appendingPathComponent("rooms.sqlite"))
        let created = nowMilliseconds() - 5_000
        try old.execute("""
            PRAGMA journal_mode=WAL;
            CREATE TABLE rooms(room TEXT PRIMARY KEY, created INTEGER NOT NULL, seq INTEGER NOT NULL);
            CREATE TABLE events(room TEXT NOT NULL, seq INTEGER NOT NULL, ts INTEGER NOT NULL,
                push TEXT NOT NULL, mutation TEXT, recipients TEXT, PRIMARY KEY(room, seq)) WITHOUT ROWID;
            CREATE INDEX events_by_time ON events(room, ts);
            CREATE TABLE snapshots(room TEXT NOT NULL, seq INTEGER NOT NULL, ts INTEGER NOT NULL, body TEXT NOT NULL,
                PRIMARY KEY(room, seq)) WITHOUT ROWID;
            CREATE TABLE sessions(session TEXT PRIMARY KEY, room TEXT NOT NULL, user TEXT NOT NULL,
                member INTEGER NOT NULL, role TEXT NOT NULL, wants_writable INTEGER NOT NULL,
                token_exp INTEGER NOT NULL, detached_at INTEGER, visible INTEGER NOT NULL, ended_code INTEGER);
            CREATE TABLE fences(room TEXT NOT NULL, user TEXT NOT NULL, fence INTEGER NOT NULL,
                PRIMARY KEY(room, user)) WITHOUT ROWID;
            INSERT INTO rooms VALUES('r1', \(created), 2);
            INSERT INTO events VALUES('r1', 1, \(created + 10),
                '{"users":[{"userId":"u1","memberState":{},"memberId":1}],"type":"add","seq":1,"room":"r1","op":"userUpdate"}',
                NULL, NULL);
            INSERT INTO events VALUES('r1', 2, \(created + 20),
                '{"to":["u1"],"payload":{"b":1,"a":2},"seq":2,"room":"r1","op":"magix","from":1,"event":"old"}',
                NULL, '["u1"]');
            """)
        old.close()

        let server = try startServer { $0.dataDirectory = directory }
        let (writer, login) = try server.join("r1", user: "u2")
        XCTAssertEqual(login.int("seq"), 3, "the old events are kept")
        XCTAssertEqual(login.array("members").compactMap { $0.string("userId") }, ["u1", "u2"])
        XCTAssertEqual(try writer.ok("magix", room: "r1", ["event": "new", "payload": ["z": 1, "y": 2]]).int("seq"), 4)

        let db = try SQLiteDatabase(path: (directory as NSString).appendingPathComponent("rooms.sqlite"))
        defer { db.close() }
        XCTAssertEqual(try db.scalarText("PRAGMA user_version"), "1")
        XCTAssertEqual(try db.scalarText("SELECT COUNT(*) FROM sqlite_master WHERE name = 'events_by_time'"), "0",
                       "the time index is dropped")
        var offsets: [Bool] = []
        try db.run("SELECT t_at IS NOT NULL FROM events WHERE room = 'r1' ORDER BY seq") { row throws(SQLiteError) in
            offsets.append(row.int64(0) != 0)
        }
        XCTAssertEqual(offsets, [false, false, true, true], "old rows have no offset: their frames are re-encoded")
        let (begin, frames) = try recordingFrames(server)
        XCTAssertEqual(begin, created)
        XCTAssertEqual(frames, try reencodedFrames(db, begin: begin))
        XCTAssertEqual(frames[1], #"{"event":"old","from":1,"op":"magix","payload":{"a":2,"b":1},"room":"r1","seq":2,"t":20,"to":["u1"]}"#)
    }

    /// Without a time index, a slice's count comes from two binary searches
    /// over seq: the same as counting the rows, for every window.
    func testCountEvents_bySeqSearch_equalsCountingTheRows() throws {
        let store = try RoomStore(directory: try temporaryDirectory())
        defer { store.close() }
        let times: [Int64] = [100, 100, 105, 110, 110, 110, 111, 140, 200, 200]
        for (index, ts) in times.enumerated() {
            try store.append(StoredEvent(room: "r1", seq: Int64(index + 1), ts: ts, push: Array(#"{"op":"magix"}"#.utf8)))
        }
        try store.append(StoredEvent(room: "r2", seq: 1, ts: 150, push: Array(#"{"op":"magix"}"#.utf8)))
        try store.commit()
        let bounds: [Int64] = [.min, 0, 99, 100, 101, 105, 109, 110, 111, 112, 139, 140, 141, 199, 200, 201, .max]
        for from in bounds {
            for through in bounds {
                let expected = Int64(times.filter { $0 >= from && $0 <= through }.count)
                XCTAssertEqual(try store.countEvents(room: "r1", fromTime: from, throughTime: through), expected,
                               "\(from)...\(through)")
            }
        }
        XCTAssertEqual(try store.countEvents(room: "none", fromTime: .min, throughTime: .max), 0)
    }

    func testDatabaseOfANewerRoomd_isRefused_namingTheFile() throws {
        let directory = try temporaryDirectory()
        let newer = try SQLiteDatabase(path: (directory as NSString).appendingPathComponent("rooms.sqlite"))
        try newer.execute("PRAGMA user_version = 99")
        newer.close()
        XCTAssertThrowsError(try startServer { $0.dataDirectory = directory }) { error in
            let text = "\(error)"
            XCTAssertTrue(text.contains("rooms.sqlite") && text.contains("schema version 99"), text)
        }
    }

    /// `commitDeadline` 0: the open transaction commits before every next
    /// message, so each pipelined write is its own commit; every reply still
    /// comes after its commit, and the pushes arrive once, in order.
    func testCommitDeadlineZero_commitsEveryWriteBeforeTheNextMessage() throws {
        let server = try startServer {
            $0.rateLimitBurst = 10_000
            $0.commitDeadline = .zero
        }
        let (writer, _) = try server.join("r1", user: "u1")
        let (watcher, _) = try server.join("r1", user: "u2")
        try writer.waitFor("userUpdate", room: "r1")
        let before = try server.loop.runAndWait { server.server.metrics.commits }
        let count = 200
        var ids: [Int64] = []
        for index in 0..<count {
            ids.append(try writer.sendRequest("magix", room: "r1", ["event": "n", "payload": .int(Int64(index))]))
        }
        for (index, id) in ids.enumerated() {
            XCTAssertEqual(try writer.reply(to: id).int("seq"), Int64(index + 3))
        }
        XCTAssertEqual(try watcher.waitForPushes(count, room: "r1").map { $0["payload"]?.int64Value ?? -1 },
                       (0..<count).map(Int64.init))
        let commits = try server.loop.runAndWait { server.server.metrics.commits } - before
        XCTAssertEqual(commits, count, "one commit per write")
    }
}
