import CoreMetrics
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
    /// Where its hooks run.
    public var isolation: PluginIsolation = .inline
    /// For a `process` plugin, the supervisor's state and counters (nil for inline and failed plugins).
    public var process: PluginProcessReport?
}

/// Loads the manifest's plugins into a `RoomHost` and dispatches to them:
/// URL interrupters join the host's chain (`addURLInterrupter`, in `order`,
/// for the rooms their globs match), `throwError` goes to every plugin that
/// declares it, room and magix events in order to the plugins whose `rooms`
/// globs match. It hears every event once, as one observer of the host, and
/// leaves the host's `commonCallbacks` and delegates to the app. A failing
/// plugin is quarantined; rooms never wait for one.
///
/// Safe from any thread.
public final class PluginManager: PluginHostActions, @unchecked Sendable {
    // @unchecked Sendable: mutable state lives in LockedValues, atomics,
    // and `dispatchState`, a LoopBound (loop thread only, checked).

    public let host: RoomHost
    let metricsFactory: any MetricsFactory
    /// `roomkit_event_dispatch_seconds`: push received → last plugin done (PluginTurnDone.swift).
    let eventDispatch: CoreMetrics.Timer
    /// Each quarantined plugin's half-open retry (PluginManager+Recovery.swift).
    let recoveries = LockedValue<[String: QuarantineRecovery]>([:])
    let logger: Logger
    /// Each failed plugin call, rate-limited per plugin (PluginFailureLog.swift).
    let failureLog: PluginFailureLog
    let runtimes = LockedValue<[PluginRuntime]>([])
    /// ABI 1.1: storage, room login, live configs, reload holds (PluginManager+Platform.swift).
    let platform = PluginPlatformState()
    /// Failures at load time, kept for reports.
    private let failed = LockedValue<[String: (spec: PluginSpec, message: String)]>([:])
    /// Plugins the manifest disables (`enabled: false`), kept for reports.
    private let disabled = LockedValue<[String: PluginSpec]>([:])
    /// Old runtimes replaced by a reload, kept alive (their code stays mapped).
    let retired = LockedValue<[PluginRuntime]>([])
    /// The host observer this manager dispatches from.
    private let observation = LockedValue<RegistrationToken?>(nil)
    /// Each running URL-interrupter plugin's place in the host's URL chain.
    private let interrupters = LockedValue<[ObjectIdentifier: RegistrationToken]>([:])
    private let listener: @Sendable (_ plugin: String, _ status: PluginStatus, _ message: String?) -> Void
    /// The dispatch state (PluginManager+DispatchState.swift): only the loop
    /// thread touches it, and `LoopOwned` checks that on every access (it traps elsewhere).
    let dispatchState: LoopOwned<DispatchState>
    /// Bumped whenever `runtimes` changes (under its lock), so that dispatch
    /// knows when its `targets` are stale without taking the lock per event.
    let runtimesVersion = Atomic<Int>(0)

    /// `onStatus` is called for every plugin status change (event log `plugin` lines).
    ///
    /// The manager owns its host, not the other way round: keep a reference
    /// to the manager for as long as its plugins should see events and
    /// rewrite URLs (a dropped manager's plugins simply stop being called).
    /// `metricsFactory` receives each plugin's calls, failures and call
    /// latency (`roomkit_plugin_*`; nil: the process-wide `MetricsSystem.factory`).
    public init(host: RoomHost, logger: Logger = Logger(label: "roomkit.plugins"), metricsFactory: (any MetricsFactory)? = nil,
                onStatus: @escaping @Sendable (_ plugin: String, _ status: PluginStatus, _ message: String?) -> Void = { _, _, _ in }) {
        self.host = host
        self.metricsFactory = metricsFactory ?? MetricsSystem.factory
        eventDispatch = CoreMetrics.Timer(label: "roomkit_event_dispatch_seconds", dimensions: [], factory: self.metricsFactory)
        self.logger = logger
        failureLog = PluginFailureLog(logger: logger)
        listener = onStatus
        dispatchState = LoopOwned(DispatchState(), loop: host.loop)
        // Weakly: the manager owns the host, so the host holding it strongly
        // would be a cycle. The one route for every event, throwError included.
        let token = host.addEncodedObserver { [weak self] event, encoding in self?.dispatch(event, encoding) }
        observation.withLock { $0 = token }
    }

    deinit {
        observation.withLock { $0 }?.cancel()
        for token in interrupters.withLock({ Array($0.values) }) { token.cancel() }
    }

    /// Loads every enabled plugin of `manifest`; a disabled one (`enabled:
    /// false`) is not mapped and shows as `unloaded` in `reports`. A plugin
    /// that fails to load is reported (`failed`) and skipped; the others
    /// load. Returns the errors.
    @discardableResult
    public func load(_ manifest: PluginManifest) -> [PluginLoadError] {
        var errors: [PluginLoadError] = []
        for spec in manifest.plugins {
            guard spec.enabled else {
                disabled.withLock { $0[spec.name] = spec }
                logger.info("plugin disabled in the manifest", metadata: ["plugin": "\(spec.name)"])
                continue
            }
            do {
                activate(try start(spec, path: nil))
            } catch {
                errors.append(error)
            }
        }
        return errors
    }

    /// Maps and starts (on_load) one plugin; it gets no calls until `activate`.
    func start(_ spec: PluginSpec, path: String?) throws(PluginLoadError) -> PluginRuntime {
        let spec = withLiveConfig(spec)
        let mapped: MappedPlugin
        do {
            mapped = try spec.isolation == .process
                ? PluginProcess.map(spec, path: path, logger: logger, onStatus: listener)
                : PluginLoader.map(spec, path: path)
        } catch {
            noteFailure(spec, error.description)
            throw error
        }
        let runtime = PluginRuntime(mapped, actions: self, metricsFactory: metricsFactory) { [weak self] runtime, reason in
            self?.logger.warning("plugin quarantined", metadata: ["plugin": "\(runtime.spec.name)", "reason": "\(reason)"])
            self?.listener(runtime.spec.name, .quarantined, reason)
            runtime.process?.stopAfterQuarantine(because: reason)
            self?.scheduleRecovery(of: runtime)
        }
        if let problem = runtime.start() {
            let error = PluginLoadError(plugin: spec.name, stage: .loadFailed, message: "plugins[\(spec.index)] (\(spec.name)): \(problem)")
            noteFailure(spec, error.description)
            throw error
        }
        logger.debug("plugin started", metadata: ["plugin": "\(spec.name)", "mapped": "\(mapped.mappedPath)"])
        return runtime
    }

    /// Switches dispatch to `runtime`, retiring the instance it replaces
    /// (whose `unloaded` is reported before the new one's `loaded`).
    func activate(_ runtime: PluginRuntime) {
        let spec = runtime.spec
        let old = runtimes.withLock { list -> PluginRuntime? in
            defer { runtimesVersion.add(1, ordering: .releasing) }
            let old = list.first { $0.spec.name == spec.name }
            list.removeAll { $0.spec.name == spec.name }
            list.append(runtime)
            list.sort { ($0.spec.order, $0.spec.index) < ($1.spec.order, $1.spec.index) }
            return old
        }
        failed.withLock { _ = $0.removeValue(forKey: spec.name) }
        disabled.withLock { _ = $0.removeValue(forKey: spec.name) }
        if let old { retire(old, because: "replaced by a reload") }
        if spec.hooks.contains(.urlInterrupter) {
            let token = host.addURLInterrupter(order: spec.order, rooms: spec.rooms) { [weak runtime] url in
                guard let runtime else { return url }
                return await Self.interrupt(url, with: runtime)
            }
            interrupters.withLock { $0[ObjectIdentifier(runtime)] = token }
        }
        logger.info("plugin loaded", metadata: ["plugin": "\(spec.name)", "library": "\(spec.command?.joined(separator: " ") ?? spec.library)"])
        listener(spec.name, .loaded, nil)
    }

    /// Takes `runtime` out of the URL chain and stops it (on_unload runs after
    /// its queued calls; its code stays mapped), and reports `unloaded`.
    private func retire(_ runtime: PluginRuntime, because reason: String?) {
        interrupters.withLock { $0.removeValue(forKey: ObjectIdentifier(runtime)) }?.cancel()
        runtime.stop()
        retired.withLock { $0.append(runtime) }
        logger.info("plugin unloaded", metadata: ["plugin": "\(runtime.spec.name)", "reason": "\(reason ?? "unload")"])
        listener(runtime.spec.name, .unloaded, reason)
    }

    private func noteFailure(_ spec: PluginSpec, _ message: String) {
        failed.withLock { $0[spec.name] = (spec, message) }
        logger.error("plugin failed to load", metadata: ["plugin": "\(spec.name)", "error": "\(message)"])
        listener(spec.name, .failed, message)
    }

    /// Loads the (changed) library of `spec.name` beside the running one,
    /// switches dispatch to it, then unloads the old instance after its queued
    /// calls (reported `unloaded`, then the new one `loaded`). The old code
    /// stays mapped; no room is touched. `spec` may carry a new config. A spec
    /// with `enabled: false` only unloads the running instance. When the new
    /// library fails to load, the old instance keeps running.
    public func reload(_ spec: PluginSpec) throws {
        guard spec.enabled else {
            cancelRecovery(spec.name)
            let old = runtimes.withLock { list -> PluginRuntime? in
                defer {
                    list.removeAll { $0.spec.name == spec.name }
                    runtimesVersion.add(1, ordering: .releasing)
                }
                return list.first { $0.spec.name == spec.name }
            }
            failed.withLock { _ = $0.removeValue(forKey: spec.name) }
            disabled.withLock { $0[spec.name] = spec }
            if let old { retire(old, because: "disabled in the manifest") }
            return
        }
        // A command plugin is started again from its command: nothing to copy.
        guard spec.command == nil else { return try handOff(spec, path: nil) }
        let copy = try PluginLoader.sideBySideCopy(of: spec.library)
        // Once dlopen has mapped the copy (in start), the file is not needed:
        // on Linux a mapping outlives its file, and we never dlclose.
        defer { PluginLoader.removeCopy(copy) }
        try handOff(spec, path: copy)
    }

    /// Unloads every plugin: on_unload runs after each one's queued calls.
    /// Waits at most `wait` per plugin: a stuck plugin (e.g. quarantined while
    /// hanging) is left behind with a warning; its code stays mapped.
    public func unloadAll(wait: Duration = .seconds(1)) {
        cancelRecovery(nil)
        // The loop turn's batch first, so the plugins get the last events
        // raised before this call (a replay's "ended" comes just before it).
        if host.loop.inEventLoop {
            flushTurn()
        } else {
            try? host.loop.runAndWait { [self] in flushTurn() }
        }
        let all = runtimes.withLock { list -> [PluginRuntime] in
            defer {
                list.removeAll()
                runtimesVersion.add(1, ordering: .releasing)
            }
            return list
        }
        for runtime in all {
            interrupters.withLock { $0.removeValue(forKey: ObjectIdentifier(runtime)) }?.cancel()
            runtime.stop()
            let drained = DispatchSemaphore(value: 0)
            runtime.queue.async { drained.signal() }
            let millis = Int(wait.milliseconds)
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
                                    message: counters.reason).withProcess(of: runtime)
            }
        }
        for (_, entry) in failed.withLock({ $0 }) {
            // The isolation the manifest asked for, whether or not it loaded.
            result.append(PluginReport(name: entry.spec.name, status: .failed, hooks: entry.spec.hooks.map(\.rawValue).sorted(),
                                       calls: 0, failures: 0, meanMicroseconds: 0, message: entry.message,
                                       isolation: entry.spec.isolation))
        }
        for (_, spec) in disabled.withLock({ $0 }) where !result.contains(where: { $0.name == spec.name }) {
            result.append(PluginReport(name: spec.name, status: .unloaded, hooks: spec.hooks.map(\.rawValue).sorted(),
                                       calls: 0, failures: 0, meanMicroseconds: 0, message: "disabled in the manifest",
                                       isolation: spec.isolation))
        }
        return result.sorted { $0.name < $1.name }
    }

    private var active: [PluginRuntime] { runtimes.withLock { $0.filter(\.isActive) } }

    // MARK: Dispatch

    /// Room and magix events, on the loop thread, in the order raised. The
    /// payload text is written once per event (only when a plugin takes it)
    /// into the turn's buffer and shared by every plugin; no closure,
    /// dictionary, lock or allocation per call.
    private func dispatch(_ event: RoomEvent, _ encoding: EventEncoding) {
        if case .throwError(let domain, let code, let message) = event {
            flushTurn()  // keep the order of what the plugins hear
            return throwError(domain: domain, code: code, message: message)
        }
        guard let kind = Self.kind(of: event), let room = event.room else { return }
        // One ownership check per event for the whole walk (LoopOwned).
        dispatchState.withValue { state in dispatch(kind: kind, room: room, encoding, &state) }
        forgetRoomCalls(after: event)
    }

    /// `dispatch` with the loop's dispatch state in hand.
    private func dispatch(kind: roomkit_room_event_kind, room: String, _ encoding: EventEncoding, _ state: inout DispatchState) {
        batch(kind: Int32(kind.rawValue), room: room, hook: .roomEvent, state: &state) { Self.appendRoomEventPayload(encoding, to: &$0) }
    }

    /// Adds one room event (`hook` `.roomEvent`, of C kind `kind`) or player
    /// event (`.playerEvent`) to the turn's batch of every plugin that takes
    /// it; `write` appends its NUL-terminated payload to the turn's buffer,
    /// once, when the first plugin takes it. Loop thread.
    private func batch(kind: Int32, room: String, hook: PluginHookKind, state: inout DispatchState,
                       write: (inout [UInt8]) -> Range<Int>) {
        let isPlayer = hook == .playerEvent
        let isMagix = !isPlayer && kind == Int32(ROOMKIT_ROOM_MAGIX.rawValue)
        let version = runtimesVersion.load(ordering: .acquiring)
        if version != state.targetsVersion {
            state.targetRuntimes = runtimes.withLock { $0 }
            state.targets = state.targetRuntimes.map(DispatchTarget.init)
            state.targetsVersion = version
            // The turn's batches so far stay (they hold their runtimes); new calls start new ones.
            state.turnSlots = Array(repeating: -1, count: state.targets.count)
        }
        var payload: (Range<Int>, Int32, Int32)?
        var holding: Bool?
        // The targets in place: no copy (and no retain of each runtime) per plugin per event.
        let targets = state.targets
        targets.withUnsafeBufferPointer { targets in
            for slot in targets.indices {
                if isPlayer {
                    guard targets[slot].player else { continue }
                } else {
                    guard targets[slot].room || (isMagix && targets[slot].magix) else { continue }
                    // Kinds added in ABI 1.1 reach only plugins built against 1.1 or later.
                    if kind == Int32(ROOMKIT_ROOM_RESYNC.rawValue) && !targets[slot].abi11 { continue }
                    guard targets[slot].hasRoomEventHook else { continue }
                }
                guard targets[slot].everyRoom || targets[slot].runtime.spec.rooms.contains(where: { Glob.matches($0, room) }) else { continue }
                guard targets[slot].runtime.isActive else { continue }
                // A reload holds room events back (player events go to the running version, as before).
                if !isPlayer, holding ?? platform.holding {
                    holding = true
                    // Held events get their own payload (the turn's buffer is for the batch).
                    var own: [UInt8] = []
                    let range = write(&own)
                    let held = PluginRoomEvent(kind: kind, room: room, payload: own[range])
                    if platform.hold(targets[slot].runtime.spec.name, held) { continue }
                } else if !isPlayer {
                    holding = false
                }
                if state.turnBatch.isEmpty, !host.loop.execute({ [weak self] in self?.flushTurn() }) {
                    // The loop is shutting down: no turn end to wait for.
                    var own: [UInt8] = []
                    let range = write(&own)
                    targets[slot].runtime.post(roomEvents: [PluginRoomEvent(kind: kind, room: room, payload: own[range], hook: hook)])
                    continue
                }
                let (range, index, roomIndex) = payload ?? (write(&state.turnPayloads), state.nextEventIndex(), state.roomIndex(room))
                payload = (range, index, roomIndex)
                let call = TurnCall(kind: kind, room: roomIndex, payload: range, index: index, hook: hook)
                if state.turnBatch.isEmpty { state.turnStarted = DispatchTime.now().uptimeNanoseconds }
                if state.turnSlots[slot] < 0 {
                    state.turnSlots[slot] = state.turnBatch.count
                    state.turnBatch.append((targets[slot].runtime, []))
                }
                state.turnBatch[state.turnSlots[slot]].calls.append(call)
            }
        }
    }

    /// Appends the on_room_event (or on_player_event) payload to `buffer`:
    /// the event's one encoding (the same bytes as its event-log line),
    /// NUL-terminated. Returns where it is, the NUL included.
    static func appendRoomEventPayload(_ encoding: EventEncoding, to buffer: inout [UInt8]) -> Range<Int> {
        let start = buffer.count
        encoding.appendObject(to: &buffer)
        buffer.append(0)
        return start..<buffer.count
    }

    /// The on_room_event call for `event` on its own (tests).
    static func roomEventCall(_ event: RoomEvent, kind: roomkit_room_event_kind, room: String,
                              buffer: inout [UInt8]) -> PluginRoomEvent {
        buffer.removeAll(keepingCapacity: true)
        let start = buffer.count
        event.appendLogFieldsJSON(to: &buffer)
        buffer.append(0)
        let range = start..<buffer.count
        return PluginRoomEvent(kind: Int32(kind.rawValue), room: room, payload: Array(buffer[range]))
    }

    /// Posts the current turn's room events: one queue hop per plugin per
    /// loop turn instead of one per event, every plugin's events pointing
    /// into the turn's one payload buffer. Loop thread only.
    func flushTurn() {
        let (batch, payloads, rooms, events, started) = dispatchState.withValue {
            state -> ([(runtime: PluginRuntime, calls: [TurnCall])], [UInt8], [String], Int, UInt64) in
            guard !state.turnBatch.isEmpty else { return ([], [], [], 0, 0) }
            let batch = state.turnBatch
            let payloads = state.turnPayloads
            let rooms = state.turnRooms
            state.turnRooms = []
            let events = Int(state.turnEvents)
            state.turnEvents = 0
            state.turnBatch.removeAll(keepingCapacity: true)
            for slot in state.turnSlots.indices { state.turnSlots[slot] = -1 }
            // A new buffer for the next turn (this one now belongs to the plugins' batches).
            state.turnPayloads = []
            state.turnPayloads.reserveCapacity(payloads.count)
            return (batch, payloads, rooms, events, state.turnStarted)
        }
        guard !batch.isEmpty else { return }
        let done = TurnDone(events: events, batch: batch, since: started, timer: eventDispatch)
        for (runtime, calls) in batch {
            runtime.post(roomEvents: PluginRoomEvents(payloads: payloads, rooms: rooms, calls: calls, turn: done),
                         since: started)
        }
    }

    /// Fans a player event out to plugins declaring `player`, from its one
    /// encoding (`Player.addEncodedObserver`; the event log reads the same),
    /// by the room events' route: into the loop turn's batches, in order with
    /// them (one queue hop per plugin per turn, the payload written once into
    /// the turn's buffer). A player on another loop hands it over to this one.
    public func dispatchPlayerEvent(kind: Int32, room: String, encoding: EventEncoding) {
        guard dispatchState.onLoop else {
            _ = host.loop.execute { [weak self] in self?.dispatchPlayerEvent(kind: kind, room: room, encoding: encoding) }
            return
        }
        dispatchState.withValue { state in
            batch(kind: kind, room: room, hook: .playerEvent, state: &state) { Self.appendRoomEventPayload(encoding, to: &$0) }
        }
    }

    /// A player event whose payload is the JSON object text `text` (the
    /// benchmarks' door), by the same route.
    func dispatchPlayerEvent(kind: Int32, room: String, text: String) {
        guard dispatchState.onLoop else {
            _ = host.loop.execute { [weak self] in self?.dispatchPlayerEvent(kind: kind, room: room, text: text) }
            return
        }
        dispatchState.withValue { state in
            batch(kind: kind, room: room, hook: .playerEvent, state: &state) { buffer in
                let start = buffer.count
                buffer.append(contentsOf: text.utf8)
                buffer.append(0)
                return start..<buffer.count
            }
        }
    }

    /// Hands an error to every plugin that declares `throwError`. The host's
    /// `throwError` events arrive here through the observer, once each (the
    /// one route: there is no public door around it).
    func throwError(domain: String, code: ErrorCode, message: String) {
        for runtime in active where runtime.spec.hooks.contains(.throwError) {
            runtime.throwError(domain: domain, code: Int64(code.rawValue), message: message)
        }
    }

    /// The plugins' part of the URL chain for `room` (every URL-interrupter
    /// plugin when nil), as the host runs it: each in `order` gets the
    /// previous output; a failure (timeout, NULL, invalid UTF-8) leaves that
    /// step's input unchanged. For tests and tools; actions go through
    /// `host.interruptURL(_:room:)`.
    public func urlInterrupter(_ url: String, room: String? = nil) async -> String {
        var current = url
        for runtime in active where runtime.spec.hooks.contains(.urlInterrupter) {
            if let room, !runtime.spec.rooms.contains(where: { Glob.matches($0, room) }) { continue }
            current = await Self.interrupt(current, with: runtime)
        }
        return current
    }

    /// One step of the URL chain (PluginRuntime.interrupt: the caller's
    /// thread never blocks); a failed step returns its input.
    private static func interrupt(_ url: String, with runtime: PluginRuntime) async -> String {
        let output = await withCheckedContinuation { (continuation: CheckedContinuation<String?, Never>) in
            runtime.interrupt(url) { continuation.resume(returning: $0) }
        }
        return output ?? url
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

    /// Queues an action; its failure reaches the acting plugin as
    /// `throw_error` (domain: the action's name, code: the request's error
    /// code), as roomkit_plugin.h promises, whether or not it declares the
    /// `throwError` hook (that hook subscribes to the host's own errors).
    private func act(_ plugin: String, room: String, _ what: String, _ body: @escaping @Sendable (Room) async throws -> Void) -> Bool {
        guard let handle = host.room(room) else { return false }
        let logger = self.logger
        let runtime = runtimes.withLock { $0.first { $0.spec.name == plugin } }
        let gate = runtime?.actionGate ?? PluginActionGate()
        gate.submit { [weak runtime] in
            do {
                try await body(handle)
            } catch {
                logger.warning("plugin action failed", metadata: ["plugin": "\(plugin)", "action": "\(what)", "room": "\(room)", "error": "\(error)"])
                let code = (error as? RoomError)?.code ?? .internalError
                runtime?.throwError(domain: what, code: Int64(code.rawValue), message: "\(what) in \(room) failed: \(error)")
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

/// Room-ID glob patterns (`*`, `lobby-*`, `room-?`): the engine's `RoomGlob`,
/// so the URL chain and event dispatch match rooms the same way.
enum Glob {
    static func matches(_ pattern: String, _ text: String) -> Bool {
        RoomGlob.matches(pattern, text)
    }
}

/// One room or player event for one plugin in the current turn: its
/// payload is a range of the turn's payload buffer, its room a place in the
/// turn's rooms. Plain data (no String): a turn's calls are copied and
/// destroyed without a retain or a release per call (destroying a turn's
/// calls was a tenth of a process plugin's queue thread).
struct TurnCall: Sendable {
    let kind: Int32
    /// Its room's index in the batch's `rooms` (`PluginRoomEvents`).
    let room: Int32
    let payload: Range<Int>
    /// The event's number in its turn (`TurnDone`).
    let index: Int32
    /// `.roomEvent` (on_room_event) or `.playerEvent` (on_player_event).
    var hook: PluginHookKind = .roomEvent
}

/// A runtime with what dispatch checks per event read out once.
struct DispatchTarget {
    /// Unretained: `DispatchState.targetRuntimes` holds the same runtimes
    /// strongly, replaced together with `targets`. A strong reference here
    /// was a retain and a release of the runtime per event per plugin on
    /// the loop thread, while the plugin's queue retains and releases the
    /// same object: the refcount's cache line bounced between the cores
    /// (retain/release were 60% of the loop thread in isolation-bench).
    unowned(unsafe) let runtime: PluginRuntime
    /// Declares the `room` hook (every room event kind).
    let room: Bool
    /// Declares the `magix` hook.
    let magix: Bool
    /// One of its globs is `*`: no glob to match per event (else they are
    /// the runtime's `spec.rooms`: no array here, so a target is plain
    /// data, copied without a retain).
    let everyRoom: Bool
    /// Built against ABI 1.1 or later (takes the 1.1 kinds).
    let abi11: Bool
    let hasRoomEventHook: Bool
    /// Declares `player` and has the hook to take it (inline: the
    /// library's `on_player_event`; a process: its child gets the records).
    let player: Bool

    init(_ runtime: PluginRuntime) {
        self.runtime = runtime
        let spec = runtime.spec
        room = spec.hooks.contains(.room)
        magix = spec.hooks.contains(.magix)
        everyRoom = spec.rooms.contains("*")
        abi11 = runtime.endpoint.abiMinor >= 1
        hasRoomEventHook = runtime.hasRoomEventHook
        switch runtime.endpoint {
        case .inline(let inline): player = spec.hooks.contains(.player) && inline.hasPlayerEvent
        case .process: player = spec.hooks.contains(.player)
        }
    }
}
