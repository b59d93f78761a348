import Foundation
import RoomKit
import RoomKitLoop
import RoomKitProtocol
import RoomKitTestSupport
import XCTest

/// A `SessionStore` lets a new `RoomHost` (a restarted process) continue the
/// sessions of the one before it. The "crash" is the old host's connection
/// vanishing (its proxy stops) without a logout.
final class SessionStoreTests: XCTestCase {
    private func magix(_ recorder: EventRecorder) -> [MagixEvent] {
        recorder.all.compactMap { if case .magix(let m) = $0 { return m }; return nil }
    }

    private func userUpdates(_ recorder: EventRecorder, of user: String) -> [UpdateType] {
        recorder.all.compactMap {
            if case .userUpdate(_, let type, let users) = $0, users.contains(where: { $0.userId == user }) { return type }
            return nil
        }
    }

    private func resyncs(_ recorder: EventRecorder) -> [ResyncEvent] {
        recorder.all.compactMap { if case .resync(let r) = $0 { return r }; return nil }
    }

    private func extendedData(_ recorder: EventRecorder, _ reason: RoomReason) -> [[String: JSON]] {
        recorder.all.compactMap {
            if case .roomStateChanged(_, reason, _, let data) = $0 { return data }
            return nil
        }
    }

    func testNewHostWithTheSameStore_resumesInvisibly_andRaisesTheMissedEventsOnceInOrder() async throws {
        var timing = EngineHarness.Timing()
        timing.heartbeatTimeout = .seconds(5)
        let harness = try EngineHarness(timing: timing)
        let store = InMemorySessionStore()
        let watcherEvents = EventRecorder()
        let watcher = try harness.host(viaProxy: false, recorder: watcherEvents)
        let watched = try await watcher.loginRoom("lobby", user: harness.user("watcher"), token: harness.token("watcher"))

        let first = try harness.host(viaProxy: true) { $0.sessionStore = store }
        let before = try await first.loginRoom("lobby", user: harness.user("bot"), token: harness.token("bot"))
        try await before.setGlobalState(["mine": 1])
        let memberId = try XCTUnwrap(before.content.memberId)
        await eventually(3, "the watcher sees the bot") { self.userUpdates(watcherEvents, of: "bot") == [.add] }
        await eventually(3, "the cursor is stored") { store.cursor(room: "lobby")?.snapshot.state.globalState["mine"] == 1 }
        XCTAssertEqual(store.cursor(room: "lobby")?.memberId, memberId)
        XCTAssertEqual(store.cursor(room: "lobby")?.user.id, "bot")

        harness.proxy.stop()  // the old process is gone: no logout, no further traffic
        var seqs: [Int64] = []
        for index in 0..<5 { seqs.append(try await watched.dispatchMagixEvent("tick", payload: .int(Int64(index)))) }
        let changeSeq = try await watched.setGlobalState(["while-away": true])
        let savesBefore = store.saveCount

        let events = EventRecorder()
        let second = try harness.host(viaProxy: false, recorder: events) { $0.sessionStore = store }
        let after = try await second.loginRoom("lobby", user: harness.user("bot"), token: harness.token("bot"))
        await eventually(3, "the missed events arrive") { self.magix(events).count == 5 }
        try await Task.sleep(for: .milliseconds(200))  // a duplicate would arrive now

        XCTAssertEqual(extendedData(events, .logined), [["recovered": true]])
        XCTAssertEqual(after.content.memberId, memberId, "the same session continues")
        XCTAssertEqual(magix(events).map(\.seq), seqs, "each missed event once, in order")
        XCTAssertEqual(magix(events).map(\.payload), (0..<5).map { JSON.int(Int64($0)) })
        XCTAssertTrue(magix(events).allSatisfy(\.replayed))
        XCTAssertEqual(after.globalState["while-away"], true)
        XCTAssertEqual(after.globalState["mine"], 1, "state from before the restart, restored from the store")
        XCTAssertEqual(resyncs(events), [])
        await eventually(3, "the store holds the new seq") { store.cursor(room: "lobby")?.seq == changeSeq }
        XCTAssertGreaterThan(store.saveCount, savesBefore)
        XCTAssertEqual(userUpdates(watcherEvents, of: "bot"), [.add], "the others saw nothing of the restart")

        try await watched.dispatchMagixEvent("live", payload: .null)
        await eventually(3) { self.magix(events).count == 6 }
        XCTAssertEqual(magix(events).last?.replayed, false)
        try await harness.close()
    }

    /// A resume that recovers everything in the same session leaves the
    /// stored cursor as it was: no save for it (after a roomd restart, every
    /// room resumes at once). One with a missed event saves the new seq.
    func testRecoveredResume_savesOnlyWhenTheCursorMoved() async throws {
        let harness = try EngineHarness()
        let store = InMemorySessionStore()
        let events = EventRecorder()
        let host = try harness.host(recorder: events) { $0.sessionStore = store }
        let other = try harness.host(viaProxy: false)
        let room = try await host.loginRoom("lobby", user: harness.user("a"), token: harness.token("a"))
        let otherRoom = try await other.loginRoom("lobby", user: harness.user("b"), token: harness.token("b"))
        await eventually(3) { room.roomMembers.count == 2 }
        await eventually(3, "the cursor is stored") { store.cursor(room: "lobby")?.seq == room.content.seq }
        try await Task.sleep(for: .milliseconds(100))
        let stored = try XCTUnwrap(store.cursor(room: "lobby"))
        let savesBefore = store.saveCount

        harness.proxy.setMode(.down)
        harness.proxy.cut()
        await eventually(3, "RECONNECTING") { events.reasons("lobby").last == "RECONNECTING 1002051" }
        harness.proxy.setMode(.pass)
        await eventually(3, "RECONNECTED") { events.reasons("lobby").last == "RECONNECTED 0" }
        try await Task.sleep(for: .milliseconds(200))
        XCTAssertEqual(store.saveCount, savesBefore, "nothing changed: nothing written")
        XCTAssertEqual(store.cursor(room: "lobby"), stored)

        harness.proxy.setMode(.down)
        harness.proxy.cut()
        await eventually(3, "RECONNECTING") { events.reasons("lobby").last == "RECONNECTING 1002051" }
        let missed = try await otherRoom.dispatchMagixEvent("while-away", payload: .null)
        harness.proxy.setMode(.pass)
        await eventually(3, "RECONNECTED") { events.reasons("lobby").last == "RECONNECTED 0" }
        await eventually(3, "the missed event's seq is stored") { store.cursor(room: "lobby")?.seq == missed }
        XCTAssertGreaterThan(store.saveCount, savesBefore)
        try await harness.close()
    }

    func testStoreSaves_areBatchedPerLoopTurn_notOnePerEvent() async throws {
        let harness = try EngineHarness()
        let store = InMemorySessionStore()
        let sender = try harness.host(viaProxy: false)
        let room = try await sender.loginRoom("burst", user: harness.user("sender"), token: harness.token("sender"))
        let events = EventRecorder()
        // The bot on a loop of its own, so the test can hold that loop while the burst queues up.
        let botLoop = try EventLoop(name: "test-bot")
        var configuration = RoomHostConfiguration(serverURL: "ws://127.0.0.1:\(harness.server.port)/v1/rooms")
        configuration.sessionStore = store
        let bot = try RoomHost(loop: botLoop, configuration: configuration)
        bot.addObserver { events.record($0) }
        let botRoom = try await bot.loginRoom("burst", user: harness.user("bot"), token: harness.token("bot"))
        await eventually(3) { store.cursor(room: "burst") != nil }
        let savesBefore = store.saveCount
        // Hold the bot's loop until every event is acknowledged, so the pushes wait in its socket together.
        let held = DispatchSemaphore(value: 0)
        _ = botLoop.execute { held.wait() }
        let count = 300
        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in 0..<count {
                group.addTask { _ = try await room.dispatchMagixEvent("burst", payload: .int(Int64(index))) }
            }
            try await group.waitForAll()
        }
        try await Task.sleep(for: .milliseconds(100))
        held.signal()
        await eventually(5) { self.magix(events).count == count }
        let lastSeq = try XCTUnwrap(magix(events).map(\.seq).max())
        await eventually(3, "the store holds the newest seq") {
            let stored = store.cursor(room: "burst")?.seq ?? 0
            return stored >= lastSeq && stored == botRoom.content.seq
        }
        XCTAssertEqual(magix(events).count, count, "each event raised once")
        XCTAssertEqual(Set(magix(events).map(\.seq)).count, count)
        let saves = store.saveCount - savesBefore
        XCTAssertGreaterThan(saves, 0)
        XCTAssertLessThan(saves, count / 2, "one save per loop turn carrying every changed cursor, not one per event")
        await bot.shutdown()
        try botLoop.shutdown()
        try await harness.close()
    }

    func testStoredSessionPastRetention_logsInFresh_andRaisesResyncWithTheSeqs() async throws {
        var timing = EngineHarness.Timing()
        timing.heartbeatTimeout = .milliseconds(400)
        timing.retention = .milliseconds(800)
        let harness = try EngineHarness(timing: timing)
        let store = InMemorySessionStore()
        let watcher = try harness.host(viaProxy: false)
        let watched = try await watcher.loginRoom("lobby", user: harness.user("watcher"), token: harness.token("watcher"))
        let first = try harness.host(viaProxy: true) { $0.sessionStore = store }
        let before = try await first.loginRoom("lobby", user: harness.user("bot"), token: harness.token("bot"))
        let oldMember = before.content.memberId
        await eventually(3) { store.cursor(room: "lobby") != nil }
        let stored = try XCTUnwrap(store.cursor(room: "lobby"))
        harness.proxy.stop()
        try await watched.setGlobalState(["gone": true])
        try await Task.sleep(for: .seconds(2))  // past heartbeat timeout and retention

        let events = EventRecorder()
        let second = try harness.host(viaProxy: false, recorder: events) { $0.sessionStore = store }
        let hostDelegate = GapDelegate(), roomDelegate = GapDelegate()
        second.add(delegate: hostDelegate)
        let stream = second.events()
        let after = try await second.loginRoom("lobby", user: harness.user("bot"), token: harness.token("bot"),
                                               delegate: roomDelegate)
        XCTAssertNotEqual(after.content.memberId, oldMember, "a new session")
        await eventually(3) { hostDelegate.resyncs.count == 1 && roomDelegate.resyncs.count == 1 }
        XCTAssertEqual(hostDelegate.resyncs, resyncs(events), "the host delegate hears it")
        XCTAssertEqual(roomDelegate.resyncs, resyncs(events), "the room delegate hears it")
        XCTAssertEqual(hostDelegate.logined, [["recovered": false]], "extendedData reaches onRoomStateChanged")
        var streamed: [ResyncEvent] = []
        for await event in stream {
            if case .resync(let gap) = event { streamed.append(gap); break }
        }
        XCTAssertEqual(streamed, resyncs(events), "the AsyncSequence carries it")
        XCTAssertEqual(extendedData(events, .logined), [["recovered": false]])
        let resync = resyncs(events)
        XCTAssertEqual(resync.count, 1)
        XCTAssertEqual(resync.first?.reason, .sessionExpired)
        XCTAssertEqual(resync.first?.lastAppliedSeq, stored.seq)
        XCTAssertEqual(resync.first?.resumedAtSeq, after.content.seq)
        XCTAssertEqual(after.globalState["gone"], true, "the snapshot was adopted")
        try await harness.close()
    }

    func testResumeWithEvictedEvents_keepsTheSession_adoptsTheSnapshot_andRaisesResync() async throws {
        var timing = EngineHarness.Timing()
        timing.heartbeatTimeout = .seconds(5)
        let harness = try EngineHarness(timing: timing) {
            $0.recoveryEvents = 3
            $0.recoveryWindow = .milliseconds(1)
        }
        let store = InMemorySessionStore()
        let watcher = try harness.host(viaProxy: false)
        let watched = try await watcher.loginRoom("lobby", user: harness.user("watcher"), token: harness.token("watcher"))
        let first = try harness.host(viaProxy: true) { $0.sessionStore = store }
        let before = try await first.loginRoom("lobby", user: harness.user("bot"), token: harness.token("bot"))
        let memberId = before.content.memberId
        await eventually(3) { store.cursor(room: "lobby") != nil }
        let stored = try XCTUnwrap(store.cursor(room: "lobby"))
        harness.proxy.stop()
        for index in 0..<10 {
            try await watched.dispatchMagixEvent("lost", payload: .int(Int64(index)))
            try await Task.sleep(for: .milliseconds(5))  // older than the 1 ms window
        }
        let latest = try await watched.setGlobalState(["after": 10])

        let events = EventRecorder()
        let second = try harness.host(viaProxy: false, recorder: events) { $0.sessionStore = store }
        let after = try await second.loginRoom("lobby", user: harness.user("bot"), token: harness.token("bot"))
        XCTAssertEqual(after.content.memberId, memberId, "the session is kept")
        XCTAssertEqual(extendedData(events, .logined), [["recovered": false]])
        XCTAssertEqual(resyncs(events), [ResyncEvent(room: "lobby", reason: .notRecovered, lastAppliedSeq: stored.seq, resumedAtSeq: latest)])
        XCTAssertEqual(magix(events).count, 0, "evicted events are not raised")
        XCTAssertEqual(after.globalState["after"], 10)
        try await harness.close()
    }

    func testReconnectFailed_raisesResync_andRecoveredIsReportedOnReconnected() async throws {
        let harness = try EngineHarness()
        let events = EventRecorder()
        let host = try harness.host(viaProxy: true, recorder: events) { $0.reconnectWindow = .milliseconds(800) }
        let room = try await host.loginRoom("lobby", user: harness.user("bot"), token: harness.token("bot"))
        host.simulateConnectionLoss()
        await eventually(5, "RECONNECTED") { self.extendedData(events, .reconnected).count == 1 }
        XCTAssertEqual(extendedData(events, .reconnected), [["recovered": true]])
        let applied = room.content.seq

        harness.proxy.stop()
        await eventually(5, "RECONNECT_FAILED") { !self.resyncs(events).isEmpty }
        XCTAssertEqual(resyncs(events), [ResyncEvent(room: "lobby", reason: .reconnectFailed, lastAppliedSeq: applied, resumedAtSeq: nil)])
        try await harness.close()
    }

    func testStoredSessionKickedMeanwhile_isRefused_thenTheHostLogsInFresh_andRaisesResyncResumeRefused() async throws {
        var timing = EngineHarness.Timing()
        timing.heartbeatTimeout = .seconds(5)
        let harness = try EngineHarness(timing: timing)
        let store = InMemorySessionStore()
        let first = try harness.host(viaProxy: true) { $0.sessionStore = store }
        _ = try await first.loginRoom("lobby", user: harness.user("bot"), token: harness.token("bot"))
        await eventually(3) { store.cursor(room: "lobby") != nil }
        let stored = try XCTUnwrap(store.cursor(room: "lobby"))
        harness.proxy.stop()
        // Another instance of the same user logs in fresh: the detached stored session is kicked (newest wins).
        let other = try harness.host(viaProxy: false)
        _ = try await other.loginRoom("lobby", user: harness.user("bot"), token: harness.token("bot"))

        let events = EventRecorder()
        let second = try harness.host(viaProxy: false, recorder: events) { $0.sessionStore = store }
        let room = try await second.loginRoom("lobby", user: harness.user("bot"), token: harness.token("bot"))
        XCTAssertEqual(events.reasons("lobby"), ["LOGINING 0", "LOGINED 0"],
                       "the refusal is not a LOGIN_FAILED: the host logs in fresh")
        XCTAssertNotEqual(room.content.memberId, stored.memberId)
        XCTAssertEqual(resyncs(events), [ResyncEvent(room: "lobby", reason: .resumeRefused, lastAppliedSeq: stored.seq,
                                                     resumedAtSeq: room.content.seq)])
        await eventually(3) { store.cursor(room: "lobby")?.memberId == room.content.memberId }
        try await harness.close()
    }
}

/// Counts what the delegates hear of continuity.
private final class GapDelegate: RoomDelegate, RoomHostDelegate, @unchecked Sendable {
    // @unchecked Sendable: guarded by lock.
    private let lock = NSLock()
    private var gaps: [ResyncEvent] = []
    private var loginData: [[String: JSON]] = []
    var resyncs: [ResyncEvent] { lock.withLock { gaps } }
    var logined: [[String: JSON]] { lock.withLock { loginData } }
    func fireResync(_ room: Room, event: ResyncEvent) { lock.withLock { gaps.append(event) } }
    func onRoomResync(_ event: ResyncEvent) { lock.withLock { gaps.append(event) } }
    func onRoomStateChanged(reason: RoomReason, errorCode: ErrorCode, extendedData: [String: JSON], roomID: String) {
        if reason == .logined { lock.withLock { loginData.append(extendedData) } }
    }
}
