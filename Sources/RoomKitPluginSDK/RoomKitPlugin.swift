import CRoomKitPluginABI
import RoomKitJSON
import RoomKitProtocol
import Synchronization

/// A RoomKit plugin written in Swift. Implement what you care about; every
/// hook has a default that does nothing (the URL interrupter returns the
/// URL unchanged). `host`, `config` and `log` are injected before `load`.
/// Export the type with one line:
///
/// ```swift
/// final class Greeter: RoomKitPlugin {
///     func magix(_ message: MagixMessage) {
///         guard message.event == "hello" else { return }
///         host.dispatchMagix(room: message.room, event: "hi", payload: config["greeting"] ?? "hi")
///     }
/// }
/// @_cdecl("roomkit_plugin_entry")
/// public func entry(_ major: UInt16, _ minor: UInt16) -> UnsafeRawPointer? { exportPlugin(Greeter.self, major, minor) }
/// ```
///
/// Every hook runs on the plugin's own serial queue, never concurrently.
/// Build it with the same Swift toolchain as the host (docs/PLUGINS.md).
public protocol RoomKitPlugin: AnyObject {
    init()
    /// Called once after loading, with the manifest's `config`. Throw to refuse loading.
    func load(host: PluginHost, config: JSON) throws
    /// Called once before the plugin stops receiving calls.
    func unload()
    /// An error no request was waiting for (the seed's `throwError`).
    func throwError(domain: String, code: Int64, message: String)
    /// Rewrites a URL the engine is about to send. Throwing leaves it unchanged.
    func urlInterrupter(_ url: String) throws -> String
    /// A room event; `payload` has the event-log fields (CLI.md). The
    /// default calls the typed handlers below (`dispatchTyped`).
    func roomEvent(_ kind: RoomEventKind, room: String, payload: JSON)
    /// A player event during replay.
    func playerEvent(_ kind: PlayerEventKind, room: String, payload: JSON)

    // Typed handlers (called by the default roomEvent), each a no-op by default.
    /// A custom event.
    func magix(_ message: MagixMessage)
    /// Users joined a room.
    func userJoined(_ change: UsersChange)
    /// Users left a room.
    func userLeft(_ change: UsersChange)
    /// The bot's session in a room changed (`LOGINED`, `RECONNECTING`, …).
    func stateChanged(_ change: SessionChange)
    /// The bot was kicked from a room.
    func kicked(_ kick: Kick)
    /// Continuity broke in a room (ABI 1.1): rebuild derived state.
    func resync(_ resync: Resync)
    /// The bot's token for `room` expires in `remainingMilliseconds`.
    func tokenWillExpire(room: String, remainingMilliseconds: Int64)
    /// Every other room event kind.
    func otherRoomEvent(_ kind: RoomEventKind, room: String, payload: JSON)

    // ABI 1.1 hooks.
    /// The config changed live: `room` nil with the new base config (already
    /// in `self.config`), then once per room the bot is in with its resolved config.
    func configChanged(room: String?, config: JSON)
    /// Reload hand-off: the state to give the new version (nil: none).
    func exportState() -> String?
    /// Reload hand-off: take the old version's state. Throw to refuse (the
    /// reload rolls back).
    func importState(_ state: String) throws
}

extension RoomKitPlugin {
    public func load(host: PluginHost, config: JSON) throws {}
    public func unload() {}
    public func throwError(domain: String, code: Int64, message: String) {}
    public func urlInterrupter(_ url: String) throws -> String { url }
    public func roomEvent(_ kind: RoomEventKind, room: String, payload: JSON) { dispatchTyped(kind, room: room, payload: payload) }
    public func playerEvent(_ kind: PlayerEventKind, room: String, payload: JSON) {}
    public func magix(_ message: MagixMessage) {}
    public func userJoined(_ change: UsersChange) {}
    public func userLeft(_ change: UsersChange) {}
    public func stateChanged(_ change: SessionChange) {}
    public func kicked(_ kick: Kick) {}
    public func resync(_ resync: Resync) {}
    public func tokenWillExpire(room: String, remainingMilliseconds: Int64) {}
    public func otherRoomEvent(_ kind: RoomEventKind, room: String, payload: JSON) {}
    public func configChanged(room: String?, config: JSON) {}
    public func exportState() -> String? { nil }
    public func importState(_ state: String) throws {}
}

/// Room event kinds (`enum roomkit_room_event_kind`).
public enum RoomEventKind: Int32, Sendable, CaseIterable {
    case roomStateChanged = 1, phaseChanged, roomStateModified, writableChanged, disconnected, kicked,
         appendFrameError, magix, userUpdate, streamUpdate, extraInfoUpdate, tokenWillExpire,
         /// ABI 1.1: continuity broke (`reason`, `lastAppliedSeq`, `resumedAtSeq`).
         resync
}

/// Player event kinds (`enum roomkit_player_event_kind`).
public enum PlayerEventKind: Int32, Sendable, CaseIterable {
    case phase = 1, firstFrame, timeChanged, stateChanged, stoppedWithError, appendFrameError, magix
}

/// Log levels for `PluginHost.log`.
public enum PluginLogLevel: Int32, Sendable {
    case debug = 0, info, warning, error
}

/// What a plugin may ask of the host. Safe from any thread.
public struct PluginHost: @unchecked Sendable {
    // @unchecked Sendable: a pointer to the host's immutable function table,
    // valid until unload; the host's functions are thread-safe.
    let api: UnsafePointer<roomkit_host_api>
    let box: PluginBox

    /// Writes a line to the host's log, tagged with the plugin's name.
    public func log(_ level: PluginLogLevel, _ message: String) {
        api.pointee.log?(api.pointee.context, level.rawValue, message)
    }

    /// Sends a custom event into `room` (to `to`, user IDs, when given).
    @discardableResult
    public func dispatchMagix(room: String, event: String, payload: JSON, to: [String]? = nil) -> Bool {
        let to = to.map { JSON.array($0.map(JSON.string)).jsonString }
        return withOptionalCString(to) { toPointer in
            api.pointee.dispatch_magix?(api.pointee.context, room, event, payload.jsonString, toPointer) == 0
        }
    }

    /// Merges `patch` into the room's global state.
    @discardableResult
    public func setGlobalState(room: String, patch: [String: JSON]) -> Bool {
        api.pointee.set_global_state?(api.pointee.context, room, JSON.object(patch).jsonString) == 0
    }

    /// Inserts an image into the room's current scene.
    @discardableResult
    public func insertImage(room: String, image: Image) -> Bool {
        api.pointee.insert_image?(api.pointee.context, room, image.json.jsonString) == 0
    }

    /// Adds scenes to `dir` in the room.
    @discardableResult
    public func putScenes(room: String, dir: String, scenes: [Scene], index: Int? = nil) -> Bool {
        api.pointee.put_scenes?(api.pointee.context, room, dir, JSON.array(scenes.map(\.json)).jsonString,
                                Int32(index ?? -1)) == 0
    }

    /// The room's state as the host sees it, or nil for an unknown room.
    public func roomState(_ room: String) -> JSON? {
        guard let raw = api.pointee.room_state_json?(api.pointee.context, room) else { return nil }
        defer { api.pointee.free_string?(api.pointee.context, raw) }
        return try? JSON.parse(String(cString: raw))
    }

    /// Runs `body` on the plugin's queue after `delay` (then every `interval`).
    /// Timers end when the plugin unloads. Returns an ID for `cancelTimer`.
    @discardableResult
    public func setTimer(after delay: Duration, repeating interval: Duration? = nil,
                         _ body: @escaping @Sendable () -> Void) -> UInt64 {
        let user = Unmanaged.passUnretained(box).toOpaque()
        let id = api.pointee.set_timer?(api.pointee.context, UInt64(delay.milliseconds), UInt64(interval?.milliseconds ?? 0), { user, id in
            guard let user else { return }
            Unmanaged<PluginBox>.fromOpaque(user).takeUnretainedValue().fireTimer(id)
        }, user) ?? 0
        box.timers.withLock { $0[id] = body }
        return id
    }

    public func cancelTimer(_ id: UInt64) {
        box.timers.withLock { _ = $0.removeValue(forKey: id) }
        api.pointee.cancel_timer?(api.pointee.context, id)
    }
}

/// Holds a plugin instance behind the descriptor's `self` pointer.
final class PluginBox: @unchecked Sendable {
    // @unchecked Sendable: `plugin` and `host` are touched only from hooks,
    // which the host serialises on the plugin's queue; `timers` has a lock.
    let plugin: any RoomKitPlugin
    var host: PluginHost?
    /// The base config (set at load, replaced by on_config_changed(NULL)).
    let config = Mutex<JSON>(.null)
    let timers = Mutex<[UInt64: @Sendable () -> Void]>([:])

    init(_ plugin: any RoomKitPlugin) { self.plugin = plugin }

    func fireTimer(_ id: UInt64) {
        let body = timers.withLock { $0[id] }
        body?()
    }
}

/// Calls `body` with a C string for `string`, or with NULL (the ABI's
/// optional strings).
func withOptionalCString<R>(_ string: String?, _ body: (UnsafePointer<CChar>?) -> R) -> R {
    guard let string else { return body(nil) }
    return string.withCString { body($0) }
}
