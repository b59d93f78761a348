import Foundation
import RoomKit
import RoomKitProtocol
@testable import RoomKitServer
import RoomKitSQLite
import RoomKitTestSupport
import XCTest

/// Issue 20 items 10, 11, 12 and 14: a real `roombot` process run as an
/// operator runs it (taken ports, roomd started late, SIGTERM at any time).
final class OperatorProcessTests: XCTestCase {
    /// Reads the child's stderr until "control on PORT" appears (nil after `timeout`).
    private func controlPort(_ child: ChildProcess, timeout: TimeInterval = 10) -> Int? {
        let deadline = Date().addingTimeInterval(timeout)
        var seen = ""
        while Date() < deadline {
            seen += ChildProcess.read(child.errors, until: "\n", timeout: max(0.05, deadline.timeIntervalSinceNow)) {
                child.process.isRunning
            }
            if let range = seen.range(of: "control on "), let end = seen[range.upperBound...].firstIndex(of: "\n") {
                return Int(seen[range.upperBound..<end])
            }
            if !child.process.isRunning { break }
        }
        return nil
    }

    /// "REASON code" of every roomStateChanged line for `room` in the event log.
    private func loggedReasons(_ path: String, _ room: String) -> [String] {
        let text = fileText(path) ?? ""
        return text.split(separator: "\n").compactMap { try? JSON.parse(Array($0.utf8)) }
            .filter { $0["event"] == "roomStateChanged" && $0["room"] == .string(room) }
            .compactMap { line in line["reason"]?.stringValue.map { "\($0) \(line["errorCode"]?.int64Value ?? -1)" } }
    }

    private func config(server: String, secret: String, rooms: [String], loginTimeout: Double = 5,
                        reconnectWindow: Double = 60, auth: JSON? = nil) -> JSON {
        ["server": .string(server), "user": ["id": "bot-1", "name": "Helper"], "auth": auth ?? ["secret": .string(secret)],
         "rooms": .array(rooms.map(JSON.string)), "events": "events.ndjson", "control": "127.0.0.1:0",
         "loginTimeout": .double(loginTimeout), "reconnectWindow": .double(reconnectWindow)]
    }

    // MARK: 10

    func testRun_whenTheControlPortIsTaken_exits2WithOneLineNamingTheFlagOrFieldAndTheAddress() throws {
        let harness = try BotHarness()
        defer { try? harness.close() }
        let (fd, port) = listenLoopback()
        defer { close(fd) }
        var json = harness.standardConfig(rooms: ["lobby"])
        if case .object(var fields) = json { fields["control"] = .string("127.0.0.1:\(port)"); json = .object(fields) }
        let path = try harness.writeConfig(json)

        let (fromConfig, _, configErrors) = try ChildProcess("roombot", ["run", "--config", path]).finish()
        XCTAssertEqual(fromConfig, 2, configErrors)
        XCTAssertEqual(configErrors, "roombot: bot.json: control: cannot listen on 127.0.0.1:\(port): Address already in use\n")

        let (fromFlag, _, flagErrors) = try ChildProcess("roombot", ["run", "--config", path, "--control", "127.0.0.1:\(port)"]).finish()
        XCTAssertEqual(fromFlag, 2, flagErrors)
        XCTAssertEqual(flagErrors, "roombot: --control: cannot listen on 127.0.0.1:\(port): Address already in use\n")
    }

    // MARK: 14

    func testReplay_rejectsAnUnknownLogLevel_withTheSameMessageAsRun() throws {
        let harness = try BotHarness()
        defer { try? harness.close() }
        let path = try harness.writeConfig(harness.standardConfig(rooms: []))
        let (runStatus, _, runErrors) = try ChildProcess("roombot", ["run", "--config", path, "--log-level", "loud"]).finish()
        let (replayStatus, _, replayErrors) = try ChildProcess("roombot", [
            "replay", "--server", harness.serverURL, "--room", "lobby", "--token", harness.token("viewer"), "--log-level", "loud",
        ]).finish()
        XCTAssertEqual(runStatus, 2)
        XCTAssertEqual(runErrors, "roombot: --log-level: unknown level 'loud'\n")
        XCTAssertEqual(replayStatus, 2)
        XCTAssertEqual(replayErrors, runErrors)
    }

    // MARK: 11

    func testRoombotStartedBeforeRoomd_retriesTheFirstLogins_andJoinsOnceRoomdIsUp() async throws {
        let roomd = RoomdProcess(secret: "late-secret")
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("roombot-late-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/bot.json"
        try Data(config(server: "ws://127.0.0.1:\(roomd.port)/v1/rooms", secret: roomd.secret, rooms: ["lobby", "room-2"],
                        loginTimeout: 1).serialized()).write(to: URL(fileURLWithPath: path))
        let bot = try ChildProcess("roombot", ["run", "--config", path, "--log-level", "error"])
        let port = try XCTUnwrap(controlPort(bot))
        let log = directory + "/events.ndjson"
        await eventually(10, "both first logins failed (nothing listens yet)") {
            ["lobby", "room-2"].allSatisfy { loggedReasons(log, $0).contains("LOGIN_FAILED 1002053") }
        }
        try roomd.start()
        await eventually(30, "ready once roomd is up") { http(port, "GET", "/readyz").0 == 200 }
        let rooms = try JSON.parse(http(port, "GET", "/v1/rooms").1).arrayValue ?? []
        XCTAssertEqual(rooms.filter { $0["reason"] == "LOGINED" }.compactMap { $0["room"]?.stringValue }, ["lobby", "room-2"])
        for room in ["lobby", "room-2"] {
            let reasons = loggedReasons(log, room)
            XCTAssertEqual(reasons.filter { $0 == "LOGINED 0" }.count, 1, "\(room): \(reasons)")
            XCTAssertEqual(reasons.filter { $0 == "LOGINING 0" }.count, reasons.filter { $0.hasPrefix("LOGIN_FAILED") }.count + 1,
                           "every attempt is a LOGINING with an outcome: \(reasons)")
        }
        bot.signal(SIGTERM)
        XCTAssertEqual(bot.finish().0, 0)
        roomd.stop()
    }

    func testFirstLogin_aFinalErrorIsNotRetried_aServerErrorIs() async throws {
        let harness = try BotHarness()
        defer { try? harness.close() }
        // The server refuses to create room "broken" (1009500) until the trigger goes.
        let database = try SQLiteDatabase(path: harness.directory + "/data/rooms.sqlite")
        defer { database.close() }
        try database.execute("CREATE TRIGGER refuse BEFORE INSERT ON rooms WHEN NEW.room = 'broken' BEGIN SELECT RAISE(ABORT, 'disk on fire'); END;")
        let auth: JSON = ["tokens": ["lobby": "not-a-jwt", "*": .string(harness.token("bot-1"))]]
        let path = try harness.writeConfig(config(server: harness.serverURL, secret: harness.secret, rooms: ["lobby", "broken"],
                                                  auth: auth))
        let bot = try ChildProcess("roombot", ["run", "--config", path, "--log-level", "error"])
        let port = try XCTUnwrap(controlPort(bot))
        let log = harness.directory + "/events.ndjson"
        await eventually(10, "broken retried") { loggedReasons(log, "broken").filter { $0 == "LOGIN_FAILED 1009500" }.count >= 2 }
        try database.execute("DROP TRIGGER refuse")
        await eventually(20, "broken joined") { loggedReasons(log, "broken").last == "LOGINED 0" }
        XCTAssertEqual(loggedReasons(log, "lobby"), ["LOGINING 0", "LOGIN_FAILED 1002033"], "a bad token is final: one attempt")
        let (status, body) = http(port, "GET", "/readyz")
        XCTAssertEqual(status, 503)
        XCTAssertEqual(try JSON.parse(body)["notReady"], [["room": "lobby", "reason": "LOGIN_FAILED", "errorCode": 1_002_033]])
        bot.signal(SIGTERM)
        XCTAssertEqual(bot.finish().0, 0)
    }

    // MARK: 12

    func testSIGTERM_whileTheFirstLoginsHang_controlIsUpAtOnce_andTheBotExits0Promptly() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("roombot-hang-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/bot.json"
        // Nothing listens on the server port: the logins wait for their 30 s timeout.
        try Data(config(server: "ws://127.0.0.1:\(freePort())/v1/rooms", secret: "s", rooms: ["lobby", "room-2"],
                        loginTimeout: 30).serialized()).write(to: URL(fileURLWithPath: path))
        let bot = try ChildProcess("roombot", ["run", "--config", path, "--log-level", "error"])
        let port = try XCTUnwrap(controlPort(bot, timeout: 10), "control on PORT comes before the logins end")
        let logining: JSON = [["room": "lobby", "reason": "LOGINING", "errorCode": 0], ["room": "room-2", "reason": "LOGINING", "errorCode": 0]]
        await eventually(5, "/readyz: 503 with both rooms LOGINING") {
            let (status, body) = http(port, "GET", "/readyz")
            return status == 503 && (try? JSON.parse(body)["notReady"]) == logining
        }
        bot.signal(SIGTERM)
        let started = Date()
        let (exit, _, errors) = bot.finish(timeout: 10)
        XCTAssertEqual(exit, 0, errors)
        XCTAssertLessThan(Date().timeIntervalSince(started), 2, "SIGTERM is honoured during the first logins")
        for room in ["lobby", "room-2"] {
            XCTAssertEqual(loggedReasons(directory + "/events.ndjson", room), ["LOGINING 0", "LOGOUT 0"], "\(room): cancelled")
        }
    }

    func testSIGTERM_duringStart_logsOutOfTheRoomsJoined_andCancelsTheRetries() async throws {
        let harness = try BotHarness(heartbeatTimeout: .seconds(30))
        defer { try? harness.close() }
        let database = try SQLiteDatabase(path: harness.directory + "/data/rooms.sqlite")
        defer { database.close() }
        try database.execute("CREATE TRIGGER refuse BEFORE INSERT ON rooms WHEN NEW.room = 'broken' BEGIN SELECT RAISE(ABORT, 'disk on fire'); END;")
        let watcher = try Watcher(url: harness.serverURL)
        try await watcher.host.loginRoom("lobby", user: LoginUser(id: "watcher"), token: harness.token("watcher"))
        let path = try harness.writeConfig(config(server: harness.serverURL, secret: harness.secret, rooms: ["lobby", "broken"]))
        let bot = try ChildProcess("roombot", ["run", "--config", path, "--log-level", "error"])
        let port = try XCTUnwrap(controlPort(bot))
        let log = harness.directory + "/events.ndjson"
        await eventually(10, "lobby joined while broken is retried") {
            loggedReasons(log, "lobby").last == "LOGINED 0" && loggedReasons(log, "broken").filter { $0 == "LOGIN_FAILED 1009500" }.count >= 2
        }
        XCTAssertEqual(http(port, "GET", "/readyz").0, 503, "still starting")
        bot.signal(SIGTERM)
        let started = Date()
        await eventually(2, "others see the bot leave at once, not after the 30 s heartbeat timeout") {
            watcher.deletes(of: "bot-1") == 1
        }
        let (exit, _, errors) = bot.finish(timeout: 10)
        XCTAssertEqual(exit, 0, errors)
        XCTAssertLessThan(Date().timeIntervalSince(started), 2)
        XCTAssertEqual(loggedReasons(log, "lobby"), ["LOGINING 0", "LOGINED 0", "LOGOUT 0"])
        XCTAssertFalse(loggedReasons(log, "broken").contains("LOGINED 0"))
        try await watcher.close()
    }
}
