import Foundation
import RoomKitLoop
import RoomKitProtocol

// The engine's only ties to real time and real sockets, behind one seam: a
// live host uses the loop's clock and timers and libwebsockets
// (`LiveEnvironment`); the simulator (RoomKitSimulator, `roombot simulate`)
// runs the same engine on a virtual clock against an in-memory server.
// Package-visible: not public API.

/// A connection as the engine uses it. `WebSocketConnection` is one.
package protocol EngineConnection: AnyObject {
    @discardableResult func send(_ frame: WebSocketFrame) -> Bool
    func close(code: UInt16, reason: String, discardQueued: Bool)
    func abort()
}

extension WebSocketConnection: EngineConnection {}

/// A repeating timer the engine can stop.
package protocol EngineTimer: AnyObject {
    func cancel()
}

extension LoopTimer: EngineTimer {}

/// Time, timers, connections and randomness for one host. Every member is
/// used on the host's loop thread only.
package protocol EngineEnvironment: AnyObject {
    /// A monotonic clock, in ms.
    var nowMilliseconds: UInt64 { get }
    /// Wall-clock time, ms since the epoch (pings, token expiry).
    var wallMilliseconds: Int64 { get }
    /// Calls `body` every `interval` until cancelled.
    func scheduleRepeating(every interval: Duration, _ body: @escaping () -> Void) throws -> any EngineTimer
    /// Opens a connection to `url` for `host`, which hears about it through
    /// `transportDidOpen`, `transportDidReceive` and `transportDidClose`.
    func connect(to url: WebSocketURL, for host: RoomHost) throws -> any EngineConnection
    /// A fixed seed for the backoff jitter (deterministic runs), or nil for
    /// the system's generator.
    var jitterSeed: UInt64? { get }
    /// The host shut down: release what `connect` made.
    func shutdown()
}

/// The live environment: the loop's clock and timers, and one shared
/// libwebsockets client per loop (hosts come and go without destroying lws
/// contexts).
final class LiveEnvironment: EngineEnvironment {
    private let loop: EventLoop
    private let transport: WebSocketClientConfiguration
    private var client: WebSocketClient?

    init(loop: EventLoop, transport: WebSocketClientConfiguration) {
        self.loop = loop
        self.transport = transport
    }

    var nowMilliseconds: UInt64 { loop.nowMilliseconds }
    var wallMilliseconds: Int64 { RoomKitProtocol.wallMilliseconds() }
    var jitterSeed: UInt64? { nil }

    func scheduleRepeating(every interval: Duration, _ body: @escaping () -> Void) throws -> any EngineTimer {
        try loop.scheduleTimer(after: interval, repeating: interval) { _ in body() }
    }

    func connect(to url: WebSocketURL, for host: RoomHost) throws -> any EngineConnection {
        if client == nil { client = try WebSocketClient.shared(on: loop, configuration: transport) }
        return client!.connect(to: url, subprotocol: "room.v1", delegate: HostConnectionDelegate(host: host))
    }

    func shutdown() {
        client?.shutdown()  // the shared client outlives hosts; this only drops the reference
        client = nil
    }
}

/// The backoff jitter's generator: the system's, or SplitMix64 from a seed.
struct JitterGenerator: RandomNumberGenerator {
    private var system = SystemRandomNumberGenerator()
    private var state: UInt64?

    init(seed: UInt64?) { state = seed }

    mutating func next() -> UInt64 {
        guard var z = state else { return system.next() }
        z &+= 0x9E37_79B9_7F4A_7C15
        state = z
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

extension RoomHost {
    /// The transport connected. Loop thread.
    package func transportDidOpen(_ opened: any EngineConnection) {
        guard opened === connection else { return opened.abort() }
        linkOpened()
    }

    /// A message arrived. Loop thread.
    package func transportDidReceive(_ from: any EngineConnection, _ message: WebSocketMessage) {
        guard from === connection else { return }
        received(message)
    }

    /// The transport closed or failed. Loop thread.
    /// `kind`: one word for how (WebSocketCloseEvent.kind), the `reason`
    /// label of `roomkit_reconnects_total`.
    package func transportDidClose(_ closed: any EngineConnection, why: String, kind: String = "closed") {
        guard closed === connection else { return }
        connection = nil
        linkClosed(why, kind: kind)
    }
}
