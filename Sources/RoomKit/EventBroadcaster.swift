import Foundation
import RoomKitLoop

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
final class EventBroadcaster<Event: Sendable>: Sendable {
    private struct State {
        var observers: [(id: UInt64, body: Observer)] = []
        var streams: [UInt64: AsyncStream<Event>.Continuation] = [:]
        var nextID: UInt64 = 0
        /// Set by `finish`: later subscriptions end at once.
        var finished = false
    }

    private let state = LockedValue(State())
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
        let id = state.withLock { state -> UInt64 in
            state.nextID += 1
            state.observers.append((state.nextID, observer))
            return state.nextID
        }
        return RegistrationToken { [weak self] in
            self?.state.withLock { $0.observers.removeAll { $0.id == id } }
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
            self?.state.withLock { _ = $0.streams.removeValue(forKey: id) }
        }
        let finished = state.withLock { state -> Bool in
            if !state.finished { state.streams[id] = continuation }
            return state.finished
        }
        if finished { continuation.finish() }
        return stream
    }

    /// Hands `event` to every observer, then to every stream. `encoding` is
    /// made at most once per yield, when an encoded observer exists; its
    /// bytes are written only when a sink reads them.
    func yield(_ event: Event, encoding: () -> EventEncoding) {
        let (observers, streams) = state.withLock { ($0.observers, Array($0.streams.values)) }
        var shared: EventEncoding?
        for observer in observers {
            switch observer.body {
            case .plain(let body):
                body(event)
            case .encoded(let body):
                let encoded = shared ?? encoding()
                shared = encoded
                body(event, encoded)
            }
        }
        for continuation in streams { continuation.yield(event) }
    }

    /// Ends every stream; later subscriptions end at once. Observers stay.
    func finish() {
        let streams = state.withLock { state -> [AsyncStream<Event>.Continuation] in
            defer {
                state.streams.removeAll()
                state.finished = true
            }
            return Array(state.streams.values)
        }
        for continuation in streams { continuation.finish() }
    }
}
