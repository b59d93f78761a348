import RoomKitLoop
import RoomKitProtocol

extension RoomServer {
    /// Admits a login carrying `fence` (PROTOCOL.md §6): a fence lower than
    /// the highest stored for (room, user) is refused with 1009008 and the
    /// current fence, kicking nobody; an equal or higher one is stored
    /// (durably, before the login proceeds) and admitted. Returns whether
    /// the login may proceed; when it returns false the reply has been sent.
    /// Loop thread only.
    func admitFence(_ fence: Int64, room: String, user: String, id: Int64, link: ClientLink) -> Bool {
        let current: Int64?
        do {
            current = try store.fence(room: room, user: user)
            if let current, fence < current {
                logger.notice("login refused: stale fence", metadata: [
                    "room": "\(room)", "user": "\(user)", "fence": .stringConvertible(fence), "current": .stringConvertible(current)])
                let error = ProtocolError(code: .staleFence, message: "fence \(fence) is lower than \(current)")
                metrics.sent(error)
                var reply = ServerMessage.replyError(id: id, error).objectValue ?? [:]
                reply["fence"] = .int(current)
                link.send(.object(reply))
                return false
            }
            if current != fence {
                try store.raiseFence(room: room, user: user, to: fence)
            }
        } catch {
            logger.error("fence not stored", metadata: ["room": "\(room)", "error": "\(error)"])
            metrics.sent(ProtocolError(code: .internalError, message: ""))
            link.send(ServerMessage.replyError(id: id, ProtocolError(code: .internalError, message: "storage failed")))
            return false
        }
        return true
    }
}
