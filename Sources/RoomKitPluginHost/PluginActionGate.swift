import RoomKitLoop

/// Keeps one plugin's room actions from crowding the connection: at most
/// `window` of them are in flight at once; the rest wait here, in order, so
/// that the operator's requests and other plugins' actions interleave with
/// them instead of queuing behind thousands. Any thread.
final class PluginActionGate: Sendable {
    typealias Job = @Sendable () async -> Void

    private struct State {
        var inFlight = 0
        var waiting: [Job] = []
        var head = 0
    }

    private let window: Int
    /// A pthread mutex (LockedValue), which ThreadSanitizer follows; it
    /// reported Synchronization.Mutex's hand-offs between tasks as races.
    private let state = LockedValue(State())

    init(window: Int = 8) {
        self.window = max(window, 1)
    }

    /// Runs `job` now if the window has room, else after the jobs before it.
    func submit(_ job: @escaping Job) {
        let start = state.withLock { s -> Bool in
            if s.inFlight < window {
                s.inFlight += 1
                return true
            }
            s.waiting.append(job)
            return false
        }
        if start { launch(job) }
    }

    private func launch(_ job: @escaping Job) {
        Task {
            await job()
            let next = state.withLock { s -> Job? in
                guard s.head < s.waiting.count else {
                    s.inFlight -= 1
                    s.waiting.removeAll(keepingCapacity: true)
                    s.head = 0
                    return nil
                }
                defer { s.head += 1 }
                return s.waiting[s.head]
            }
            if let next { launch(next) }
        }
    }
}
