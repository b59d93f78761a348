import Foundation
import Logging
import RoomKit
import RoomKitLoop
import RoomKitProtocol
import RoomKitTokens
import RoomKitTestSupport
import XCTest

/// A writer token for any room.
private func token(_ secret: String, _ user: String) -> String {
    let now = Int64(Date().timeIntervalSince1970)
    return TokenSigner(secret: secret).sign(TokenClaims(sub: user, room: "*", role: .writer, exp: now + 3600, iat: now))
}

final class RestartTests: XCTestCase {
    func testKill9OfRoomd_sessionsResumeAndRecoverWhatTheyMissed() async throws {
        let roomd = RoomdProcess(secret: "s3cret", arguments: ["--heartbeat-interval", "0.2", "--heartbeat-timeout", "4"])
        try roomd.start()
        let loop = try EventLoop(name: "test-kill9")
        var configuration = RoomHostConfiguration(serverURL: "ws://127.0.0.1:\(roomd.port)/v1/rooms")
        configuration.backoffFirst = .milliseconds(100)
        configuration.backoffCap = .milliseconds(300)
        let events = EventRecorder()
        let hostA = try RoomHost(loop: loop, configuration: configuration)
        hostA.addObserver { events.record($0) }
        let hostB = try RoomHost(loop: loop, configuration: configuration)
        let roomA = try await hostA.loginRoom("lobby", user: LoginUser(id: "a"), token: token(roomd.secret, "a"))
        let roomB = try await hostB.loginRoom("lobby", user: LoginUser(id: "b"), token: token(roomd.secret, "b"))
        try await roomB.setGlobalState(["before": 1])
        await eventually(3) { roomA.globalState["before"] == 1 }

        roomd.kill9()
        await eventually(5, "RECONNECTING") { events.reasons("lobby").last == "RECONNECTING 1002051" }
        try roomd.start()
        await eventually(10, "RECONNECTED") { events.reasons("lobby").last == "RECONNECTED 0" }
        await eventually(10, "B back") { roomB.phase == .connected }
        XCTAssertEqual(roomA.globalState["before"], 1, "acknowledged state survived kill -9")
        try await roomB.setGlobalState(["after": 2])
        await eventually(3) { roomA.globalState["after"] == 2 }
        XCTAssertEqual(roomA.roomMembers.map(\.userId).sorted(), ["a", "b"])
        XCTAssertFalse(events.all.contains { if case .userUpdate(_, .delete, _) = $0 { return true }; return false },
                       "a restart within the heartbeat timeout is a blip")
        await hostA.shutdown()
        await hostB.shutdown()
        try loop.shutdown()
        roomd.stop()
    }

    func testRestartWithManySessions_allResumeWithoutTrippingTheServersRateLimit() async throws {
        let roomd = RoomdProcess(secret: "s3cret", arguments: ["--heartbeat-interval", "0.5", "--heartbeat-timeout", "10"])
        try roomd.start()
        let loop = try EventLoop(name: "test-storm")
        var configuration = RoomHostConfiguration(serverURL: "ws://127.0.0.1:\(roomd.port)/v1/rooms")
        configuration.backoffFirst = .milliseconds(200)
        configuration.backoffCap = .milliseconds(500)
        let events = EventRecorder()
        let host = try RoomHost(loop: loop, configuration: configuration)
        host.addObserver { events.record($0) }
        let count = 300
        let secret = roomd.secret
        try await withThrowingTaskGroup(of: Void.self) { group in
            for i in 0..<count {
                group.addTask { try await host.loginRoom("room-\(i)", user: LoginUser(id: "bot"), token: token(secret, "bot")) }
            }
            try await group.waitForAll()
        }
        roomd.stop()  // SIGTERM: a graceful restart
        await eventually(5) { events.count { if case .roomStateChanged(_, .reconnecting, _, _) = $0 { return true }; return false } == count }
        try roomd.start()
        await eventually(20, "all RECONNECTED") {
            events.count { if case .roomStateChanged(_, .reconnected, _, _) = $0 { return true }; return false } == count
        }
        XCTAssertEqual(events.count { if case .throwError = $0 { return true }; return false }, 0)
        XCTAssertEqual(events.count { if case .roomStateChanged(_, .reconnectFailed, _, _) = $0 { return true }; return false }, 0)
        await host.shutdown()
        try loop.shutdown()
        roomd.stop()
    }
}
