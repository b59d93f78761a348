import Foundation
import RoomKit
import RoomKitProtocol
@testable import RoomKitServer
import RoomKitTestSupport
import XCTest

/// The engine paces its requests to the bucket the server advertises in its
/// hello reply (docs/PROTOCOL.md "Service connections"), not to its own
/// `requestsPerSecond`/`requestBurst`: a host configured far above the
/// server's limit still never trips 1009004, and a host with a service token
/// gets (and uses) the service bucket.
final class ServicePacingTests: XCTestCase {
    /// Logs `host` in to `count` rooms at once; returns how many logins succeeded.
    private func logIn(_ host: RoomHost, rooms count: Int, token: String) async throws -> Int {
        try await withThrowingTaskGroup(of: Bool.self) { group in
            for index in 0..<count {
                group.addTask {
                    _ = try await host.loginRoom("room-\(index)", user: LoginUser(id: "bot"), token: token)
                    return true
                }
            }
            var logged = 0
            for try await ok in group where ok { logged += 1 }
            return logged
        }
    }

    private func refusedRequests(_ harness: EngineHarness) throws -> Int {
        let server = harness.server
        return try harness.serverLoop.runAndWait { server.metrics.requestsOverLimit }
    }

    /// Long enough for every login to wait its turn at the paced rate; a
    /// sanitizer build (server and engine instrumented in this process) runs
    /// an order of magnitude slower.
    static let loginTimeout: Duration = .seconds(ProcessInfo.processInfo.environment["ROOMKIT_SANITIZED"] != nil ? 180 : 30)

    func testServiceToken_getsTheServiceBucket_andTheEnginePacesToIt() async throws {
        let harness = try EngineHarness { configuration in
            configuration.serviceRateLimitBurst = 400
            configuration.serviceRateLimitPerSecond = 400
        }
        let token = harness.token("bot", role: .service)
        let host = try harness.host(viaProxy: false) { configuration in
            configuration.serviceToken = token
            // Far above the server's bucket: only the advertised one keeps the engine under it.
            configuration.requestsPerSecond = 1_000_000
            configuration.requestBurst = 1_000_000
            configuration.loginTimeout = Self.loginTimeout
        }
        let logged = try await logIn(host, rooms: 600, token: token)
        XCTAssertEqual(logged, 600)
        XCTAssertEqual(try refusedRequests(harness), 0, "the engine paced to the advertised service bucket")
        try await harness.close()
    }

    func testOrdinaryConnection_pacesToTheDefaultBucketItIsAdvertised() async throws {
        let harness = try EngineHarness()  // 200 burst, 200/s
        let token = harness.token("bot")
        let host = try harness.host(viaProxy: false) { configuration in
            configuration.requestsPerSecond = 1_000_000
            configuration.requestBurst = 1_000_000
            configuration.loginTimeout = Self.loginTimeout
        }
        let logged = try await logIn(host, rooms: 300, token: token)
        XCTAssertEqual(logged, 300)
        XCTAssertEqual(try refusedRequests(harness), 0, "the engine paced to the advertised 200/s")
        try await harness.close()
    }
}
