import Foundation
import RoomKitLoop
import RoomKitProtocol

/// The host's listeners besides observers and streams: the host delegates
/// (weak, several), the app's common callbacks, and the URL-interrupter
/// chain. Thread-safe: everything is behind one lock, read by `emit` on the
/// loop and by `interruptURL` on any thread.
final class HostCallbacks: Sendable {
    /// A delegate held weakly (LiveKit's `room.add(delegate:)`).
    struct WeakDelegate {
        weak var value: (any RoomHostDelegate)?
    }

    /// One step of the URL chain.
    struct Interrupter {
        let id: UInt64
        let order: Int
        let rooms: [String]
        let body: @Sendable (String) async -> String
    }

    struct State {
        var delegates: [WeakDelegate] = []
        var common: (any CommonCallbacks)?
        var interrupters: [Interrupter] = []
        var nextID: UInt64 = 0
    }

    let state = LockedValue(State())

    /// The live delegates, in the order they were added, and the common
    /// callbacks, in one lock (once per event).
    var listeners: (delegates: [any RoomHostDelegate], common: (any CommonCallbacks)?) {
        state.withLock { state in
            if state.delegates.contains(where: { $0.value == nil }) { state.delegates.removeAll { $0.value == nil } }
            return (state.delegates.compactMap(\.value), state.common)
        }
    }
}

extension RoomHost {
    /// Adds a receiver of the host-wide callbacks (`onRoomStateChanged`,
    /// user/stream/extra-info updates, token expiry). Held weakly: a delegate
    /// that is released simply stops being called. Several may be added;
    /// each is called once per event, in the order they were added, on the
    /// callback queue (or the loop). Adding the same object twice is a no-op.
    public func add(delegate: any RoomHostDelegate) {
        callbacks.state.withLock { state in
            state.delegates.removeAll { $0.value == nil }
            guard !state.delegates.contains(where: { $0.value === delegate }) else { return }
            state.delegates.append(HostCallbacks.WeakDelegate(value: delegate))
        }
    }

    /// Removes a delegate added with `add(delegate:)`. Events already handed
    /// to the callback queue may still reach it.
    public func remove(delegate: any RoomHostDelegate) {
        callbacks.state.withLock { state in
            state.delegates.removeAll { $0.value == nil || $0.value === delegate }
        }
    }

    /// The app's common callbacks (`throwError`, `urlInterrupter`), held
    /// strongly as the seed's `commonCallbacks`. Only the app sets it: plugins
    /// hear `throwError` as observers and join the URL chain through
    /// `addURLInterrupter`, so setting this never silences them, nor they it.
    public var commonCallbacks: (any CommonCallbacks)? {
        get { callbacks.state.withLock { $0.common } }
        set { callbacks.state.withLock { $0.common = newValue } }
    }

    /// Adds a step to the URL chain that every URL the engine sends (image
    /// `url`, scene ppt `src`) passes through before it goes out. For an
    /// action in room R, the chain is the interrupters whose `rooms` globs
    /// (fnmatch: `*`, `lobby-*`) match R, in ascending `order` (ties: the
    /// order they were added), each given the previous one's output; then
    /// `commonCallbacks.urlInterrupter`. A step that cannot rewrite returns
    /// its input. Steps run off the loop, on the caller's task.
    /// Cancel the token to leave the chain.
    @discardableResult
    public func addURLInterrupter(order: Int = 0, rooms: [String] = ["*"],
                                  _ interrupter: @escaping @Sendable (_ url: String) async -> String) -> RegistrationToken {
        let id = callbacks.state.withLock { state -> UInt64 in
            state.nextID += 1
            state.interrupters.append(HostCallbacks.Interrupter(id: state.nextID, order: order, rooms: rooms, body: interrupter))
            return state.nextID
        }
        return RegistrationToken { [weak self] in
            self?.callbacks.state.withLock { $0.interrupters.removeAll { $0.id == id } }
        }
    }

    /// Runs `url` through the chain for `room` (see `addURLInterrupter`).
    public func interruptURL(_ url: String, room: String) async -> String {
        let (steps, common) = callbacks.state.withLock { state in
            (state.interrupters.filter { step in step.rooms.contains { RoomGlob.matches($0, room) } }, state.common)
        }
        let started = ContinuousClock.now
        var current = url
        for step in steps.sorted(by: { ($0.order, $0.id) < ($1.order, $1.id) }) {
            current = await step.body(current)
        }
        if let common { current = await common.urlInterrupter(current) }
        metrics.urlChain.recordInterval(since: started)
        return current
    }
}

/// Room-ID glob patterns (`*`, `lobby-*`, `room-?`), via fnmatch(3), as the
/// plugin manifest's `rooms` and `addURLInterrupter(rooms:)` use them.
public enum RoomGlob {
    /// Whether `room` matches `pattern`. Inlinable: plugin dispatch calls it
    /// per plugin per event.
    @inlinable
    public static func matches(_ pattern: String, _ room: String) -> Bool {
        // "*" (the default) matches every room: skip fnmatch on the per-event path.
        pattern == "*" || fnmatch(pattern, room, 0) == 0
    }
}
