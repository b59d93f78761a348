import Dispatch
import RoomKitProtocol

extension RoomHost {
    /// Raises one event, once to each listener: the loop observers first
    /// (synchronously, in order; plugin dispatch is one of them), then the
    /// stream subscribers, then the host delegates, the common callbacks, the
    /// room's delegate and magix listeners on the callback queue (or the loop).
    func emit(_ event: RoomEvent, room: Room?) {
        let started = metrics.clock()
        broadcaster.yield(event) { [applyingReplay] in .room(event, replayed: applyingReplay) }
        metrics.raised(event, since: started)
        let (hostDelegates, common) = callbacks.listeners
        let roomDelegate = room?.delegate
        let listeners: [@Sendable (MagixEvent) -> Void]
        if case .magix(let magix) = event, let room {
            listeners = room.magixHandlers(for: magix.event)
        } else {
            listeners = []
        }
        guard !hostDelegates.isEmpty || common != nil || roomDelegate != nil || !listeners.isEmpty else { return }
        let deliver: @Sendable () -> Void = {
            Self.deliver(event, room: room, hosts: hostDelegates, common: common, roomDelegate: roomDelegate, listeners: listeners)
        }
        if let callbackQueue {
            callbackQueue.async(execute: deliver)
        } else {
            deliver()
        }
    }

    private static func deliver(_ event: RoomEvent, room: Room?, hosts: [any RoomHostDelegate], common: (any CommonCallbacks)?,
                                roomDelegate: (any RoomDelegate)?, listeners: [@Sendable (MagixEvent) -> Void]) {
        switch event {
        case .roomStateChanged(let roomID, let reason, let code, let extendedData):
            for host in hosts { host.onRoomStateChanged(reason: reason, errorCode: code, extendedData: extendedData, roomID: roomID) }
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
            for host in hosts { host.onRoomUserUpdate(roomID: roomID, type: type, users: users) }
        case .streamUpdate(let roomID, let type, let streams):
            for host in hosts { host.onRoomStreamUpdate(roomID: roomID, type: type, streams: streams) }
        case .extraInfoUpdate(let roomID, let key, let value):
            for host in hosts { host.onRoomExtraInfoUpdate(roomID: roomID, key: key, value: value) }
        case .tokenWillExpire(let roomID, let remaining):
            for host in hosts { host.onRoomTokenWillExpire(roomID: roomID, remainingSeconds: remaining) }
        case .resync(let resync):
            if let room { roomDelegate?.fireResync(room, event: resync) }
            for host in hosts { host.onRoomResync(resync) }
        case .throwError(let domain, let code, let message):
            common?.throwError(domain: domain, code: code, message: message)
        }
    }
}
