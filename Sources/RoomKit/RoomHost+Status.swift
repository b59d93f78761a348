/// The shared connection's state, as an operator sees it (roombot's
/// `GET /v1/bot` and dashboard header).
public struct ConnectionStatus: Sendable, Hashable {
    /// One word: `idle`, `connecting`, `greeting`, `ready` or `backingOff`.
    public var state: String
    /// Failed attempts since the last ready connection (0 when ready).
    public var attempt: Int
    /// For `backingOff`: milliseconds until the next attempt.
    public var retryInMs: Int64?
    /// Whether the server batches this connection's messages (it confirmed
    /// the hello's `batch`; docs/PROTOCOL.md "Batched messages"). False
    /// until the connection is ready, and when `batchesMessages` is off.
    public var receivesBatches = false

    /// Whether rooms can send requests now.
    public var isReady: Bool { state == "ready" }
}

extension RoomHost {
    /// The server connection's state now. Loop thread only (it reads the
    /// engine's `LoopBound` state, which fails loudly off the loop).
    public var connectionStatus: ConnectionStatus {
        let link = self.link
        switch link.state {
        case .idle: return ConnectionStatus(state: "idle", attempt: link.attempt)
        case .connecting: return ConnectionStatus(state: "connecting", attempt: link.attempt)
        case .greeting: return ConnectionStatus(state: "greeting", attempt: link.attempt)
        case .ready: return ConnectionStatus(state: "ready", attempt: 0, receivesBatches: receivesBatches)
        case .backingOff(let until):
            return ConnectionStatus(state: "backingOff", attempt: link.attempt, retryInMs: max(0, until - nowMonotonic))
        }
    }
}
