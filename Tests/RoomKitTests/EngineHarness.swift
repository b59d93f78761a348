import Foundation
import Logging
import RoomKit
import RoomKitLoop
import RoomKitProtocol
import RoomKitServer
import RoomKitTestSupport
import XCTest

/// Records every event a host raises, in order (observer on the loop).
final class EventRecorder: @unchecked Sendable {
    // @unchecked Sendable: guarded by lock.
    private let lock = NSLock()
    private var events: [RoomEvent] = []

    var all: [RoomEvent] {
        lock.lock(); defer { lock.unlock() }
        return events
    }

    func record(_ event: RoomEvent) {
        lock.lock(); events.append(event); lock.unlock()
    }

    /// "REASON code" strings for one room, in order.
    func reasons(_ room: String) -> [String] {
        all.compactMap {
            if case .roomStateChanged(room, let reason, let code, _) = $0 { return "\(reason) \(code.rawValue)" }
            return nil
        }
    }

    func phases(_ room: String) -> [RoomPhase] {
        all.compactMap {
            if case .phaseChanged(room, let phase) = $0 { return phase }
            return nil
        }
    }

    func count(where predicate: (RoomEvent) -> Bool) -> Int { all.filter(predicate).count }
}

/// The shared in-process roomd and client loop (`RoomdFixture`), plus a
/// fault proxy in front of the server. Timeouts are shortened.
final class EngineHarness {
    let fixture: RoomdFixture
    let proxy: FaultProxy
    var serverLoop: EventLoop { fixture.serverLoop }
    let clientLoop: EventLoop
    var server: RoomServer { fixture.server }
    var secret: String { fixture.secret }

    struct Timing {
        var heartbeatInterval: Duration = .milliseconds(200)
        var heartbeatTimeout: Duration = .milliseconds(1500)
        var retention: Duration = .seconds(20)
    }

    /// `configure` may change the server's configuration last (limits, for example).
    init(timing: Timing = Timing(), configure: (inout ServerConfiguration) -> Void = { _ in }) throws {
        fixture = try RoomdFixture(name: "engine", secret: "test-secret") {
            $0.heartbeatInterval = timing.heartbeatInterval
            $0.heartbeatTimeout = timing.heartbeatTimeout
            $0.sessionRetention = timing.retention
            $0.tokenExpiryNotice = .seconds(1)
            configure(&$0)
        }
        clientLoop = try fixture.clientLoop
        proxy = FaultProxy(targetPort: fixture.server.port)
    }

    func token(_ user: String, room: String = "*", role: TokenRole = .writer, ttl: Int64 = 3600) -> String {
        fixture.token(user, room: room, role: role, ttl: ttl)
    }

    /// A host through the proxy (`viaProxy`) or straight to the server.
    func host(viaProxy: Bool = true, recorder: EventRecorder? = nil, tokenProvider: (any TokenProvider)? = nil,
              configure: (inout RoomHostConfiguration) -> Void = { _ in }) throws -> RoomHost {
        let host = try fixture.host(port: viaProxy ? proxy.port : server.port, tokenProvider: tokenProvider) {
            $0.loginTimeout = .seconds(3)
            $0.reconnectWindow = .seconds(10)
            $0.backoffFirst = .milliseconds(100)
            $0.backoffCap = .milliseconds(300)
            configure(&$0)
        }
        if let recorder { host.addObserver { recorder.record($0) } }
        return host
    }

    func user(_ id: String) -> LoginUser { LoginUser(id: id, name: id.uppercased()) }

    /// Shuts everything down; the loops must close cleanly.
    func close() async throws {
        proxy.stop()
        try await fixture.close()
    }
}
