import CRoomKitPluginABI
import Foundation
import Logging
import RoomKit
import RoomKitLoop
import RoomKitProtocol
import Synchronization

/// The manager's ABI 1.1 state: storage, the bot's way to log in, and each
/// plugin's current (possibly live-changed) config. Thread-safe.
final class PluginPlatformState: Sendable {
    let store = LockedValue<(any PluginStore)?>(nil)
    let login = LockedValue<(@Sendable (String) async throws -> Void)?>(nil)
    let configs = LockedValue<[String: PluginConfig]>([:])
    /// Plugins being reloaded, with the room events held for them (PluginManager+Reload.swift).
    /// Change it only through `startHolding` and `stopHolding`, which keep `heldCount`.
    let held = LockedValue<[String: [HeldEvent]]>([:])
    /// How many plugins `held` holds events for: dispatch reads it per event
    /// instead of taking `held`'s lock.
    let heldCount = Atomic<Int>(0)
}

extension PluginManager {
    /// Gives plugins persistent key-value storage (`kv_*`) and makes live
    /// config changes survive a restart. Call before `load`. Each plugin may
    /// keep its manifest's `storageLimitBytes` (keys + values, UTF-8); a
    /// write past it fails with `ROOMKIT_KV_FULL` and a warning naming the
    /// plugin and the limit.
    public func useStore(_ store: any PluginStore) {
        platform.store.withLock { $0 = store }
    }

    /// How `login_room` logs the host in (the bot's user and tokens). Without
    /// it, `login_room` returns -1: the manager has no identity of its own.
    public func useRoomLogin(_ login: @escaping @Sendable (String) async throws -> Void) {
        platform.login.withLock { $0 = login }
    }

    /// The plugin's current config (the manifest's, or the last live change).
    public func config(of plugin: String) -> PluginConfig? {
        platform.configs.withLock { $0[plugin] }
    }

    /// `spec` with the live config persisted for it, if any, recorded as
    /// its current config. Called before a plugin starts.
    func withLiveConfig(_ spec: PluginSpec) -> PluginSpec {
        var spec = spec
        let store = platform.store.withLock { $0 }
        do {
            if let saved = try store?.liveConfig(plugin: spec.name) {
                spec.config = saved["config"] ?? spec.config
                spec.roomConfig = saved["roomConfig"]?.objectValue ?? spec.roomConfig
                logger.info("plugin config: using the live config saved for it", metadata: ["plugin": "\(spec.name)"])
            }
        } catch {
            logger.error("plugin config: cannot read the saved live config; using the manifest's", metadata: ["plugin": "\(spec.name)", "error": "\(error)"])
        }
        platform.configs.withLock { $0[spec.name] = PluginConfig(config: spec.config, roomConfig: spec.roomConfig) }
        return spec
    }

    /// Why a live config change was refused.
    public enum ConfigUpdateError: Error, CustomStringConvertible {
        case unknownPlugin(String)
        case invalid(ManifestErrors)
        case storage(PluginStoreError)

        public var description: String {
            switch self {
            case .unknownPlugin(let name): return "no running plugin named '\(name)'"
            case .invalid(let errors): return errors.description
            case .storage(let error): return "the new config was not saved: \(error)"
            }
        }
    }

    /// `PUT /v1/plugins/{name}/config`: validates `body`
    /// (`{"config": …, "roomConfig": {glob: {…}}}`), persists it (when a
    /// store is set), then pushes it to the running plugin through
    /// on_config_changed: once with the base config (room NULL), then once
    /// per room the host is in that the plugin's `rooms` match, with that
    /// room's resolved config. Nothing reloads; no room reconnects. A 1.0
    /// plugin (no on_config_changed) sees the change in config_get_json only.
    @discardableResult
    public func updateConfig(_ name: String, body: JSON) throws(ConfigUpdateError) -> PluginConfig {
        guard let runtime = runtimes.withLock({ $0.first { $0.spec.name == name && $0.isActive } }) else {
            throw .unknownPlugin(name)
        }
        let current = config(of: name) ?? PluginConfig(config: runtime.spec.config, roomConfig: runtime.spec.roomConfig)
        let updated: PluginConfig
        do { updated = try PluginConfig.parseUpdate(body, current: current) } catch { throw .invalid(error) }
        do { try platform.store.withLock { $0 }?.setLiveConfig(plugin: name, updated.json) } catch { throw .storage(error) }
        platform.configs.withLock { $0[name] = updated }
        runtime.configChanged(room: nil, config: updated.config.jsonString)
        let rooms = host.allRooms.map(\.id).filter { id in runtime.spec.rooms.contains { Glob.matches($0, id) } }.sorted()
        for room in rooms { runtime.configChanged(room: room, config: updated.resolved(for: room).jsonString) }
        logger.info("plugin config changed live", metadata: ["plugin": "\(name)", "rooms": .stringConvertible(rooms.count)])
        return updated
    }

    private func runtime(named plugin: String) -> PluginRuntime? {
        runtimes.withLock { $0.first { $0.spec.name == plugin } }
    }

    /// Whether `plugin` may act on `room` (its manifest `rooms` match it).
    private func covers(_ plugin: String, _ room: String) -> Bool {
        runtime(named: plugin)?.spec.rooms.contains { Glob.matches($0, room) } ?? false
    }

    /// Runs an asynchronous host action for a plugin; a failure reaches the
    /// plugin as throw_error with `what` as domain (as the 1.0 actions do).
    private func background(_ plugin: String, _ what: String, room: String, _ body: @escaping @Sendable () async throws -> Void) {
        let logger = self.logger
        let runtime = runtime(named: plugin)
        Task { [weak runtime] in
            do {
                try await body()
            } catch {
                logger.warning("plugin action failed", metadata: ["plugin": "\(plugin)", "action": "\(what)", "room": "\(room)", "error": "\(error)"])
                let code = (error as? RoomError)?.code ?? .internalError
                runtime?.throwError(domain: what, code: Int64(code.rawValue), message: "\(what) \(room) failed: \(error)")
            }
        }
    }

    private func roomAction(_ plugin: String, _ room: String, _ what: String, _ body: @escaping @Sendable (Room) async throws -> Void) -> Bool {
        guard let handle = host.room(room) else { return false }
        background(plugin, what, room: room) { try await body(handle) }
        return true
    }
}

// MARK: PluginPlatformActions (any thread)

extension PluginManager: PluginPlatformActions {
    func pluginSetMemberState(_ plugin: String, room: String, patch: [String: JSON]) -> Bool {
        roomAction(plugin, room, "set_member_state") { _ = try await $0.setMemberState(patch) }
    }

    func pluginSetExtraInfo(_ plugin: String, room: String, key: String, value: String) -> Bool {
        roomAction(plugin, room, "set_extra_info") { _ = try await $0.setExtraInfo(key: key, value: value) }
    }

    func pluginPublishStream(_ plugin: String, room: String, stream: String, extraInfo: String?) -> Bool {
        roomAction(plugin, room, "publish_stream") { _ = try await $0.publishStream(stream, extraInfo: extraInfo) }
    }

    func pluginUnpublishStream(_ plugin: String, room: String, stream: String) -> Bool {
        roomAction(plugin, room, "unpublish_stream") { _ = try await $0.unpublishStream(stream) }
    }

    func pluginLoginRoom(_ plugin: String, room: String) -> Bool {
        guard RoomID.isValid(room), covers(plugin, room), let login = platform.login.current else { return false }
        background(plugin, "login_room", room: room) { try await login(room) }
        return true
    }

    func pluginLogoutRoom(_ plugin: String, room: String) -> Bool {
        guard covers(plugin, room), host.room(room) != nil else { return false }
        let host = self.host
        background(plugin, "logout_room", room: room) { try await host.logoutRoom(room) }
        return true
    }

    func pluginSwitchRoom(_ plugin: String, from: String, to: String) -> Bool {
        guard RoomID.isValid(to), covers(plugin, from), covers(plugin, to), host.room(from) != nil else { return false }
        let host = self.host
        background(plugin, "switch_room", room: to) { _ = try await host.switchRoom(from: from, to: to) }
        return true
    }

    func pluginRoomMembers(_ room: String) -> JSON? {
        host.room(room).map { JSON.array($0.roomMembers.map(\.json)) }
    }

    func pluginConfig(_ plugin: String, room: String?) -> JSON {
        let config = config(of: plugin) ?? runtime(named: plugin).map { PluginConfig(config: $0.spec.config, roomConfig: $0.spec.roomConfig) }
        return config?.resolved(for: room) ?? .null
    }

    private var store: (any PluginStore)? { platform.store.withLock { $0 } }

    func pluginKVGet(_ plugin: String, key: String) -> String? {
        do { return try store?.get(plugin: plugin, key: key) } catch {
            logger.error("plugin storage read failed", metadata: ["plugin": "\(plugin)", "error": "\(error)"])
            return nil
        }
    }

    func pluginKVSet(_ plugin: String, key: String, value: String) -> Int32 {
        guard let store, let limit = runtime(named: plugin)?.spec.storageLimit else { return -1 }
        do {
            try store.set(plugin: plugin, key: key, value: value, limit: limit)
            return 0
        } catch {
            logger.warning("plugin storage write refused", metadata: ["plugin": "\(plugin)", "key": "\(key)", "error": "\(error)"])
            if case .full = error { return ROOMKIT_KV_FULL }
            return -1
        }
    }

    func pluginKVDelete(_ plugin: String, key: String) -> Int32 {
        do { return try store?.delete(plugin: plugin, key: key) == true ? 1 : 0 } catch {
            logger.error("plugin storage delete failed", metadata: ["plugin": "\(plugin)", "error": "\(error)"])
            return -1
        }
    }

    func pluginKVScan(_ plugin: String, prefix: String) -> JSON? {
        do { return .object(Dictionary(uniqueKeysWithValues: (try store?.scan(plugin: plugin, prefix: prefix) ?? []).map { ($0.key, JSON.string($0.value)) })) } catch {
            logger.error("plugin storage scan failed", metadata: ["plugin": "\(plugin)", "error": "\(error)"])
            return nil
        }
    }
}
