import Foundation
import RoomKit
import RoomKitLoop
import RoomKitProtocol
import RoomKitTestSupport
import XCTest

/// The engine's side of batched messages (docs/PROTOCOL.md "Batched
/// messages"): it asks by default, can be told not to, and a host that gets
/// batches raises the same events, in the same order, as one that does not.
final class BatchedMessagesTests: XCTestCase {
    /// Each host's magix events as (seq, payload n), in the order raised.
    private func magix(_ recorder: EventRecorder, _ room: String) -> [String] {
        recorder.all.compactMap {
            guard case .magix(let event) = $0, event.room == room else { return nil }
            return "\(event.seq) \(event.event) \(event.payload["n"]?.int64Value ?? -1)"
        }
    }

    func testBatchingHost_andPlainHost_raiseTheSameMagixEvents_inTheSameOrder() async throws {
        let harness = try EngineHarness()
        let room = "batched"
        let batchedEvents = EventRecorder(), plainEvents = EventRecorder()
        let batched = try harness.host(viaProxy: false, recorder: batchedEvents)
        let plain = try harness.host(viaProxy: false, recorder: plainEvents) { $0.batchesMessages = false }
        let sender = try harness.host(viaProxy: false)
        try await batched.loginRoom(room, user: harness.user("b"), token: harness.token("b"))
        try await plain.loginRoom(room, user: harness.user("p"), token: harness.token("p"))
        let sending = try await sender.loginRoom(room, user: harness.user("s"), token: harness.token("s"))

        let batchedStatus = try await harness.clientLoop.submit { batched.connectionStatus }
        let plainStatus = try await harness.clientLoop.submit { plain.connectionStatus }
        XCTAssertTrue(batchedStatus.receivesBatches, "the engine asks by default and roomd confirms")
        XCTAssertFalse(plainStatus.receivesBatches, "batchesMessages = false: today's protocol")

        // A burst: every request in flight at once, so roomd handles many in one turn.
        let count = 120
        try await withThrowingTaskGroup(of: Int64.self) { group in
            for n in 0..<count {
                group.addTask { try await sending.dispatchMagixEvent("tick", payload: ["n": .int(Int64(n))]) }
            }
            for try await _ in group {}
        }
        await eventually(10, "both hosts saw every event") {
            self.magix(batchedEvents, room).count == count && self.magix(plainEvents, room).count == count
        }
        let fromBatched = magix(batchedEvents, room), fromPlain = magix(plainEvents, room)
        XCTAssertEqual(fromBatched, fromPlain, "the same events in the same order")
        XCTAssertEqual(Set(fromPlain).count, count, "each once")
        await batched.shutdown()
        await plain.shutdown()
        await sender.shutdown()
        try await harness.close()
    }
}
