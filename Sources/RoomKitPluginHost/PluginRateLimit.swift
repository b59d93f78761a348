import Foundation
import RoomKitProtocol
import RoomKitLoop

/// What an action past the budget returns (roomkit_plugin.h `ROOMKIT_ACTION_BUDGET`).
let actionBudgetExhausted: Int32 = -3

/// A token bucket: `rate` tokens a second up to `burst`. Counts what it
/// refuses, and says at most once a second that refusals should be reported.
/// Any thread.
final class TokenBucket: Sendable {
    private struct State {
        var tokens: Double
        var last: UInt64
        var refused = 0
        var lastReport: UInt64 = 0
    }

    enum Outcome: Equatable {
        /// Allowed; `refused` lines were refused since the last report (report them now; 0: nothing to say).
        case allowed(refusedBefore: Int)
        /// Refused; `report` is the count to report now (0: stay quiet this second).
        case refused(report: Int)
    }

    private let rate: Double
    private let burst: Double
    /// A pthread mutex (LockedValue), which ThreadSanitizer follows.
    private let state: LockedValue<State>

    init(rate: Int, burst: Int) {
        self.rate = Double(max(rate, 0))
        self.burst = Double(max(burst, 1))
        state = LockedValue(State(tokens: Double(max(burst, 1)), last: DispatchTime.now().uptimeNanoseconds))
    }

    func take(now: UInt64 = DispatchTime.now().uptimeNanoseconds) -> Outcome {
        state.withLock { s in
            if now > s.last {
                s.tokens = min(burst, s.tokens + Double(now - s.last) / 1e9 * rate)
                s.last = now
            }
            let reportDue = now &- s.lastReport >= 1_000_000_000
            if s.tokens >= 1 {
                s.tokens -= 1
                guard s.refused > 0, reportDue else { return .allowed(refusedBefore: 0) }
                defer { s.refused = 0; s.lastReport = now }
                return .allowed(refusedBefore: s.refused)
            }
            s.refused += 1
            guard reportDue else { return .refused(report: 0) }
            defer { s.refused = 0; s.lastReport = now }
            return .refused(report: s.refused)
        }
    }
}
