import Foundation
import RoomKit
import RoomKitProtocol
import RoomKitTestSupport
import XCTest

/// Counts host callbacks by "REASON code", thread-safe.
final class CountingHostDelegate: RoomHostDelegate, @unchecked Sendable {
    // @unchecked Sendable: guarded by lock.
    private let lock = NSLock()
    private var counts: [String: Int] = [:]
    func onRoomStateChanged(reason: RoomReason, errorCode: ErrorCode, extendedData: [String: JSON], roomID: String) {
        lock.withLock { counts["\(roomID) \(reason.rawValue)", default: 0] += 1 }
    }
    func count(_ key: String) -> Int { lock.withLock { counts[key] ?? 0 } }
    var total: Int { lock.withLock { counts.values.reduce(0, +) } }
}

/// Issue 13 §2: one route for events. Streams end after shutdown, observers
/// can be removed, host delegates are weak and several.
final class EventRouteTests: XCTestCase {
    func testEvents_subscribedAfterShutdown_endAtOnce() async throws {
        let harness = try EngineHarness()
        let host = try harness.host(viaProxy: false)
        try await host.loginRoom("lobby", user: harness.user("a"), token: harness.token("a"))
        let before = host.events()
        await host.shutdown()
        let after = host.events()
        let ended = LockedCounter()
        let consumers = [before, after].map { stream in
            Task {
                for await _ in stream {}
                ended.increment()
            }
        }
        await eventually(3, "both streams end") { ended.value == 2 }
        XCTAssertEqual(ended.value, 2, "a stream asked for after shutdown must end, not hang")
        for consumer in consumers { consumer.cancel() }
        try await harness.close()
    }

    func testAddObserver_cancellingItsToken_stopsTheObserver() async throws {
        let harness = try EngineHarness()
        let host = try harness.host(viaProxy: false)
        let removed = LockedCounter(), kept = LockedCounter()
        let token = host.addObserver { if case .roomStateChanged(_, .logined, _, _) = $0 { removed.increment() } }
        host.addObserver { if case .roomStateChanged(_, .logined, _, _) = $0 { kept.increment() } }
        try await host.loginRoom("r1", user: harness.user("a"), token: harness.token("a"))
        await eventually(3) { kept.value == 1 }
        XCTAssertEqual(removed.value, 1)
        token.cancel()
        token.cancel()  // idempotent
        try await host.loginRoom("r2", user: harness.user("a"), token: harness.token("a"))
        await eventually(3) { kept.value == 2 }
        try await Task.sleep(for: .milliseconds(100))
        XCTAssertEqual(removed.value, 1, "a removed observer hears nothing more")
        XCTAssertEqual(kept.value, 2)
        try await harness.close()
    }

    func testHostDelegates_severalAreEachCalledOnce_andAreHeldWeakly() async throws {
        let harness = try EngineHarness()
        let host = try harness.host(viaProxy: false)
        let first = CountingHostDelegate(), second = CountingHostDelegate()
        host.add(delegate: first)
        host.add(delegate: second)
        host.add(delegate: first)  // the same object twice is still one delegate
        weak var released: CountingHostDelegate?
        do {
            let temporary = CountingHostDelegate()
            host.add(delegate: temporary)
            released = temporary
        }
        XCTAssertNil(released, "the host must not keep a delegate alive")

        try await host.loginRoom("lobby", user: harness.user("a"), token: harness.token("a"))
        await eventually(3) { first.count("lobby LOGINED") >= 1 && second.count("lobby LOGINED") >= 1 }
        try await Task.sleep(for: .milliseconds(100))
        for delegate in [first, second] {
            XCTAssertEqual(delegate.count("lobby LOGINING"), 1)
            XCTAssertEqual(delegate.count("lobby LOGINED"), 1)
            XCTAssertEqual(delegate.total, 2)
        }

        host.remove(delegate: second)
        try await host.logoutRoom("lobby")
        await eventually(3) { first.count("lobby LOGOUT") == 1 }
        try await Task.sleep(for: .milliseconds(100))
        XCTAssertEqual(first.count("lobby LOGOUT"), 1)
        XCTAssertEqual(second.count("lobby LOGOUT"), 0, "a removed delegate hears nothing more")
        try await harness.close()
    }

    func testURLInterrupters_chainInOrderForTheRoomsTheyMatch_andLeaveWhenCancelled() async throws {
        let harness = try EngineHarness()
        let host = try harness.host(viaProxy: false)
        let calls = LockedCounter()
        host.addURLInterrupter(order: 20) { calls.increment(); return $0 + "+late" }
        let early = host.addURLInterrupter(order: 10, rooms: ["lobby-*", "hall"]) { calls.increment(); return $0 + "+early" }
        var url = await host.interruptURL("u", room: "lobby-1")
        XCTAssertEqual(url, "u+early+late")
        url = await host.interruptURL("u", room: "other")
        XCTAssertEqual(url, "u+late", "a step whose globs do not match the room is skipped")
        XCTAssertEqual(calls.value, 3)
        early.cancel()
        url = await host.interruptURL("u", room: "hall")
        XCTAssertEqual(url, "u+late")
        XCTAssertEqual(calls.value, 4)
        try await harness.close()
    }
}

/// A counter several threads may bump.
final class LockedCounter: @unchecked Sendable {
    // @unchecked Sendable: guarded by lock.
    private let lock = NSLock()
    private var count = 0
    func increment() { lock.withLock { count += 1 } }
    var value: Int { lock.withLock { count } }
}
