import Foundation
import RoomKitLoop
import RoomKitProtocol
import Synchronization

/// The room content a `Room` caches: what the server last told it.
public struct RoomContent: Sendable, Hashable {
    // In an order that wastes no padding (a host keeps one per room): the
    // eight-byte fields, then the optional one (nine bytes), then the bytes.
    public var state = RoomState.initial
    public var members: [Member] = []
    public var streams: [MediaStream] = []
    public var extraInfo: [String: String] = [:]
    /// The newest room sequence number seen.
    public var seq: Int64 = 0
    public var errorCode: ErrorCode = .success
    /// Client-side zoom (the seed's `scale`); never sent to the server.
    public var zoomScale = 1.0
    /// This session's member ID (nil before the first login).
    public var memberId: Int64?
    public var writable = false
    public var phase: RoomPhase = .disconnected
    public var reason: RoomReason = .logout

    /// Own member state (the seed's `memberState`).
    public var memberState: [String: JSON] {
        members.first { $0.memberId == memberId }?.memberState ?? [:]
    }
}

/// One room of a `RoomHost`: a handle that stays valid across logouts and
/// re-logins of the same room ID.
///
/// Synchronous properties (`globalState`, `roomMembers`, ...) read a cache
/// under a lock and are safe from any thread; when a callback fires, the
/// cache already shows the new state. The `get…` async getters read on the
/// loop thread, after everything the loop has received so far. Actions are
/// `async throws` and return the event's sequence number once the server
/// has accepted it.
public final class Room: Sendable {
    /// The room ID.
    public let id: String
    // Inline `Mutex`es rather than `LockedValue` boxes: a host keeps one
    // `Room` per session (100,000 of them), and each box was two more heap
    // blocks (the box and its pthread mutex), about 300 bytes a room.
    private let cache = Mutex(RoomContent())
    private let listeners = Mutex<[String: [UUID: @Sendable (MagixEvent) -> Void]]>([:])
    private let delegateBox = Mutex<(any RoomDelegate)?>(nil)
    /// Weak: a `Room` handle may outlive its host (then every call throws).
    private weak let weakHost: RoomHost?

    init(id: String, host: RoomHost) {
        self.id = id
        self.weakHost = host
    }

    var host: RoomHost {
        get throws {
            guard let weakHost else { throw RoomError(code: .internalError, message: "the RoomHost of \(id) is gone") }
            return weakHost
        }
    }

    /// The room callbacks receiver (replaced by a later `loginRoom` only when one is given).
    public var delegate: (any RoomDelegate)? {
        get { delegateBox.withLock { $0 } }
        set { delegateBox.withLock { $0 = newValue } }
    }

    // MARK: Synchronous reads (any thread)

    /// A consistent copy of everything cached.
    public var content: RoomContent { cache.withLock { $0 } }
    public var state: RoomState { cache.withLock { $0.state } }
    public var globalState: [String: JSON] { cache.withLock { $0.state.globalState } }
    public var memberState: [String: JSON] { cache.withLock { $0.memberState } }
    public var roomMembers: [Member] { cache.withLock { $0.members } }
    public var broadcastState: BroadcastState { cache.withLock { $0.state.broadcastState } }
    public var sceneState: SceneState { cache.withLock { $0.state.sceneState } }
    public var zoomScale: Double { cache.withLock { $0.zoomScale } }
    public var phase: RoomPhase { cache.withLock { $0.phase } }
    public var reason: RoomReason { cache.withLock { $0.reason } }
    public var writable: Bool { cache.withLock { $0.writable } }
    public var streams: [MediaStream] { cache.withLock { $0.streams } }
    public var extraInfo: [String: String] { cache.withLock { $0.extraInfo } }
    public var memberId: Int64? { cache.withLock { $0.memberId } }
    public var seq: Int64 { cache.withLock { $0.seq } }

    /// `globalState` decoded as the host's registered custom type (or any `T`).
    public func globalState<T: Decodable>(as type: T.Type) throws -> T {
        try JSON.object(globalState).decode(type)
    }

    // MARK: Async getters (read on the loop)

    public func getRoomState() async throws -> RoomContent { try await (try host).loop.submit { self.content } }
    public func getGlobalState() async throws -> [String: JSON] { try await getRoomState().state.globalState }
    public func getMemberState() async throws -> [String: JSON] { try await getRoomState().memberState }
    public func getRoomMembers() async throws -> [Member] { try await getRoomState().members }
    public func getBroadcastState() async throws -> BroadcastState { try await getRoomState().state.broadcastState }
    public func getSceneState() async throws -> SceneState { try await getRoomState().state.sceneState }
    public func getRoomPhase() async throws -> RoomPhase { try await getRoomState().phase }
    public func getZoomScale() async throws -> Double { try await getRoomState().zoomScale }

    // MARK: Actions

    /// Merges `patch` into `globalState` (a `null` value deletes a key).
    @discardableResult
    public func setGlobalState(_ patch: [String: JSON]) async throws -> Int64 {
        try await (try host).request(.setState(patch: ["globalState": .object(patch)]), room: id)
    }

    /// Replaces scene state or broadcast state whole, or merges global state: a raw `setState` patch.
    @discardableResult
    public func setState(patch: [String: JSON]) async throws -> Int64 {
        try await (try host).request(.setState(patch: patch), room: id)
    }

    /// Merges `patch` into this member's state (`null` deletes a key).
    @discardableResult
    public func setMemberState(_ patch: [String: JSON]) async throws -> Int64 {
        try await (try host).request(.setMemberState(patch), room: id)
    }

    /// Sends a custom event to the other members (only to `to`, user IDs, when given).
    @discardableResult
    public func dispatchMagixEvent(_ event: String, payload: JSON, to: [String]? = nil) async throws -> Int64 {
        try await (try host).request(.magix(event: event, payload: payload, to: to), room: id)
    }

    /// Adds scenes to `dir`; every ppt `src` passes through the URL interrupters first.
    @discardableResult
    public func putScenes(dir: String, scenes: [Scene], index: Int? = nil) async throws -> Int64 {
        var rewritten = scenes
        for i in rewritten.indices {
            if let src = rewritten[i].ppt?.src {
                rewritten[i].ppt?.src = await (try host).interruptURL(src, room: id)
            }
        }
        return try await (try host).request(.putScenes(dir: dir, scenes: rewritten, index: index), room: id)
    }

    @discardableResult
    public func setScenePath(_ path: String) async throws -> Int64 {
        try await (try host).request(.setScenePath(path: path), room: id)
    }

    @discardableResult
    public func removeScenes(_ path: String) async throws -> Int64 {
        try await (try host).request(.removeScenes(path: path), room: id)
    }

    /// Inserts an image into the current scene; its `url` passes through the
    /// URL interrupters first. Returns the sequence number and the final URL.
    @discardableResult
    public func insertImage(_ image: Image) async throws -> (seq: Int64, url: String) {
        var image = image
        image.url = await (try host).interruptURL(image.url, room: id)
        let seq = try await (try host).request(.insertImage(image), room: id)
        return (seq, image.url)
    }

    @discardableResult
    public func setViewMode(_ mode: ViewMode) async throws -> Int64 {
        try await (try host).request(.setViewMode(mode), room: id)
    }

    @discardableResult
    public func publishStream(_ streamID: String, extraInfo: String? = nil) async throws -> Int64 {
        try await (try host).request(.publishStream(id: streamID, extraInfo: extraInfo), room: id)
    }

    @discardableResult
    public func unpublishStream(_ streamID: String) async throws -> Int64 {
        try await (try host).request(.unpublishStream(streamID: streamID), room: id)
    }

    @discardableResult
    public func setExtraInfo(key: String, value: String) async throws -> Int64 {
        try await (try host).request(.setExtraInfo(key: key, value: value), room: id)
    }

    /// Asks to write (true) or to be read-only (false); a reader token cannot write (1009003).
    public func setWritable(_ writable: Bool) async throws {
        _ = try await (try host).requestFields(.setWritable(writable), room: id)
    }

    /// Sets the client-side zoom (not sent to the server).
    public func setZoomScale(_ scale: Double) {
        cache.withLock { $0.zoomScale = scale }
    }

    // MARK: Magix listeners

    /// Calls `handler` for every `event` magix from another member, on the callback queue.
    /// Keep the token; `cancel()` removes the listener.
    public func addMagixEventListener(_ event: String, _ handler: @escaping @Sendable (MagixEvent) -> Void) -> MagixListener {
        let key = UUID()
        listeners.withLock { $0[event, default: [:]][key] = handler }
        return RegistrationToken { [weak self] in
            self?.listeners.withLock { _ = $0[event]?.removeValue(forKey: key) }
        }
    }

    // MARK: Engine side (loop thread)

    func update<Result>(_ change: (inout RoomContent) -> Result) -> Result {
        cache.withLock { change(&$0) }
    }

    func magixHandlers(for event: String) -> [@Sendable (MagixEvent) -> Void] {
        listeners.withLock { Array(($0[event] ?? [:]).values) }
    }
}

/// What `addMagixEventListener` returns: a `RegistrationToken`, whose
/// `cancel()` stops delivery to the listener (idempotent).
public typealias MagixListener = RegistrationToken
