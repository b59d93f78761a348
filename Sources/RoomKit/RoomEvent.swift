import RoomKitLoop
import Dispatch
import Foundation
import RoomKitProtocol
import Synchronization

/// A custom event (magix) as received.
public struct MagixEvent: Sendable, Hashable {
    public let room: String
    public let seq: Int64
    /// The sender's member ID.
    public let from: Int64
    public let event: String
    public let payload: JSON
    /// Whether the event arrived in a resume's replay (PROTOCOL.md §6): it
    /// happened while this session was away, and is raised now, once.
    public var replayed = false
}

/// The changed parts of the room state (`fireRoomStateChanged`): only the
/// top-level keys that changed are set.
public struct RoomStateDiff: Sendable, Hashable {
    public var globalState: [String: JSON]?
    public var sceneState: SceneState?
    public var broadcastState: BroadcastState?
    public var roomMembers: [Member]?
    public var memberState: [String: JSON]?

    public init() {}

    /// The changed top-level keys, in a fixed order.
    public var keys: [String] {
        var keys: [String] = []
        if globalState != nil { keys.append("globalState") }
        if memberState != nil { keys.append("memberState") }
        if sceneState != nil { keys.append("sceneState") }
        if broadcastState != nil { keys.append("broadcastState") }
        if roomMembers != nil { keys.append("roomMembers") }
        return keys
    }

    public var isEmpty: Bool { keys.isEmpty }
}

/// Everything the engine reports, as one value (the `AsyncSequence` form).
public enum RoomEvent: Sendable, Hashable {
    /// `onRoomStateChanged`. `extendedData` is the seed's extended data:
    /// `recovered` (Bool) on `RECONNECTED` and on a `LOGINED` that resumed a
    /// stored session; for `RECONNECT_FAILED` after the server refused the
    /// resume, `cause` holds the server's code (`errorCode` stays 1002053).
    case roomStateChanged(room: String, reason: RoomReason, errorCode: ErrorCode, extendedData: [String: JSON] = [:])
    case phaseChanged(room: String, phase: RoomPhase)
    /// Another member changed the room state (`from` nil for server-side changes).
    case roomStateModified(room: String, from: Int64?, diff: RoomStateDiff)
    case beingAbleToCommitChange(room: String, writable: Bool)
    case disconnectWithError(room: String, error: String)
    case kickedWithReason(room: String, code: ErrorCode, reason: String)
    case catchErrorWhenAppendFrame(room: String, memberId: Int64, error: String)
    case magix(MagixEvent)
    case userUpdate(room: String, type: UpdateType, users: [Member])
    case streamUpdate(room: String, type: UpdateType, streams: [MediaStream])
    case extraInfoUpdate(room: String, key: String, value: String)
    case tokenWillExpire(room: String, remaining: Int64)
    case throwError(domain: String, code: ErrorCode, message: String)
    /// Continuity broke: events between `lastAppliedSeq` and the room's
    /// present may never be raised (see `ResyncEvent`).
    case resync(ResyncEvent)

    /// The room the event concerns (nil for `throwError`).
    public var room: String? {
        switch self {
        case .roomStateChanged(let room, _, _, _), .phaseChanged(let room, _), .roomStateModified(let room, _, _),
             .beingAbleToCommitChange(let room, _), .disconnectWithError(let room, _), .kickedWithReason(let room, _, _),
             .catchErrorWhenAppendFrame(let room, _, _), .userUpdate(let room, _, _), .streamUpdate(let room, _, _),
             .extraInfoUpdate(let room, _, _), .tokenWillExpire(let room, _):
            return room
        case .magix(let event):
            return event.room
        case .resync(let event):
            return event.room
        case .throwError:
            return nil
        }
    }
}
