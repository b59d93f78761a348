import CRoomKitPluginABI
import RoomKitProtocol
import Synchronization

/// A RoomKit plugin written in Swift. Implement what you care about; every
/// hook has a default that does nothing (the URL interrupter returns the
/// URL unchanged). Export the type with one line:
///
/// ```swift
/// @_cdecl("roomkit_plugin_entry")
/// public func entry(_ major: UInt16, _ minor: UInt16) -> UnsafeRawPointer? { exportPlugin(MyPlugin.self, major, minor) }
/// ```
///
/// Every hook runs on the plugin's own serial queue, never concurrently.
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
    /// A room event; `payload` has the event-log fields (CLI.md).
    func roomEvent(_ kind: RoomEventKind, room: String, payload: JSON)
    /// A player event during replay.
    func playerEvent(_ kind: PlayerEventKind, room: String, payload: JSON)
}

extension RoomKitPlugin {
    public func load(host: PluginHost, config: JSON) throws {}
    public func unload() {}
    public func throwError(domain: String, code: Int64, message: String) {}
    public func urlInterrupter(_ url: String) throws -> String { url }
    public func roomEvent(_ kind: RoomEventKind, room: String, payload: JSON) {}
    public func playerEvent(_ kind: PlayerEventKind, room: String, payload: JSON) {}
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
    let timers = Mutex<[UInt64: @Sendable () -> Void]>([:])

    init(_ plugin: any RoomKitPlugin) { self.plugin = plugin }

    func fireTimer(_ id: UInt64) {
        let body = timers.withLock { $0[id] }
        body?()
    }
}


func withOptionalCString<R>(_ string: String?, _ body: (UnsafePointer<CChar>?) -> R) -> R {
    guard let string else { return body(nil) }
    return string.withCString { body($0) }
}
