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
    /// The payload. An event read straight from the received bytes keeps its
    /// payload as that text until it is first read here (parsed once).
    public var payload: JSON { storage.value }
    /// Whether the event arrived in a resume's replay (PROTOCOL.md §6): it
    /// happened while this session was away, and is raised now, once.
    public var replayed = false
    /// The payload as it arrived.
    let storage: MagixPayloadStorage

    init(room: String, seq: Int64, from: Int64, event: String, payload: JSON, replayed: Bool = false) {
        self.init(room: room, seq: seq, from: from, event: event, payload: .value(payload), replayed: replayed)
    }

    init(room: String, seq: Int64, from: Int64, event: String, payload: JSONPayload, replayed: Bool = false) {
        self.room = room
        self.seq = seq
        self.from = from
        self.event = event
        self.replayed = replayed
        switch payload {
        case .value(let value): storage = .value(value)
        case .text(let text): storage = .text(LazyJSONText(text))
        }
    }

    /// Appends the payload's compact JSON: the received text as is when it
    /// was kept (canonical: what serializing the parsed value writes, up to
    /// object member order), else the value serialized.
    func appendPayloadJSON(to buffer: inout [UInt8]) {
        switch storage {
        case .value(let value): value.serialize(into: &buffer)
        case .text(let lazy): lazy.text.serialize(into: &buffer)
        }
    }

    public static func == (lhs: MagixEvent, rhs: MagixEvent) -> Bool {
        lhs.room == rhs.room && lhs.seq == rhs.seq && lhs.from == rhs.from && lhs.event == rhs.event
            && lhs.replayed == rhs.replayed && lhs.payload == rhs.payload
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(room)
        hasher.combine(seq)
        hasher.combine(from)
        hasher.combine(event)
        hasher.combine(payload)
        hasher.combine(replayed)
    }
}

/// A magix payload: a value, or received text parsed on first use.
enum MagixPayloadStorage: Sendable {
    case value(JSON)
    case text(LazyJSONText)

    var value: JSON {
        switch self {
        case .value(let value): return value
        case .text(let lazy): return lazy.value
        }
    }
}

/// Received JSON text and its value, parsed on first use (any thread) and
/// kept. Lock-free (an atomic pointer to the parsed value, so the hot path,
/// which never reads the value, pays one object and no lock): readers that
/// race may each parse, the first to publish wins and the others use its value.
final class LazyJSONText: Sendable {
    let text: JSONText
    /// An `Unmanaged<ParsedJSON>` bit pattern once parsed, else 0.
    private let parsed = Atomic<UInt>(0)

    init(_ text: JSONText) { self.text = text }

    deinit {
        let bits = parsed.load(ordering: .acquiring)
        if bits != 0 { Unmanaged<ParsedJSON>.fromOpaque(UnsafeRawPointer(bitPattern: bits)!).release() }
    }

    var value: JSON {
        let bits = parsed.load(ordering: .acquiring)
        if bits != 0 {
            return Unmanaged<ParsedJSON>.fromOpaque(UnsafeRawPointer(bitPattern: bits)!).takeUnretainedValue().value
        }
        let made = Unmanaged.passRetained(ParsedJSON(text.value))
        let (exchanged, winner) = parsed.compareExchange(expected: 0, desired: UInt(bitPattern: made.toOpaque()),
                                                         ordering: .acquiringAndReleasing)
        if exchanged { return made.takeUnretainedValue().value }
        made.release()
        return Unmanaged<ParsedJSON>.fromOpaque(UnsafeRawPointer(bitPattern: winner)!).takeUnretainedValue().value
    }
}

/// A parsed value, published once by `LazyJSONText`.
final class ParsedJSON: Sendable {
    let value: JSON
    init(_ value: JSON) { self.value = value }
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
