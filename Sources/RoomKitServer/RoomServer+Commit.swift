import RoomKitLoop
import RoomKitProtocol
import RoomKitServerCore

/// A message sent while the turn's transaction was open, held until it commits.
struct HeldSend {
    /// What a failed commit does with a held message.
    enum Kind: Equatable {
        /// A room event's push (or a replayed event): dropped, it was never stored.
        case event
        /// Part of the answer to request `id`, which wrote: the request is
        /// answered with the storage error instead (once), the rest dropped.
        case request(Int64)
        /// Anything else (pongs, refusals, kicks): delivered as is.
        case plain
    }

    let link: ClientLink
    let frame: WebSocketFrame
    var kind: Kind
}

/// Group commit (PROTOCOL.md §10 unchanged: an event is stored durably before
/// any member receives it).
///
/// Every write of a loop turn joins one SQLite transaction (RoomStore+Batch),
/// and every message the turn sends while it is open is held in `held`. At the
/// end of the turn (`LoopTurnHook`, also before HTTP requests and at stop)
/// `commitPending` commits once and then sends what was held, in order (a
/// batching connection's messages wait in its batch instead, unreleased
/// until the commit: PushBatcher.swift). A
/// request's own failure (its event refused by the store) is still answered
/// at once with 1009500 and takes nothing else back. When the commit itself
/// fails, nothing of the turn is stored: the in-memory rooms and sessions are
/// reloaded from storage (the last committed state), the live connections'
/// sessions re-attached, each request of the turn that wrote is answered
/// 1009500, and the turn's pushes are dropped.
extension RoomServer {
    /// Runs request `id` (`body`: `handle` or `handleMagix`), noting
    /// whether it wrote: then the messages it sent to its own connection are
    /// its answer, replaced by the storage error should the turn's commit fail.
    func tracked(id: Int64, link: ClientLink, _ body: () -> Void) {
        let writesBefore = store.writes
        let heldBefore = held.count
        let unreleasedBefore = link.batch.unreleased.count
        body()
        guard store.writes != writesBefore else { return }
        for index in heldBefore..<held.count where held[index].link === link && held[index].kind == .plain {
            held[index].kind = .request(id)
        }
        link.batch.markRequest(id, from: unreleasedBefore)
    }

    /// Commits the open transaction once it has been open for
    /// `commitDeadline`: called before each received message is read, so a
    /// long loop turn (a socket's whole 256 KiB read of pipelined requests)
    /// commits in slices of about that much work instead of once at its end,
    /// and the replies and pushes of each slice are queued at once. Nothing
    /// is released before its commit either way.
    func commitIfDue() {
        guard store.inTransaction,
              monotonicNanoseconds() &- store.openedAt >= commitDeadlineNanoseconds else { return }
        commitPending()
    }

    var commitDeadlineNanoseconds: UInt64 {
        let (seconds, attoseconds) = configuration.commitDeadline.components
        return UInt64(max(0, seconds)) * 1_000_000_000 + UInt64(max(0, attoseconds / 1_000_000_000))
    }

    /// Commits the turn's transaction and sends what it held. Call only
    /// where no room or session is referenced further down the stack (the
    /// end of a loop turn, an HTTP request's start, stop): a failed commit
    /// replaces them all.
    func commitPending() {
        guard store.inTransaction else { return }
        let sends = held
        held.removeAll(keepingCapacity: true)
        metrics.commits += 1
        do {
            try store.commit()
        } catch {
            metrics.commitFailures += 1
            logger.error("turn not stored; its events are dropped", metadata: [
                "error": "\(error)", "messages": "\(batchedLinks.reduce(sends.count) { $0 + $1.batch.unreleased.count })",
            ])
            reloadAfterFailedCommit(now: wallMilliseconds())
            var answered = Set<HeldRequest>()
            // Batching connections' messages of the turn wait in their batches.
            for link in batchedLinks {
                for (frame, kind) in link.batch.takeUnreleased() {
                    afterFailedCommit(HeldSend(link: link, frame: frame, kind: kind), answered: &answered)
                }
            }
            for send in sends {
                afterFailedCommit(send, answered: &answered)
            }
            return
        }
        for link in batchedLinks {
            link.batch.release()
        }
        for send in sends {
            send.link.deliver(send.frame)
        }
    }

    /// What a failed commit does with a message of its turn: an event's
    /// push is dropped, the first message of a writing request's answer
    /// becomes the storage error (the rest dropped), anything else is sent.
    private func afterFailedCommit(_ send: HeldSend, answered: inout Set<HeldRequest>) {
        switch send.kind {
        case .event:
            return
        case .request(let id):
            guard answered.insert(HeldRequest(link: ObjectIdentifier(send.link), id: id)).inserted else { return }
            let refusal = ProtocolError(code: .internalError, message: "storage failed")
            metrics.sent(refusal)
            send.link.deliver(WebSocketFrame(bytes: ServerMessage.replyError(id: id, refusal).serialized()))
        case .plain:
            send.link.deliver(send.frame)
        }
    }

    /// Puts the in-memory rooms and sessions back to what storage holds
    /// after a failed commit, and re-attaches the live connections' sessions
    /// that storage still has.
    private func reloadAfterFailedCommit(now: Int64) {
        let previous = rooms
        rooms = [:]
        do {
            try restore(now: now)
        } catch {
            logger.critical("cannot reload rooms after a failed commit; keeping memory as it was",
                            metadata: ["error": "\(error)"])
            rooms = previous
            return
        }
        for link in links.values {
            var attached: [String: ServerSession] = [:]
            for (roomID, old) in link.sessions {
                guard let session = rooms[roomID]?.sessions[old.id], session.endedCode == nil else { continue }
                session.link = link
                session.rules.reattached()
                attached[roomID] = session
            }
            link.sessions = attached
        }
    }
}

private struct HeldRequest: Hashable {
    let link: ObjectIdentifier
    let id: Int64
}
