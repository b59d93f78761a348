import RoomKitLoop
import RoomKitProtocol

// The append path's shared tail and its magix fast path (issue #26): every
// room event is encoded once (`EncodedPush`), and those bytes are what the
// store keeps, members receive, resume replays and recordings write.
extension RoomServer {
    /// A magix request read by `ClientEnvelope.scanMagix` (no `JSON` tree
    /// of the request or of its push): the same checks, errors and reply as
    /// `handle` gives a decoded `.magix`, then `appendEncoded`.
    func handleMagix(_ request: MagixRequestFields, link: ClientLink, now: Int64) {
        do throws(ProtocolError) {
            let session = try writableSession(request.room, link: link, op: .magix)
            let room = session.room
            let seq = room.seq + 1
            let push = EncodedPush.magix(room: room.id, seq: seq, from: session.memberId, event: request.event,
                                         payload: request.payload, payloadSorted: request.payloadSorted, to: request.to)
            // A magix event changes no room content (RoomContentModel.apply): no model to apply it to.
            try appendEncoded(push, seq: seq, changed: nil, to: room, origin: session, recipients: request.to, now: now)
            link.send(WebSocketFrame(bytes: EncodedPush.seqReply(id: request.id, seq: seq)))
        } catch {
            metrics.sent(error)
            link.send(ServerMessage.replyError(id: request.id, error))
        }
    }

    /// The event `push` (seq `seq`) of `room`: stored (with a snapshot when
    /// one is due), then `changed` (the room's model with the event applied;
    /// nil when the event changes nothing) becomes the room's, the event is
    /// remembered for resume and sent, as one shared frame, to every
    /// attached session except `origin`, and only to `recipients` (user
    /// IDs) when given. Nothing changes when the store refuses the event.
    @discardableResult
    func appendEncoded(_ push: EncodedPush, seq: Int64, changed: RoomModel?, to room: ServerRoom,
                       origin: ServerSession?, mutation: JSON? = nil, recipients: [String]?,
                       now: Int64) throws(ProtocolError) -> Int64 {
        // Times never decrease along a room's seq (a clock stepped back
        // stamps the previous time), which EventReads.countEvents relies on.
        let ts = max(now, room.recovery.newestTimestamp ?? now)
        room.eventsSinceSnapshot += 1
        let snapshotDue = room.eventsSinceSnapshot >= configuration.snapshotEvery
        let commitStarted = monotonicNanoseconds()
        do {
            try store.append(StoredEvent(room: room.id, seq: seq, ts: ts, push: push.bytes, timeAt: push.timeAt,
                                         mutation: mutation, recipients: recipients),
                             // Spelled out: JSON is ExpressibleByNilLiteral, so a bare
                             // `cond ? json : nil` would store JSON.null, not "no snapshot".
                             snapshotAfter: snapshotDue ? Optional((changed ?? room.model).json) : Optional<JSON>.none)
        } catch {
            logger.error("event not stored", metadata: ["room": "\(room.id)", "error": "\(error)"])
            throw ProtocolError(code: .internalError, message: "storage failed")
        }
        exporter.commitLatency.recordSince(commitStarted)
        if snapshotDue { room.eventsSinceSnapshot = 0 }
        if let changed { room.model = changed }
        room.seq = seq
        metrics.eventsTotal += 1
        let frame = WebSocketFrame(bytes: push.bytes)
        remember(RecoveryEntry(seq: seq, ts: ts, frame: frame, recipients: recipients), in: room, now: now)
        let fanoutStarted = monotonicNanoseconds()
        if let recipients {
            let allowed = Set(recipients)
            for session in room.sessions.values where session !== origin && allowed.contains(session.userId) {
                session.link?.send(frame, kind: .event)
            }
        } else {
            for session in room.sessions.values where session !== origin {
                session.link?.send(frame, kind: .event)
            }
        }
        exporter.fanoutLatency.recordSince(fanoutStarted)
        return seq
    }
}
