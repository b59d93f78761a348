import Foundation
import Logging
import RoomKit
import RoomKitLoop
import RoomKitProtocol
import RoomKitTokens
import RoomKitServer
import ServiceLifecycle
import Synchronization

/// A roomd running inside this process on its own event loop, on 127.0.0.1
/// with a free port and a temporary data directory (removed by `stop`).
/// Timeouts are short but sane, so the tour is brisk.
final class EmbeddedServer: Sendable {
    let loop: EventLoop
    let server: RoomServer
    let port: Int
    let dataDirectory: String
    private let stopped = LockedValue(false)

    /// The URL clients connect to.
    var url: String { "ws://127.0.0.1:\(port)/v1/rooms" }

    init(name: String, secret: String, logger: Logger) async throws {
        dataDirectory = FileManager.default.temporaryDirectory
            .appendingPathComponent("multiroom-bot-\(name)-\(UUID().uuidString.prefix(8))").path
        var configuration = ServerConfiguration(secret: secret, dataDirectory: dataDirectory)
        configuration.host = "127.0.0.1"
        configuration.port = 0
        configuration.heartbeatInterval = .seconds(1)
        configuration.heartbeatTimeout = .seconds(5)
        configuration.sessionRetention = .seconds(120)
        let settings = configuration
        let loop = try EventLoop(name: name, logger: logger)
        self.loop = loop
        do {
            // RoomServer is created and used on its loop thread.
            let server = try await loop.submit { try RoomServer(loop: loop, configuration: settings, logger: logger) }
            self.server = server
            port = try await loop.submit { server.port }
        } catch {
            try? loop.shutdown()
            try? FileManager.default.removeItem(atPath: dataDirectory)
            throw error
        }
    }

    /// Closes every connection (1001), flushes storage, stops the loop and
    /// removes the data directory. Idempotent.
    func stop() async {
        guard stopped.withLock({ wasStopped in defer { wasStopped = true }; return !wasStopped }) else { return }
        let server = self.server
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            let accepted = loop.execute { server.stop(gracePeriod: .milliseconds(500)) { done.resume() } }
            if !accepted { done.resume() }
        }
        try? loop.shutdown()
        try? FileManager.default.removeItem(atPath: dataDirectory)
    }
}

extension EmbeddedServer: Service {
    /// Runs until graceful shutdown, then stops (`stop()`).
    func run() async throws {
        try? await gracefulShutdown()
        await stop()
    }
}

/// Mints development tokens with the server's secret. Tokens are handed to
/// the engine only; the example never prints one.
struct TokenMinter: Sendable {
    private let signer: TokenSigner

    init(secret: String) {
        signer = TokenSigner(secret: secret)
    }

    func token(user: String, room: String, role: TokenRole = .writer, ttl: Int64 = 3600) -> String {
        let now = Int64(Date().timeIntervalSince1970)
        return signer.sign(TokenClaims(sub: user, room: room, role: role, exp: now + ttl, iat: now))
    }

    /// A token provider for `RoomHost`: it logs in, resumes and renews by itself.
    var provider: ClosureTokenProvider {
        let minter = self
        return ClosureTokenProvider { room, user in minter.token(user: user, room: room) }
    }
}
