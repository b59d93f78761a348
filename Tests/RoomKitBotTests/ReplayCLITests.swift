import Foundation
import RoomKit
import RoomKitProtocol
import XCTest

final class ReplayCLITests: XCTestCase {
    func testReplay_writesThePlayerEventsInTheEventLogFormat_andExits0AtEnded() async throws {
        let harness = try BotHarness()
        defer { try? harness.close() }
        let watcher = try Watcher(url: harness.serverURL)
        let room = try await watcher.host.loginRoom("recorded", user: LoginUser(id: "w"), token: harness.token("w"))
        for i in 0..<5 {
            try await room.dispatchMagixEvent("chat", payload: .int(Int64(i)))
            try await room.setGlobalState(["count": .int(Int64(i))])
        }
        try await watcher.close()
        let replay = try ChildProcess("roombot", ["replay", "--server", harness.serverURL, "--room", "recorded",
                                                  "--token", harness.token("viewer"), "--speed", "16"])
        let (status, output, errors) = replay.finish(timeout: 30)
        XCTAssertEqual(status, 0, errors)
        let lines = try output.split(separator: "\n").map { try JSON.parse(String($0)) }
        XCTAssertTrue(lines.allSatisfy { $0["ts"]?.int64Value != nil && $0["event"]?.stringValue != nil })
        let phases = lines.filter { $0["event"] == "playerPhase" }.compactMap { $0["phase"]?.stringValue }
        XCTAssertEqual(phases.first, "playing", "\(phases)")
        XCTAssertEqual(phases.last, "ended", "\(phases)")
        XCTAssertEqual(lines.filter { $0["event"] == "loadFirstFrame" }.count, 1)
        let magix = lines.filter { $0["event"] == "magix" }
        XCTAssertEqual(magix.compactMap { $0["payload"]?.int64Value }, [0, 1, 2, 3, 4], "replayed in order")
        XCTAssertTrue(magix.allSatisfy { $0["magixEvent"] == "chat" }, "the custom event's name")
        XCTAssertTrue(lines.contains { $0["event"] == "playerStateChanged" && ($0["keys"]?.arrayValue ?? []).contains("globalState") })
    }

    func testReplay_withABadTokenOrAnUnknownRoom_exits1WithAClearMessage() async throws {
        let harness = try BotHarness()
        defer { try? harness.close() }
        let watcher = try Watcher(url: harness.serverURL)
        _ = try await watcher.host.loginRoom("exists", user: LoginUser(id: "w"), token: harness.token("w"))
        try await watcher.close()
        let badToken = try ChildProcess("roombot", ["replay", "--server", harness.serverURL, "--room", "exists", "--token", "nope"])
        let (status1, _, errors1) = badToken.finish(timeout: 20)
        XCTAssertEqual(status1, 1)
        XCTAssertTrue(errors1.contains("replay of exists failed: the token was refused"), errors1)
        let unknown = try ChildProcess("roombot", ["replay", "--server", harness.serverURL, "--room", "ghost",
                                                   "--token", harness.token("viewer")])
        let (status2, _, errors2) = unknown.finish(timeout: 20)
        XCTAssertEqual(status2, 1)
        XCTAssertTrue(errors2.contains("replay of ghost failed: no such room"), errors2)
    }
}
