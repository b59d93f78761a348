import RoomKitLoop
import Foundation
import RoomKit
import RoomKitProtocol
import Synchronization

/// What the bot has seen, counted from its hosts' event streams
/// (`RoomHost.events()`): events per room, reasons, magix, and events/s.
/// Safe from any thread.
final class Stats: Sendable {
    struct RoomCount: Sendable {
        /// Which server the room is on ("main" or "canary").
        var server: String
        var events = 0
        var magix = 0
    }

    private struct State {
        var rooms: [String: RoomCount] = [:]
        var order: [String] = []
        var total = 0
        var magix = 0
        var reasons: [RoomReason: Int] = [:]
        /// (seconds since start, total) about every 100 ms, for events/s.
        var samples: [(at: Double, total: Int)] = [(0, 0)]
        var peak = 0.0
        /// Magix seqs received per room while tracking (the drop), with counts.
        var tracked: [String: [Int64: Int]]?
    }

    private let state = LockedValue(State())
    private let start = ContinuousClock.now

    private var now: Double {
        let (seconds, attoseconds) = (ContinuousClock.now - start).components
        return Double(seconds) + Double(attoseconds) / 1e18
    }

    /// Counts one event raised by the host of `server`.
    func record(_ event: RoomEvent, server: String) {
        let at = now
        state.withLock { state in
            state.total += 1
            if let room = event.room {
                if state.rooms[room] == nil {
                    state.rooms[room] = RoomCount(server: server)
                    state.order.append(room)
                }
                state.rooms[room]?.events += 1
            }
            switch event {
            case .roomStateChanged(_, let reason, _, _):
                state.reasons[reason, default: 0] += 1
            case .magix(let magix):
                state.magix += 1
                state.rooms[magix.room]?.magix += 1
                if state.tracked != nil { state.tracked?[magix.room, default: [:]][magix.seq, default: 0] += 1 }
            default:
                break
            }
            if at - (state.samples.last?.at ?? 0) >= 0.1 {
                state.samples.append((at, state.total))
                state.samples.removeAll { at - $0.at > 3 }
                state.peak = max(state.peak, Self.rate(state.samples, now: at, total: state.total, over: 1))
            }
        }
    }

    /// Events per second over the last two seconds.
    var rate: Double {
        let at = now
        return state.withLock { Self.rate($0.samples, now: at, total: $0.total, over: 2) }
    }

    private static func rate(_ samples: [(at: Double, total: Int)], now: Double, total: Int, over window: Double) -> Double {
        guard let first = samples.first(where: { now - $0.at <= window }), now - first.at > 0.05 else { return 0 }
        return Double(total - first.total) / (now - first.at)
    }

    var total: Int { state.withLock { $0.total } }
    var magix: Int { state.withLock { $0.magix } }
    var peak: Double { state.withLock { $0.peak } }
    var reasons: [RoomReason: Int] { state.withLock { $0.reasons } }
    /// Rooms in the order they first raised an event.
    var rooms: [(id: String, count: RoomCount)] {
        state.withLock { state in state.order.compactMap { id in state.rooms[id].map { (id, $0) } } }
    }

    /// The magix seqs recorded so far (while tracking), with how often each arrived.
    var trackedMagix: [String: [Int64: Int]] { state.withLock { $0.tracked ?? [:] } }

    /// Starts (or stops, and returns) recording which magix seqs arrive.
    @discardableResult
    func trackMagix(_ on: Bool) -> [String: [Int64: Int]] {
        state.withLock { state in
            defer { state.tracked = on ? [:] : nil }
            return state.tracked ?? [:]
        }
    }
}
