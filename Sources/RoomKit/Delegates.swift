import Foundation
import RoomKitProtocol

/// Room callbacks (the whiteboard seed's `WhiteRoomCallbackDelegate`). All
/// optional; delivered on the host's callback queue (default: the loop).
public protocol RoomDelegate: AnyObject, Sendable {
    func firePhaseChanged(_ room: Room, phase: RoomPhase)
    /// Another member changed the room state; `diff` holds only what changed.
    /// The room's synchronous properties already show the new state.
    func fireRoomStateChanged(_ room: Room, diff: RoomStateDiff)
    func fireBeingAbleToCommitChange(_ room: Room, writable: Bool)
    func fireDisconnectWithError(_ room: Room, error: String)
    func fireKickedWithReason(_ room: Room, code: ErrorCode, reason: String)
    func fireCatchErrorWhenAppendFrame(_ room: Room, memberId: Int64, error: String)
    func fireMagixEvent(_ room: Room, event: MagixEvent)
    /// Continuity broke: rebuild whatever was derived from the room's events
    /// (the cache already holds the adopted snapshot).
    func fireResync(_ room: Room, event: ResyncEvent)
}

extension RoomDelegate {
    public func firePhaseChanged(_ room: Room, phase: RoomPhase) {}
    public func fireRoomStateChanged(_ room: Room, diff: RoomStateDiff) {}
    public func fireBeingAbleToCommitChange(_ room: Room, writable: Bool) {}
    public func fireDisconnectWithError(_ room: Room, error: String) {}
    public func fireKickedWithReason(_ room: Room, code: ErrorCode, reason: String) {}
    public func fireCatchErrorWhenAppendFrame(_ room: Room, memberId: Int64, error: String) {}
    public func fireMagixEvent(_ room: Room, event: MagixEvent) {}
    public func fireResync(_ room: Room, event: ResyncEvent) {}
}

/// Host-wide callbacks (the RTC seed's event handler). All optional.
public protocol RoomHostDelegate: AnyObject, Sendable {
    func onRoomStateChanged(reason: RoomReason, errorCode: ErrorCode, extendedData: [String: JSON], roomID: String)
    func onRoomUserUpdate(roomID: String, type: UpdateType, users: [Member])
    func onRoomStreamUpdate(roomID: String, type: UpdateType, streams: [MediaStream])
    func onRoomExtraInfoUpdate(roomID: String, key: String, value: String)
    func onRoomTokenWillExpire(roomID: String, remainingSeconds: Int64)
    /// A room's continuity broke (see `ResyncEvent`).
    func onRoomResync(_ event: ResyncEvent)
}

extension RoomHostDelegate {
    public func onRoomStateChanged(reason: RoomReason, errorCode: ErrorCode, extendedData: [String: JSON], roomID: String) {}
    public func onRoomUserUpdate(roomID: String, type: UpdateType, users: [Member]) {}
    public func onRoomStreamUpdate(roomID: String, type: UpdateType, streams: [MediaStream]) {}
    public func onRoomExtraInfoUpdate(roomID: String, key: String, value: String) {}
    public func onRoomTokenWillExpire(roomID: String, remainingSeconds: Int64) {}
    public func onRoomResync(_ event: ResyncEvent) {}
}

/// The common callbacks (the whiteboard seed's `WhiteCommonCallbackDelegate`).
public protocol CommonCallbacks: AnyObject, Sendable {
    /// An error no request was waiting for (server `error` pushes, failed renewals).
    func throwError(domain: String, code: ErrorCode, message: String)
    /// Rewrites every URL the engine sends (image `url`, scene ppt `src`)
    /// before it goes out. Runs off the loop.
    func urlInterrupter(_ url: String) async -> String
}

extension CommonCallbacks {
    public func throwError(domain: String, code: ErrorCode, message: String) {}
    public func urlInterrupter(_ url: String) async -> String { url }
}
