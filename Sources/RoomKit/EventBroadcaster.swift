import Foundation
import RoomKitLoop
import Synchronization

/// What `addObserver`, `addURLInterrupter` and the like return: cancelling
/// it removes what was added. Dropping the token does not cancel it (an
/// observer added for the life of its host needs no token kept).
public final class RegistrationToken: Sendable {
    private let onCancel: LockedValue<(@Sendable () -> Void)?>

    init(_ onCancel: @escaping @Sendable () -> Void) { self.onCancel = LockedValue(onCancel) }

    /// Removes the registration. Idempotent; safe from any thread. Once it
    /// returns, the removed callback is not called again, except a call
    /// already running on another thread.
    public func cancel() {
        let body = onCancel.withLock { current -> (@Sendable () -> Void)? in
            defer { current = nil }
            return current
        }
        body?()
    }
}

/// The one fan-out of an event source (a `RoomHost`, a `Player`):
/// synchronous observers first, in the order they were added, then the
/// `AsyncStream` subscribers. Thread-safe; `yield` is called by the source's
/// loop thread, in order, so every observer and stream sees the same order.
///
/// The registry changes rarely and is read once per event, so `yield` reads
/// it without the lock: every change bumps `version` (under the lock), and
/// the yielding thread keeps a snapshot of the registry that it refreshes,
/// under the lock, only when the version moved. One atomic load per event
/// instead of a lock and two array copies.
final class EventBroadcaster<Event: Sendable>: @unchecked Sendable {
    // @unchecked Sendable: `state` is only touched under its lock, `version`
    // is atomic, and `snapshot` only by the one thread that yields.
    private struct State {
        var observers: [(id: UInt64, body: Observer)] = []
        var streams: [UInt64: AsyncStream<Event>.Continuation] = [:]
        var nextID: UInt64 = 0
        /// Set by `finish`: later subscriptions end at once.
        var finished = false
        /// Bumped by every change of `observers` or `streams`.
        var version: UInt64 = 1
    }

    /// What `yield` hands events to, as of `version`.
    private struct Snapshot {
        var version: UInt64 = 0
        var observers: [Observer] = []
        var streams: [AsyncStream<Event>.Continuation] = []
        /// How many of `observers` take the encoding.
        var encodedCount = 0
    }

    private let state = LockedValue(State())
    /// `State.version`, published (release) after each change, so that the
    /// yielding thread sees when its snapshot is stale without the lock.
    private let version = Atomic<UInt64>(1)
    /// The yielding thread's copy of the registry. No run-time exclusivity
    /// check: only that thread touches it, and `yield` copies it to a local
    /// before calling out (an observer may yield again, or change the registry).
    @exclusivity(unchecked) private var snapshot = Snapshot()

    /// A synchronous observer: of the event, or of the event and its one
    /// encoding (`EventEncoding`, shared by every observer of one yield).
    private enum Observer {
        case plain(@Sendable (Event) -> Void)
        case encoded(@Sendable (Event, EventEncoding) -> Void)
    }

    /// Adds a synchronous observer, called on the thread that yields (the loop).
    func addObserver(_ observer: @escaping @Sendable (Event) -> Void) -> RegistrationToken {
        add(.plain(observer))
    }

    /// Adds a synchronous observer of each event with its one encoding,
    /// called on the thread that yields (the loop), in order with the others.
    func addEncodedObserver(_ observer: @escaping @Sendable (Event, EventEncoding) -> Void) -> RegistrationToken {
        add(.encoded(observer))
    }

    private func add(_ observer: Observer) -> RegistrationToken {
        let id = change { state -> UInt64 in
            state.nextID += 1
            state.observers.append((state.nextID, observer))
            return state.nextID
        }
        return RegistrationToken { [weak self] in
            self?.change { $0.observers.removeAll { $0.id == id } }
        }
    }

    /// Changes the registry under the lock and publishes the new version.
    private func change<Result>(_ body: (inout State) -> Result) -> Result {
        state.withLock { state in
            let result = body(&state)
            state.version += 1
            version.store(state.version, ordering: .releasing)
            return result
        }
    }

    /// A new subscription keeping the newest `limit` events; after `finish`,
    /// a stream that ends at once.
    func stream(bufferingNewest limit: Int) -> AsyncStream<Event> {
        let (stream, continuation) = AsyncStream<Event>.makeStream(bufferingPolicy: .bufferingNewest(limit))
        let id = state.withLock { state -> UInt64 in
            state.nextID += 1
            return state.nextID
        }
        continuation.onTermination = { [weak self] _ in
            self?.change { _ = $0.streams.removeValue(forKey: id) }
        }
        let finished = change { state -> Bool in
            if !state.finished { state.streams[id] = continuation }
            return state.finished
        }
        if finished { continuation.finish() }
        return stream
    }

    /// Hands `event` to every observer, then to every stream. `encoding` is
    /// made at most once per yield, when an encoded observer exists; its
    /// bytes are written only when a sink reads them.
    ///
    /// An observer removed on another thread while this runs may still get
    /// this event (as with a lock: the removal came after the registry was read).
    func yield(_ event: Event, encoding: () -> EventEncoding) {
        let current = version.load(ordering: .acquiring)
        if snapshot.version != current {
            snapshot = state.withLock { state in
                let observers = state.observers.map(\.body)
                let encoded = observers.reduce(0) { count, observer in
                    if case .encoded = observer { return count + 1 }
                    return count
                }
                return Snapshot(version: state.version, observers: observers, streams: Array(state.streams.values),
                                encodedCount: encoded)
            }
        }
        let registry = snapshot
        var shared: EventEncoding?
        for observer in registry.observers {
            switch observer {
            case .plain(let body):
                body(event)
            case .encoded(let body):
                let encoded = shared ?? encoding()
                if shared == nil { encoded.soleSink = registry.encodedCount == 1 }
                shared = encoded
                body(event, encoded)
            }
        }
        for continuation in registry.streams { continuation.yield(event) }
    }

    /// Ends every stream; later subscriptions end at once. Observers stay.
    func finish() {
        let streams = change { state -> [AsyncStream<Event>.Continuation] in
            defer {
                state.streams.removeAll()
                state.finished = true
            }
            return Array(state.streams.values)
        }
        for continuation in streams { continuation.finish() }
    }
}
