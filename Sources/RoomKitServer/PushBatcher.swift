import Logging
import RoomKitLoop
import RoomKitProtocol

// Batched messages (docs/PROTOCOL.md, Part 2, "Batched messages"; an
// extension). A client whose hello carried `"batch":true` gets, after the
// hello reply, every message the server sends it in one loop turn joined
// into one WebSocket text message (`MessageBatch`: line feeds between
// compact JSON objects), cut so that none exceeds `maxMessageBytes`. One
// `lws_write` and one `send` per connection per turn instead of one per
// push. libwebsockets still frames the one message; nothing here writes a
// WebSocket header. Clients that did not ask are not touched: their
// messages take `ClientLink.deliver`'s old path, byte for byte.

/// One connection's batching state. Loop thread only.
struct LinkBatch {
    /// Whether, and from which message on, the connection's messages are batched.
    enum Mode {
        /// The client did not ask: every message is its own WebSocket message.
        case off
        /// The hello asked and was accepted: messages go out one by one up
        /// to and including this frame (the hello reply, which tells the
        /// client that batching starts after it), then batching starts.
        case afterHelloReply(WebSocketFrame)
        /// Every message is held in `pending` until the end of the loop turn.
        case on
    }

    var mode = Mode.off
    /// The messages held for the end of this turn, in order.
    var pending: [WebSocketFrame] = []
    /// What `pending` will take once sent: payloads and separators.
    var pendingBytes = 0
    /// The kinds of the last `unreleased.count` messages of `pending`:
    /// joined while the turn's transaction was open (`ClientLink.send`),
    /// so not to leave before it commits. A commit releases them
    /// (`release`); a failed one sorts them (`takeUnreleased`,
    /// RoomServer+Commit.swift). Holding them here, rather than in the
    /// server's `held` list, spares each delivery a `HeldSend` and its
    /// second pass (issue #26).
    var unreleased: [HeldSend.Kind] = []

    /// Whether messages are joined into batches now.
    var isOn: Bool {
        switch mode {
        case .on: return true
        case .off, .afterHelloReply: return false
        }
    }

    /// Whether `frame` is held for the turn's batch (else it is sent now);
    /// the hello reply passing moves `.afterHelloReply` to `.on`.
    mutating func holds(_ frame: WebSocketFrame) -> Bool {
        switch mode {
        case .off:
            return false
        case .afterHelloReply(let reply):
            if reply === frame { mode = .on }
            return false
        case .on:
            return true
        }
    }

    /// Takes `frame` into the batch, unreleased with `kind` when given
    /// (the turn's transaction is open); true when it is the turn's first.
    mutating func append(_ frame: WebSocketFrame, unreleased kind: HeldSend.Kind? = nil) -> Bool {
        let first = pending.isEmpty
        pendingBytes += frame.count + (first ? 0 : 1)
        pending.append(frame)
        if let kind { unreleased.append(kind) }
        return first
    }

    /// The turn's commit succeeded: every message may leave.
    mutating func release() {
        unreleased.removeAll(keepingCapacity: true)
    }

    /// The turn's commit failed: removes the unreleased messages from the
    /// batch and returns them with their kinds, in order.
    mutating func takeUnreleased() -> [(frame: WebSocketFrame, kind: HeldSend.Kind)] {
        guard !unreleased.isEmpty else { return [] }
        let start = pending.count - unreleased.count
        let taken = zip(pending[start...], unreleased).map { (frame: $0, kind: $1) }
        pending.removeSubrange(start...)
        unreleased.removeAll()
        pendingBytes = pending.reduce(max(0, pending.count - 1)) { $0 + $1.count }
        return taken
    }

    /// Marks the unreleased messages from index `start` of the tail that
    /// are `.plain` as part of the answer to request `id` (`tracked`).
    mutating func markRequest(_ id: Int64, from start: Int) {
        guard start < unreleased.count else { return }
        for index in start..<unreleased.count where unreleased[index] == .plain {
            unreleased[index] = .request(id)
        }
    }

    /// Empties the batch and returns what it held.
    mutating func take() -> [WebSocketFrame] {
        pendingBytes = 0
        unreleased.removeAll()
        defer { pending = [] }
        return pending
    }

    /// Splits `frames` (in order) into the runs that go out as one message
    /// each: as many as fit in `limit` bytes with their separators; a
    /// message larger than `limit` by itself is a run of its own.
    static func runs(of frames: [WebSocketFrame], limit: Int) -> [Range<Int>] {
        var runs: [Range<Int>] = []
        var start = 0
        var size = 0
        for index in frames.indices {
            let count = frames[index].count
            if index > start && size + 1 + count > limit {
                runs.append(start..<index)
                start = index
                size = count
            } else {
                size += index > start ? 1 + count : count
            }
        }
        if start < frames.count { runs.append(start..<frames.count) }
        return runs
    }
}

extension ClientLink {
    /// Holds `frame` for the turn's batch (`deliver` calls this once the
    /// connection batches). The outbound cap counts held bytes as queued
    /// ones: over `maxOutboundBytes` in all, the connection is closed 1013
    /// as before, and the held messages dropped with the queue. `kind` is
    /// given while the turn's transaction is open: the message then waits
    /// for the commit as well (`ClientLink.send`).
    func hold(_ frame: WebSocketFrame, unreleased kind: HeldSend.Kind? = nil) {
        guard connection.state == .open else { return }
        var element = frame
        if frame.contains(byte: MessageBatch.separator) {
            // Not compact JSON (roomd writes none today): its line feeds are
            // whitespace, so the compact re-encoding is the same message.
            guard let json = try? frame.withUnsafeBytes({ try JSON.parse($0) }) else {
                server.logger.error("message not sent: not JSON", metadata: ["connection": "\(id)"])
                return
            }
            element = WebSocketFrame(bytes: json.serialized())
        }
        if batch.append(element, unreleased: kind) { server.batchedLinks.append(self) }
        if connection.bufferedAmount + batch.pendingBytes > server.configuration.maxOutboundBytes {
            server.logger.warning("closing slow connection", metadata: [
                "connection": "\(id)", "queued": "\(connection.bufferedAmount + batch.pendingBytes)"])
            _ = batch.take()
            connection.close(code: 1013, reason: "outbound queue over limit", discardQueued: true)
        }
    }

    /// Sends the turn's batch: one WebSocket message per run that fits in
    /// `limit` bytes; a run of one message is its shared frame as is.
    func flushBatch(limit: Int) {
        assert(batch.unreleased.isEmpty, "a batch flushed before its turn's commit")
        let frames = batch.take()
        guard !frames.isEmpty else { return }
        for run in LinkBatch.runs(of: frames, limit: limit) {
            let message = run.count == 1
                ? frames[run.lowerBound]
                : WebSocketFrame(joining: frames[run], separator: MessageBatch.separator)
            guard connection.send(message) else { return }
            server.metrics.bytesOut += message.count
        }
    }
}

extension RoomServer {
    /// Sends every batching connection's held messages, at the end of the
    /// loop turn (after the turn's commit released them) and before a stop
    /// closes the connections.
    func flushBatches() {
        guard !batchedLinks.isEmpty else { return }
        let links = batchedLinks
        batchedLinks.removeAll(keepingCapacity: true)
        for link in links {
            link.flushBatch(limit: configuration.maxMessageBytes)
        }
    }
}
