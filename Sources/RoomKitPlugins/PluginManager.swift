import RoomKitLoop
import CRoomKitPluginABI
import Dispatch
import Foundation
import Logging
import RoomKit
import RoomKitProtocol
import Synchronization

/// One plugin's line in `GET /v1/plugins`.
public struct PluginReport: Sendable, Hashable {
    public let name: String
    public let status: PluginStatus
    public let hooks: [String]
    public let calls: Int
    public let failures: Int
    /// Mean call latency in microseconds.
    public let meanMicroseconds: Double
    public let message: String?
}

/// Loads the manifest's plugins into a `RoomHost` and dispatches to them:
/// URL interrupters as a chain in `order`, `throwError` to every plugin that
/// declares it, room and magix events in order to the plugins whose `rooms`
/// globs match. A failing plugin is quarantined; rooms never wait for one.
///
/// Safe from any thread.
public final class PluginManager: PluginHostActions, CommonCallbacks, @unchecked Sendable {
    // @unchecked Sendable: mutable state lives in `runtimes`/`reports` (LockedValue),
    // except `turnBatch`, which only the loop thread touches (dispatch, flush).

    public let host: RoomHost
    private let logger: Logger
    private let runtimes = LockedValue<[PluginRuntime]>([])
    /// Failures at load time, kept for reports.
    private let failed = LockedValue<[String: (spec: PluginSpec, message: String)]>([:])
    /// Old runtimes replaced by a reload, kept alive (their code stays mapped).
    private let retired = LockedValue<[PluginRuntime]>([])
    private let listener: @Sendable (_ plugin: String, _ status: PluginStatus, _ message: String?) -> Void
    /// Loop thread only: the room events raised during the current loop turn,
    /// per plugin in order, posted as one batch per plugin when the turn ends.
    private var turnBatch: [(runtime: PluginRuntime, calls: [@Sendable () -> Void])] = []

    /// `onStatus` is called for every plugin status change (event log `plugin` lines).
    ///
    /// The manager owns its host, not the other way round: keep a reference
    /// to the manager for as long as its plugins should see events and
    /// rewrite URLs (a dropped manager's plugins simply stop being called).
    public init(host: RoomHost, logger: Logger = Logger(label: "roomkit.plugins"),
                onStatus: @escaping @Sendable (_ plugin: String, _ status: PluginStatus, _ message: String?) -> Void = { _, _, _ in }) {
        self.host = host
        self.logger = logger
        listener = onStatus
        // Through a forwarder that does not own the manager: the manager owns
        // the host, so the host holding it strongly would be a cycle.
        host.commonCallbacks = CommonCallbacksForwarder(self)
        host.addObserver { [weak self] event in self?.dispatch(event) }
    }

    /// Loads every enabled plugin of `manifest`. A plugin that fails to load
    /// is reported (`failed`) and skipped; the others load. Returns the errors.
    @discardableResult
    public func load(_ manifest: PluginManifest) -> [PluginLoadError] {
        var errors: [PluginLoadError] = []
        for spec in manifest.plugins where spec.enabled {
            do {
                try start(spec, path: nil)
            } catch {
                errors.append(error)
            }
        }
        return errors
    }

    private func start(_ spec: PluginSpec, path: String?) throws(PluginLoadError) {
        let mapped: MappedPlugin
        do {
            mapped = try PluginLoader.map(spec, path: path)
        } catch {
            noteFailure(spec, error.description)
            throw error
        }
        let runtime = PluginRuntime(mapped, actions: self) { [weak self] runtime, reason in
            self?.logger.warning("plugin quarantined", metadata: ["plugin": "\(runtime.spec.name)", "reason": "\(reason)"])
            self?.listener(runtime.spec.name, .quarantined, reason)
        }
        if let problem = runtime.start() {
            let error = PluginLoadError(plugin: spec.name, stage: .loadFailed, message: "plugins[\(spec.index)] (\(spec.name)): \(problem)")
            noteFailure(spec, error.description)
            throw error
        }
        runtimes.withLock { list in
            list.removeAll { $0.spec.name == spec.name }
            list.append(runtime)
            list.sort { ($0.spec.order, $0.spec.index) < ($1.spec.order, $1.spec.index) }
        }
        failed.withLock { _ = $0.removeValue(forKey: spec.name) }
        logger.info("plugin loaded", metadata: ["plugin": "\(spec.name)", "library": "\(mapped.mappedPath)"])
        listener(spec.name, .loaded, nil)
    }

    private func noteFailure(_ spec: PluginSpec, _ message: String) {
        failed.withLock { $0[spec.name] = (spec, message) }
        logger.error("plugin failed to load", metadata: ["plugin": "\(spec.name)", "error": "\(message)"])
        listener(spec.name, .failed, message)
    }

    /// Loads the (changed) library of `name` beside the running one, switches
    /// dispatch to it, then unloads the old instance after its queued calls.
    /// The old code stays mapped; no room is touched. `spec` may carry a new config.
    public func reload(_ spec: PluginSpec) throws {
        let copy = try PluginLoader.sideBySideCopy(of: spec.library)
        let old = runtimes.withLock { $0.first { $0.spec.name == spec.name } }
        try start(spec, path: copy)
        if let old {
            old.stop()
            retired.withLock { $0.append(old) }
        }
    }

    /// Unloads every plugin: on_unload runs after each one's queued calls.
    /// Waits at most `wait` per plugin: a stuck plugin (e.g. quarantined while
    /// hanging) is left behind with a warning; its code stays mapped.
    public func unloadAll(wait: Duration = .seconds(1)) {
        let all = runtimes.withLock { list -> [PluginRuntime] in defer { list.removeAll() }; return list }
        for runtime in all {
            runtime.stop()
            let drained = DispatchSemaphore(value: 0)
            runtime.queue.async { drained.signal() }
            let millis = Int(wait.components.seconds * 1000 + wait.components.attoseconds / 1_000_000_000_000_000)
            if drained.wait(timeout: .now() + .milliseconds(millis)) == .timedOut {
                logger.warning("plugin did not finish its calls; leaving it", metadata: ["plugin": "\(runtime.spec.name)"])
            }
            listener(runtime.spec.name, .unloaded, nil)
        }
        retired.withLock { $0.append(contentsOf: all) }
    }

    /// Every plugin's status and counters (`GET /v1/plugins`).
    public var reports: [PluginReport] {
        var result = runtimes.withLock { list in
            list.map { runtime -> PluginReport in
                let counters = runtime.state.withLock { $0 }
                return PluginReport(name: runtime.spec.name, status: counters.status,
                                    hooks: runtime.spec.hooks.map(\.rawValue).sorted(), calls: counters.calls,
                                    failures: counters.failures,
                                    meanMicroseconds: counters.calls == 0 ? 0 : Double(counters.totalNanoseconds) / Double(counters.calls) / 1000,
                                    message: counters.reason)
            }
        }
        for (_, entry) in failed.withLock({ $0 }) {
            result.append(PluginReport(name: entry.spec.name, status: .failed, hooks: entry.spec.hooks.map(\.rawValue).sorted(),
                                       calls: 0, failures: 0, meanMicroseconds: 0, message: entry.message))
        }
        return result.sorted { $0.name < $1.name }
    }

    private var active: [PluginRuntime] { runtimes.withLock { $0.filter(\.isActive) } }

    // MARK: Dispatch

    /// Room and magix events, on the loop thread, in the order raised.
    private func dispatch(_ event: RoomEvent) {
        if case .throwError(let domain, let code, let message) = event {
            flushTurn()  // keep the order of what the plugins hear
            return throwError(domain: domain, code: code, message: message)
        }
        guard let room = event.room, let kind = Self.kind(of: event) else { return }
        let payload = JSON.object(event.logFields).jsonString
        let isMagix = kind == ROOMKIT_ROOM_MAGIX
        for runtime in active {
            let spec = runtime.spec
            guard spec.hooks.contains(.room) || (isMagix && spec.hooks.contains(.magix)) else { continue }
            guard spec.rooms.contains(where: { Glob.matches($0, room) }) else { continue }
            // Kinds added in ABI 1.1 reach only plugins built against 1.1 or later.
            if kind == ROOMKIT_ROOM_RESYNC && runtime.descriptor.pointee.abi_minor < 1 { continue }
            guard let call = runtime.roomEventCall(kind: Int32(kind.rawValue), room: room, payload: payload) else { continue }
            if turnBatch.isEmpty, !host.loop.execute({ [weak self] in self?.flushTurn() }) {
                runtime.post(call)  // the loop is shutting down: no turn end to wait for
                continue
            }
            if let index = turnBatch.firstIndex(where: { $0.runtime === runtime }) {
                turnBatch[index].calls.append(call)
            } else {
                turnBatch.append((runtime, [call]))
            }
        }
    }

    /// Posts the current turn's room events: one queue hop per plugin per
    /// loop turn instead of one per event. Loop thread only.
    private func flushTurn() {
        let batch = turnBatch
        turnBatch.removeAll(keepingCapacity: true)
        for (runtime, calls) in batch { runtime.post(batch: calls) }
    }

    /// Fans a player event out to plugins declaring `player`.
    public func dispatchPlayerEvent(kind: Int32, room: String, payload: JSON) {
        let text = payload.jsonString
        for runtime in active where runtime.spec.hooks.contains(.player) {
            guard runtime.spec.rooms.contains(where: { Glob.matches($0, room) }) else { continue }
            runtime.playerEvent(kind: kind, room: room, payload: text)
        }
    }

    public func throwError(domain: String, code: ErrorCode, message: String) {
        for runtime in active where runtime.spec.hooks.contains(.throwError) {
            runtime.throwError(domain: domain, code: Int64(code.rawValue), message: message)
        }
    }

    /// The URL chain: each interrupter in `order` gets the previous output; a
    /// failure (timeout, NULL, invalid UTF-8) leaves that step's input unchanged.
    public func urlInterrupter(_ url: String) async -> String {
        var current = url
        for runtime in active where runtime.spec.hooks.contains(.urlInterrupter) {
            let input = current
            // Off the caller's thread: the step may block until its timeout.
            let output = await withCheckedContinuation { (continuation: CheckedContinuation<String?, Never>) in
                DispatchQueue.global().async { continuation.resume(returning: runtime.interrupt(input)) }
            }
            if let output { current = output }
        }
        return current
    }

    static func kind(of event: RoomEvent) -> roomkit_room_event_kind? {
        switch event {
        case .roomStateChanged: return ROOMKIT_ROOM_STATE_CHANGED
        case .phaseChanged: return ROOMKIT_ROOM_PHASE_CHANGED
        case .roomStateModified: return ROOMKIT_ROOM_STATE_MODIFIED
        case .beingAbleToCommitChange: return ROOMKIT_ROOM_WRITABLE_CHANGED
        case .disconnectWithError: return ROOMKIT_ROOM_DISCONNECTED
        case .kickedWithReason: return ROOMKIT_ROOM_KICKED
        case .catchErrorWhenAppendFrame: return ROOMKIT_ROOM_APPEND_FRAME_ERROR
        case .magix: return ROOMKIT_ROOM_MAGIX
        case .userUpdate: return ROOMKIT_ROOM_USER_UPDATE
        case .streamUpdate: return ROOMKIT_ROOM_STREAM_UPDATE
        case .extraInfoUpdate: return ROOMKIT_ROOM_EXTRA_INFO_UPDATE
        case .tokenWillExpire: return ROOMKIT_ROOM_TOKEN_WILL_EXPIRE
        case .resync: return ROOMKIT_ROOM_RESYNC
        case .throwError: return nil
        }
    }

    // MARK: PluginHostActions (any thread)

    func pluginLog(_ plugin: String, level: Int32, _ message: String) {
        let metadata: Logger.Metadata = ["plugin": "\(plugin)"]
        switch level {
        case 0: logger.debug("\(message)", metadata: metadata)
        case 1: logger.info("\(message)", metadata: metadata)
        case 2: logger.warning("\(message)", metadata: metadata)
        default: logger.error("\(message)", metadata: metadata)
        }
    }

    private func act(_ plugin: String, room: String, _ what: String, _ body: @escaping @Sendable (Room) async throws -> Void) -> Bool {
        guard let handle = host.room(room) else { return false }
        let logger = self.logger
        Task {
            do {
                try await body(handle)
            } catch {
                logger.warning("plugin action failed", metadata: ["plugin": "\(plugin)", "action": "\(what)", "room": "\(room)", "error": "\(error)"])
            }
        }
        return true
    }

    func pluginDispatchMagix(_ plugin: String, room: String, event: String, payload: JSON, to: [String]?) -> Bool {
        act(plugin, room: room, "dispatch_magix") { try await $0.dispatchMagixEvent(event, payload: payload, to: to) }
    }

    func pluginSetGlobalState(_ plugin: String, room: String, patch: [String: JSON]) -> Bool {
        act(plugin, room: room, "set_global_state") { try await $0.setGlobalState(patch) }
    }

    func pluginInsertImage(_ plugin: String, room: String, image: Image) -> Bool {
        act(plugin, room: room, "insert_image") { try await $0.insertImage(image) }
    }

    func pluginPutScenes(_ plugin: String, room: String, dir: String, scenes: [Scene], index: Int?) -> Bool {
        act(plugin, room: room, "put_scenes") { try await $0.putScenes(dir: dir, scenes: scenes, index: index) }
    }

    func pluginRoomState(_ room: String) -> JSON? {
        guard let content = host.room(room)?.content else { return nil }
        return .object([
            "globalState": .object(content.state.globalState), "sceneState": content.state.sceneState.json,
            "broadcastState": content.state.broadcastState.json, "members": .array(content.members.map(\.json)),
            "streams": .array(content.streams.map(\.json)), "extraInfo": .object(content.extraInfo.mapValues(JSON.string)),
            "phase": .string(content.phase.rawValue), "writable": .bool(content.writable),
        ])
    }
}

/// Room-ID glob patterns (`*`, `lobby-*`, `room-?`), via fnmatch(3).
enum Glob {
    static func matches(_ pattern: String, _ text: String) -> Bool {
        // "*" (the default) matches every room: skip fnmatch on the per-event path.
        pattern == "*" || fnmatch(pattern, text, 0) == 0
    }
}

/// The host's common callbacks, forwarded to a `PluginManager` it does not own.
private final class CommonCallbacksForwarder: CommonCallbacks, @unchecked Sendable {
    // @unchecked Sendable: `manager` is set once, in init; weak loads are atomic.
    private weak var manager: PluginManager?

    init(_ manager: PluginManager) { self.manager = manager }

    func throwError(domain: String, code: ErrorCode, message: String) {
        manager?.throwError(domain: domain, code: code, message: message)
    }

    func urlInterrupter(_ url: String) async -> String {
        guard let manager else { return url }
        return await manager.urlInterrupter(url)
    }
}
