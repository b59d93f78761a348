import Dispatch
import RoomKitProtocol

extension RoomHost {
    /// Raises one event: loop observers first (synchronously, in order), then
    /// the stream subscribers, then the delegates and magix listeners on the
    /// callback queue (or the loop).
    func emit(_ event: RoomEvent, room: Room?) {
        for observer in observers { observer(event) }
        broadcaster.yield(event)
        let hostDelegate = delegate
        let common = commonCallbacks
        let roomDelegate = room?.delegate
        let listeners: [@Sendable (MagixEvent) -> Void]
        if case .magix(let magix) = event, let room {
            listeners = room.magixHandlers(for: magix.event)
        } else {
            listeners = []
        }
        guard hostDelegate != nil || common != nil || roomDelegate != nil || !listeners.isEmpty else { return }
        let deliver: @Sendable () -> Void = {
            Self.deliver(event, room: room, host: hostDelegate, common: common, roomDelegate: roomDelegate, listeners: listeners)
        }
        if let callbackQueue {
            callbackQueue.async(execute: deliver)
        } else {
            deliver()
        }
    }

    private static func deliver(_ event: RoomEvent, room: Room?, host: (any RoomHostDelegate)?, common: (any CommonCallbacks)?,
                                roomDelegate: (any RoomDelegate)?, listeners: [@Sendable (MagixEvent) -> Void]) {
        switch event {
        case .roomStateChanged(let roomID, let reason, let code, let extendedData):
            host?.onRoomStateChanged(reason: reason, errorCode: code, extendedData: extendedData, roomID: roomID)
        case .phaseChanged(_, let phase):
            if let room { roomDelegate?.firePhaseChanged(room, phase: phase) }
        case .roomStateModified(_, _, let diff):
            if let room { roomDelegate?.fireRoomStateChanged(room, diff: diff) }
        case .beingAbleToCommitChange(_, let writable):
            if let room { roomDelegate?.fireBeingAbleToCommitChange(room, writable: writable) }
        case .disconnectWithError(_, let error):
            if let room { roomDelegate?.fireDisconnectWithError(room, error: error) }
        case .kickedWithReason(_, let code, let reason):
            if let room { roomDelegate?.fireKickedWithReason(room, code: code, reason: reason) }
        case .catchErrorWhenAppendFrame(_, let memberId, let error):
            if let room { roomDelegate?.fireCatchErrorWhenAppendFrame(room, memberId: memberId, error: error) }
        case .magix(let magix):
            if let room { roomDelegate?.fireMagixEvent(room, event: magix) }
            for listener in listeners { listener(magix) }
        case .userUpdate(let roomID, let type, let users):
            host?.onRoomUserUpdate(roomID: roomID, type: type, users: users)
        case .streamUpdate(let roomID, let type, let streams):
            host?.onRoomStreamUpdate(roomID: roomID, type: type, streams: streams)
        case .extraInfoUpdate(let roomID, let key, let value):
            host?.onRoomExtraInfoUpdate(roomID: roomID, key: key, value: value)
        case .tokenWillExpire(let roomID, let remaining):
            host?.onRoomTokenWillExpire(roomID: roomID, remainingSeconds: remaining)
        case .resync(let resync):
            if let room { roomDelegate?.fireResync(room, event: resync) }
            host?.onRoomResync(resync)
        case .throwError(let domain, let code, let message):
            common?.throwError(domain: domain, code: code, message: message)
        }
    }
}
