import Foundation
import RoomKitLoop
import RoomKitProtocol

// The outbox: requests queue here and leave at the pace the server allows
// (the hello reply's advertised bucket, or the configured one), so a burst
// of logins or resumes never trips 1009004.
extension RoomHost {

    /// Queues a request; `completion` runs on the loop with the reply's fields
    /// or a `RoomError` (the server's code, a timeout, or an interruption).
    func send(_ request: ClientRequest, room: String?, timeout: Bool,
              scannedLogin: ((LoginReply) -> Void)? = nil,
              completion: @escaping (Result<[String: JSON], RoomError>) -> Void) {
        let id = nextRequestID
        nextRequestID += 1
        let envelope = ClientEnvelope(id: id, room: room, request: request)
        let deadline = timeout ? UInt64(nowMonotonic + configuration.requestTimeout.milliseconds) : nil
        pending[id] = PendingRequest(room: room, deadline: deadline, completion: completion, scannedLogin: scannedLogin)
        if deadline != nil { timedRequests.insert(id) }
        outbox.append((id, envelope))
        flushOutbox()
    }

    /// How many requests may be on the wire unanswered at once. A reconnect
    /// resumes every session (300,000 of them) at once: sent as fast as the
    /// service bucket allows, their replies piled up in the server's
    /// outbound queue and the bot's loop (issue #26). Bounded, they leave as
    /// answers come in, a slice per loop turn (the engine's timer flushes).
    /// The bound is also the work queued ahead of a ping at the server: with
    /// 4,096 resumes ahead of it, a just-restarted roomd on a busy machine
    /// answered the ping after more than 20 s, and the bot dropped the
    /// connection it was resuming on.
    static let maxRequestsInFlight = 1024

    /// Sends queued requests as the pacing bucket and the in-flight bound allow.
    func flushOutbox() {
        guard link.isReady, let connection else { return }
        let now = environment.nowMilliseconds
        if lastRefill == 0 { lastRefill = now }
        bucket = min(pacing.burst, bucket + Double(now - lastRefill) / 1000 * pacing.perSecond)
        lastRefill = now
        // Pending requests not in the outbox are on the wire (withdrawn ones
        // left the pending table, so this never counts too many).
        var inFlight = pending.count - (outbox.count - outboxHead)
        while outboxHead < outbox.count && bucket >= 1 && inFlight < Self.maxRequestsInFlight {
            let (id, envelope) = outbox[outboxHead]
            outboxHead += 1
            guard pending[id] != nil else { continue }
            bucket -= 1
            inFlight += 1
            connection.send(WebSocketFrame(bytes: envelope.serialized()))
        }
        if outboxHead == outbox.count {
            outbox.removeAll(keepingCapacity: true)
            outboxHead = 0
        }
    }

    /// Takes request `id` back if it is still queued (not yet on the wire).
    /// Its completion never runs. Returns whether it was withdrawn.
    func withdrawQueued(_ id: Int64) -> Bool {
        guard pending[id] != nil, outbox[outboxHead...].contains(where: { $0.id == id }) else { return false }
        pending.removeValue(forKey: id)  // flushOutbox skips requests no longer pending
        return true
    }

    func failPending(_ error: RoomError) {
        let all = pending
        pending.removeAll()
        outbox.removeAll()
        outboxHead = 0
        for request in all.values { request.completion(.failure(error)) }
    }

    /// Paces to the bucket the hello reply advertised (95% of its refill,
    /// 75% of its burst, as the defaults are of §1's 200/200), or keeps the
    /// configuration's when it advertised none.
    func adoptPacing(burst: Double?, perSecond: Double?) {
        guard configuration.adoptsAdvertisedPacing, let burst, let perSecond, burst >= 1, perSecond > 0 else { return }
        pacing = (max(1, (burst * 0.75).rounded(.down)), perSecond * 0.95)
        bucket = pacing.burst - 1
        lastRefill = environment.nowMilliseconds
    }
}
