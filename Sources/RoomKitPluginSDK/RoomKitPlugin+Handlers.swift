import CRoomKitPluginABI
import RoomKitJSON
import RoomKitProtocol
import Synchronization

/// A custom event in a room (`ROOMKIT_ROOM_MAGIX`).
public struct MagixMessage: Sendable, Hashable {
    public let room: String
    /// The sender's member ID.
    public let from: Int64
    public let event: String
    public let payload: JSON

    /// Makes a message (for tests of a plugin's handlers).
    public init(room: String, from: Int64, event: String, payload: JSON) {
        self.room = room
        self.from = from
        self.event = event
        self.payload = payload
    }
}

/// Users who joined or left a room (`ROOMKIT_ROOM_USER_UPDATE`).
public struct UsersChange: Sendable, Hashable {
    public let room: String
    /// Their user IDs.
    public let users: [String]
}

/// The bot's session in a room changed (`ROOMKIT_ROOM_STATE_CHANGED`).
public struct SessionChange: Sendable, Hashable {
    public let room: String
    /// `LOGINING`, `LOGINED`, `LOGIN_FAILED`, `RECONNECTING`, … `LOGOUT`.
    public let reason: String
    public let errorCode: Int64
}

/// The bot was removed from a room (`ROOMKIT_ROOM_KICKED`).
public struct Kick: Sendable, Hashable {
    public let room: String
    /// 1002050 kicked, 1002055 room closed, 1002056 banned (PROTOCOL.md).
    public let code: Int64
    public let reason: String
}

/// Continuity broke in a room: events may have been missed; rebuild what you
/// derived from them (`ROOMKIT_ROOM_RESYNC`, ABI 1.1). `payload` has
/// `reason`, `lastAppliedSeq`, `resumedAtSeq`.
public struct Resync: Sendable, Hashable {
    public let room: String
    public let payload: JSON
}

/// Typed handlers: override the ones you need; each defaults to doing
/// nothing. They are called by the default `roomEvent`, so a plugin that
/// overrides `roomEvent` itself gets only that. All run on the plugin's queue.
extension RoomKitPlugin {
    /// Splits a room event into the typed handlers (the default `roomEvent`).
    public func dispatchTyped(_ kind: RoomEventKind, room: String, payload: JSON) {
        let users = payload["users"]?.arrayValue?.compactMap(\.stringValue) ?? []
        switch kind {
        case .magix:
            magix(MagixMessage(room: room, from: payload["from"]?.int64Value ?? 0, event: payload["event"]?.stringValue ?? "",
                               payload: payload["payload"] ?? .null))
        case .userUpdate:
            if payload["type"]?.stringValue == UpdateType.delete.rawValue {
                userLeft(UsersChange(room: room, users: users))
            } else {
                userJoined(UsersChange(room: room, users: users))
            }
        case .roomStateChanged:
            stateChanged(SessionChange(room: room, reason: payload["reason"]?.stringValue ?? "",
                                       errorCode: payload["errorCode"]?.int64Value ?? 0))
        case .kicked:
            kicked(Kick(room: room, code: payload["code"]?.int64Value ?? 0, reason: payload["reason"]?.stringValue ?? ""))
        case .resync:
            resync(Resync(room: room, payload: payload))
        case .tokenWillExpire:
            tokenWillExpire(room: room, remainingMilliseconds: payload["remaining"]?.int64Value ?? 0)
        default:
            otherRoomEvent(kind, room: room, payload: payload)
        }
    }
}

/// What a plugin can use from inside any hook: `host`, `config` and `log`,
/// injected by the SDK before `load` runs (not available in `init`).
extension RoomKitPlugin {
    /// The host's functions.
    public var host: PluginHost {
        guard let host = PluginBox.of(self)?.host else {
            preconditionFailure("RoomKitPlugin.host is available from load() on, not in init()")
        }
        return host
    }

    /// The plugin's base config (the manifest's `config`, or the latest live
    /// change). For a room's resolved config use `host.config(for:)`.
    public var config: JSON { PluginBox.of(self)?.config.withLock { $0 } ?? .null }

    /// The host's log, tagged with the plugin's name.
    public var log: PluginLog { PluginLog(host: PluginBox.of(self)?.host) }
}

/// Writes to the host's log (a no-op before `load`).
public struct PluginLog: Sendable {
    let host: PluginHost?
    /// A debug line.
    public func debug(_ message: String) { host?.log(.debug, message) }
    /// An info line.
    public func info(_ message: String) { host?.log(.info, message) }
    /// A warning line.
    public func warning(_ message: String) { host?.log(.warning, message) }
    /// An error line.
    public func error(_ message: String) { host?.log(.error, message) }
}

extension PluginBox {
    /// Every live plugin instance's box, by the instance's identity, so the
    /// protocol extension can find `host` and `config` without a stored
    /// property in the author's type. Boxes live as long as the library.
    private static let registry = Mutex<[ObjectIdentifier: PluginBox]>([:])

    static func register(_ box: PluginBox) {
        registry.withLock { $0[ObjectIdentifier(box.plugin)] = box }
    }

    static func of(_ plugin: any RoomKitPlugin) -> PluginBox? {
        registry.withLock { $0[ObjectIdentifier(plugin)] }
    }
}
