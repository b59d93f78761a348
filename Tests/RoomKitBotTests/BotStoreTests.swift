import Foundation
import Logging
import RoomKit
import RoomKitBot
import RoomKitProtocol
import RoomKitTestSupport
import XCTest

/// The bot's SQLite store on its own: migration from the JSON state file,
/// the room set, cursors across reopenings, the event log's cut-back.
final class BotStoreTests: XCTestCase {
    private var directory = ""
    private let logger = Logger(label: "test.store")

    override func setUpWithError() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("botstore-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    }

    override func tearDown() {
        try? FileManager.default.removeItem(atPath: directory)
    }

    func testLegacyStateFile_isImportedOnce_andNeverReadAgain() async throws {
        let legacy = directory + "/bot.state.json"
        try Data(#"{"rooms":["old-1","old-2"]}"#.utf8).write(to: URL(fileURLWithPath: legacy))
        let config = try BotConfig(json: ["server": "ws://127.0.0.1:1/v1/rooms", "user": ["id": "b"], "auth": ["secret": "s"],
                                          "rooms": ["lobby"]], path: directory + "/bot.json")
        XCTAssertEqual(config.stateFile, directory + "/bot.state.sqlite")
        let first = try BotRunner(config: config, logger: logger)
        XCTAssertEqual(first.store.joinedRooms, ["old-1", "old-2"])
        XCTAssertEqual(first.store.rooms(configured: config.rooms), ["lobby", "old-1", "old-2"])
        await first.stop()

        try Data(#"{"rooms":["changed-later"]}"#.utf8).write(to: URL(fileURLWithPath: legacy))
        let second = try BotRunner(config: config, logger: logger)
        XCTAssertEqual(second.store.joinedRooms, ["old-1", "old-2"], "the JSON file is read once")
        await second.stop()
    }

    func testRoomSet_configuredRoomsFollowTheConfig_joinedRoomsStay() throws {
        let store = try BotStore(path: directory + "/s.sqlite", logger: logger)
        XCTAssertEqual(store.rooms(configured: ["a", "b"]), ["a", "b"])
        try store.setJoined("c", true)
        try store.setJoined("a", true)  // already configured: stays configured
        XCTAssertEqual(store.rooms(configured: ["b"]), ["b", "c"], "a left the config; c was joined at run time")
        try store.setJoined("c", false)
        XCTAssertEqual(store.rooms(configured: ["b"]), ["b"])
        XCTAssertEqual(store.integrityCheck(), "ok")
    }

    func testCursors_surviveReopening_andRemovedOnesAreGone() throws {
        let path = directory + "/s.sqlite"
        let snapshot = RoomSnapshot(state: .initial, members: [Member(memberId: 3, userId: "b", name: "B")],
                                    streams: [], extraInfo: ["k": "v"])
        let cursor = SessionCursor(room: "lobby", session: "s-1", memberId: 3, seq: 41, user: LoginUser(id: "b", name: "B"),
                                   writable: true, snapshot: snapshot)
        do {
            let store = try BotStore(path: path, logger: logger)
            store.save(SessionStoreChanges(updated: [cursor, SessionCursor(room: "gone", session: "s-2", memberId: 1, seq: 1,
                                                                            user: LoginUser(id: "b"), writable: false,
                                                                            snapshot: RoomSnapshot(state: .initial))]))
            store.save(SessionStoreChanges(removed: ["gone"]))
            var moved = cursor
            moved.seq = 50  // only the seq moved (a magix event): the short update
            store.save(SessionStoreChanges(updated: [moved]))
            store.close()
        }
        var expected = cursor
        expected.seq = 50
        let reopened = try BotStore(path: path, logger: logger)
        XCTAssertEqual(reopened.cursor(room: "lobby"), expected)
        XCTAssertNil(reopened.cursor(room: "gone"))
    }

    /// A reopened store decodes no row until its room asks for it. A save
    /// before that cannot know what the row holds, so it writes the whole
    /// cursor; after `cursor(room:)` a seq-only save is the short update
    /// and keeps the snapshot the row holds.
    func testReopenedStore_decodesRowsOnDemand_andSavesBeforeThatWriteTheWholeCursor() throws {
        let path = directory + "/s.sqlite"
        let first = RoomSnapshot(state: .initial, members: [Member(memberId: 3, userId: "b")])
        let cursor = SessionCursor(room: "lobby", session: "s-1", memberId: 3, seq: 41, user: LoginUser(id: "b"),
                                   writable: true, snapshot: first)
        do {
            let store = try BotStore(path: path, logger: logger)
            store.save(SessionStoreChanges(updated: [cursor, SessionCursor(room: "other", session: "s-2", memberId: 1, seq: 1,
                                                                            user: LoginUser(id: "b"), writable: true,
                                                                            snapshot: first)]))
            store.close()
        }
        var changed = cursor
        changed.seq = 60
        changed.snapshot.extraInfo = ["k": "v"]
        do {
            let store = try BotStore(path: path, logger: logger)
            store.save(SessionStoreChanges(updated: [changed]))  // not read yet: the whole row
            XCTAssertEqual(store.cursor(room: "lobby"), changed)
            var moved = changed
            moved.seq = 61
            store.save(SessionStoreChanges(updated: [moved]))  // read: the short update
            XCTAssertEqual(store.cursor(room: "lobby"), moved)
            XCTAssertEqual(store.cursor(room: "other")?.seq, 1)
            store.close()
        }
        let reopened = try BotStore(path: path, logger: logger)
        XCTAssertEqual(reopened.cursor(room: "lobby")?.seq, 61)
        XCTAssertEqual(reopened.cursor(room: "lobby")?.snapshot.extraInfo, ["k": "v"])
    }

    /// Saves and reads of rooms that share their user and snapshot, and of
    /// rooms that do not, interleaved: each room keeps its own (the store
    /// remembers the last pair it encoded or decoded, and must never hand
    /// it to a room with another).
    func testRoomsSharingOrNotTheirUserAndSnapshot_eachKeepTheirOwn() throws {
        let path = directory + "/s.sqlite"
        let shared = RoomSnapshot(state: .initial, members: [Member(memberId: 1, userId: "b")])
        var busy = RoomState.initial
        busy.globalState = ["topic": "t"]
        let other = RoomSnapshot(state: busy, members: [Member(memberId: 2, userId: "b", name: "B")], extraInfo: ["k": "v"])
        func cursor(_ room: String, _ user: LoginUser, _ snapshot: RoomSnapshot, seq: Int64 = 1) -> SessionCursor {
            SessionCursor(room: room, session: "s-" + room, memberId: 1, seq: seq, user: user, writable: true, snapshot: snapshot)
        }
        let plain = LoginUser(id: "b")
        let named = LoginUser(id: "b", name: "B", payload: ["p": 1])
        let expected = [
            cursor("a", plain, shared), cursor("c", named, other), cursor("b", plain, shared),
            cursor("d", plain, other), cursor("e", named, shared),
        ]
        do {
            let store = try BotStore(path: path, logger: logger)
            store.save(SessionStoreChanges(updated: Array(expected[0..<3])))
            store.save(SessionStoreChanges(updated: Array(expected[3...])))
            XCTAssertEqual(store.cursor(room: "c"), expected[1])
            store.close()
        }
        let store = try BotStore(path: path, logger: logger)
        for room in ["a", "c", "b", "d", "e", "a", "e"] {
            XCTAssertEqual(store.cursor(room: room), expected.first { $0.room == room }, room)
        }
        // After the reads, seq-only saves are short updates of the right rows.
        store.save(SessionStoreChanges(updated: [cursor("c", named, other, seq: 9), cursor("a", plain, shared, seq: 8)]))
        store.close()
        let reopened = try BotStore(path: path, logger: logger)
        XCTAssertEqual(reopened.cursor(room: "c"), cursor("c", named, other, seq: 9))
        XCTAssertEqual(reopened.cursor(room: "a"), cursor("a", plain, shared, seq: 8))
        XCTAssertEqual(reopened.cursor(room: "d"), expected[3])
    }

    func testEventLog_isCutBackToTheLastCommit_onlyWhenItIsTheSameFile() throws {
        let path = directory + "/s.sqlite"
        let log = directory + "/events.ndjson"
        try Data("line 1\n".utf8).write(to: URL(fileURLWithPath: log))
        do {
            let store = try BotStore(path: path, logger: logger)
            store.reconcile(eventLog: log)
            store.follow(eventLogSize: { 7 })
            store.commitEventLog()
            store.close()
        }
        let handle = try XCTUnwrap(FileHandle(forWritingAtPath: log))
        handle.seekToEndOfFile()
        handle.write(Data("line 2 of a turn the crash interrupted\n".utf8))
        try handle.close()

        let reopened = try BotStore(path: path, logger: logger)
        reopened.reconcile(eventLog: log)
        XCTAssertEqual(try String(contentsOfFile: log, encoding: .utf8), "line 1\n", "the uncommitted line is cut")
        reopened.close()

        let other = directory + "/other.ndjson"
        try Data("someone else's log, longer than 7 bytes\n".utf8).write(to: URL(fileURLWithPath: other))
        let store = try BotStore(path: path, logger: logger)
        store.reconcile(eventLog: other)
        XCTAssertEqual(try String(contentsOfFile: other, encoding: .utf8), "someone else's log, longer than 7 bytes\n",
                       "another file is never cut")
        store.close()
    }
}
