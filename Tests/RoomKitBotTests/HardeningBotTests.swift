import Foundation
import RoomKit
import RoomKitBot
import RoomKitProtocol
import RoomKitTokens
import RoomKitServer
import RoomKitTestSupport
import XCTest

/// Issue #27 §6, the bot's side: config and control-API input that was
/// accepted although it is wrong, and reports that said the wrong thing.
final class HardeningBotTests: XCTestCase {
    /// Everything a child writes to stderr, read on a background thread so
    /// the test never blocks on the pipe.
    final class Stderr: @unchecked Sendable {
        // @unchecked Sendable: guarded by lock.
        private let lock = NSLock()
        private var data = Data()
        private let handle: FileHandle

        init(_ bot: ChildProcess) {
            handle = bot.errors.fileHandleForReading
            handle.readabilityHandler = { [weak self] handle in
                let chunk = handle.availableData
                self?.lock.withLock { self?.data.append(chunk) }
            }
        }

        var text: String { lock.withLock { String(decoding: data, as: UTF8.self) } }

        func waitFor(_ marker: String, timeout: TimeInterval = 20) -> Bool {
            let deadline = Date().addingTimeInterval(timeout)
            while Date() < deadline {
                if text.contains(marker) { return true }
                usleep(20_000)
            }
            return false
        }

        /// SIGTERM, then the exit status (after at most `timeout`).
        func stop(_ bot: ChildProcess, timeout: TimeInterval = 20) -> Int32 {
            bot.signal(SIGTERM)
            let deadline = Date().addingTimeInterval(timeout)
            while bot.process.isRunning && Date() < deadline { usleep(20_000) }
            if bot.process.isRunning { bot.process.terminate(); bot.process.waitUntilExit() }
            usleep(100_000)
            handle.readabilityHandler = nil
            return bot.process.terminationStatus
        }

        /// The control API's port from `control on PORT`.
        var controlPort: Int? {
            text.split(separator: "\n").first { $0.hasPrefix("control on ") }.flatMap { Int($0.dropFirst("control on ".count)) }
        }
    }

    func testRun_withARoomListedTwice_exits2NamingTheRoom() throws {
        let harness = try BotHarness()
        defer { try? harness.close() }
        let path = try harness.writeConfig(harness.standardConfig(rooms: ["lobby", "hall", "lobby"], control: nil))
        let (status, _, errors) = try ChildProcess("roombot", ["run", "--config", path]).finish()
        XCTAssertEqual(status, 2)
        XCTAssertEqual(errors, "roombot: bot.json: rooms[2]: duplicate room 'lobby' (also rooms[0])\n")
    }

    func testPluginsEndpoint_showsTheManifestsIsolation_forAPluginThatFailedToLoad() async throws {
        let harness = try BotHarness()
        let rewrite = try builtProduct("liburl-rewrite.so")
        _ = try harness.writeConfig(["manifestVersion": 1, "plugins": [
            ["name": "broken", "library": .string(rewrite), "entry": "no_such_entry", "abi": 1, "hooks": ["urlInterrupter"],
             "isolation": "process"],
        ]], name: "plugins.json")
        var json = harness.standardConfig(rooms: [])
        if case .object(var fields) = json { fields["manifest"] = "plugins.json"; json = .object(fields) }
        let runner = try BotRunner(config: try BotConfig(path: try harness.writeConfig(json)), logger: .init(label: "t"))
        try await runner.start()
        let port = try XCTUnwrap(runner.controlPort)
        let (status, body) = http(port, "GET", "/v1/plugins")
        XCTAssertEqual(status, 200, body)
        let plugin = try JSON.parse(body).arrayValue?.first
        XCTAssertEqual(plugin?["status"], "failed", body)
        XCTAssertEqual(plugin?["isolation"], "process", body)
        await runner.stop()
        try harness.close()
    }

    func testCheck_aLibraryThatIsADirectory_isReportedAsADirectory() throws {
        let harness = try BotHarness()
        defer { try? harness.close() }
        let directory = harness.directory + "/libdir.so"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let manifest = try harness.writeConfig(["manifestVersion": 1, "plugins": [
            ["name": "x", "library": .string(directory), "abi": 1, "hooks": ["urlInterrupter"]],
        ]], name: "dir.json")
        let (status, _, errors) = try ChildProcess("roombot", ["check", "--manifest", manifest]).finish()
        XCTAssertEqual(status, 2)
        XCTAssertEqual(errors, "roombot: dir.json: plugins[0].library: is a directory, not a library file: \(directory)\n")
    }

    func testNewPlugin_inADirectoryThatCannotBeCreated_printsOneLineNamingIt_andExits2() throws {
        let (status, out, errors) = try ChildProcess("roombot", ["new-plugin", "demo", "--lang", "c", "--dir", "/proc/x"]).finish()
        XCTAssertEqual(status, 2, out)
        XCTAssertTrue(errors.hasPrefix("roombot: --dir: cannot create /proc/x"), errors)
        XCTAssertFalse(errors.contains("NSCocoaErrorDomain"), errors)
        XCTAssertEqual(errors.split(separator: "\n").count, 1, errors)
    }

    func testOperatorLogoutOfAConfigRoom_listsNoMembers_andReadinessFollowsTheRoomsTheBotMeansToBeIn() async throws {
        let harness = try BotHarness()
        let runner = try BotRunner(config: try BotConfig(path: try harness.writeConfig(harness.standardConfig(rooms: ["lobby"]))),
                                   logger: .init(label: "t"))
        try await runner.start()
        let port = try XCTUnwrap(runner.controlPort)
        await eventually(10, "ready") { http(port, "GET", "/readyz").0 == 200 }
        func lobby() throws -> JSON? {
            try JSON.parse(http(port, "GET", "/v1/rooms").1).arrayValue?.first { $0["room"] == "lobby" }
        }
        XCTAssertEqual(try lobby()?["members"], 1)

        var (status, body) = http(port, "POST", "/v1/rooms/lobby/logout")
        XCTAssertEqual(status, 200, body)
        XCTAssertEqual(try lobby()?["reason"], "LOGOUT")
        XCTAssertEqual(try lobby()?["members"], 0, "the bot is in no session there: it knows no members")
        (status, body) = http(port, "GET", "/readyz")
        XCTAssertEqual(status, 200, "the operator took the bot out of lobby: nothing to wait for. \(body)")

        (status, body) = http(port, "POST", "/v1/rooms/lobby/login", "{}")
        XCTAssertEqual(status, 200, body)
        XCTAssertEqual(try lobby()?["members"], 1)
        XCTAssertEqual(http(port, "GET", "/readyz").0, 200)
        await runner.stop()
        try harness.close()
    }

    func testControlAPI_refusesUnknownFieldsAndWrongTypes_with400NamingTheField() async throws {
        let harness = try BotHarness()
        let runner = try BotRunner(config: try BotConfig(path: try harness.writeConfig(harness.standardConfig(rooms: ["lobby"]))),
                                   logger: .init(label: "t"))
        try await runner.start()
        let port = try XCTUnwrap(runner.controlPort)
        await eventually(10, "ready") { http(port, "GET", "/readyz").0 == 200 }
        let cases: [(path: String, body: String, field: String)] = [
            ("/v1/rooms/extra/login", #"{"writable":"yes"}"#, "body.writable must be a boolean, not string"),
            ("/v1/rooms/extra/login", #"{"tokn":"abc"}"#, "body.tokn: unknown field"),
            ("/v1/rooms/lobby/logout", #"{"force":true}"#, "body.force: unknown field"),
            ("/v1/rooms/lobby/switch", #"{"to":7}"#, "body.to must be a string, not number"),
            ("/v1/rooms/lobby/state", #"{"patch":{"globalState":{}},"seq":1}"#, "body.seq: unknown field"),
            ("/v1/rooms/lobby/magix", #"{"event":"e","to":[1]}"#, "body.to must be an array of strings"),
            ("/v1/rooms/lobby/images", #"{"uuid":"i","url":"http://x","x":0,"y":0,"width":1,"height":1,"w":2}"#, "body.w: unknown field"),
            ("/v1/rooms/lobby/scenes", #"{"dir":"/d","scenes":[],"index":"0"}"#, "body.index must be an integer, not string"),
            ("/v1/logout", #"{"all":true}"#, "body.all: unknown field"),
        ]
        for item in cases {
            let (status, body) = http(port, "POST", item.path, item.body)
            XCTAssertEqual(status, 400, "\(item.path) \(item.body): \(body)")
            let message = try JSON.parse(body)["message"]?.stringValue ?? ""
            XCTAssertTrue(message.hasPrefix(item.field), "\(item.path) \(item.body): \(message)")
        }
        // Nothing of those happened: no room "extra", lobby still joined.
        XCTAssertNil(runner.host.room("extra"))
        XCTAssertEqual(runner.host.room("lobby")?.reason, .logined)
        await runner.stop()
        try harness.close()
    }

    /// A URL interrupter that always fails (returns no result).
    private static let failingInterrupter = """
        #include "roomkit_plugin.h"
        static char *fail(void *self, const char *url) { (void)self; (void)url; return 0; }
        static roomkit_plugin descriptor = {
            .struct_size = sizeof(roomkit_plugin), .abi_major = ROOMKIT_PLUGIN_ABI_MAJOR, .abi_minor = ROOMKIT_PLUGIN_ABI_MINOR,
            .url_interrupter = fail,
        };
        const roomkit_plugin *roomkit_plugin_entry(uint16_t major, uint16_t minor) { (void)major; (void)minor; return &descriptor; }
        """

    func testAFailedPluginCall_isLoggedAtWarningAtOnce_notOnlyAtQuarantine() async throws {
        let harness = try BotHarness()
        defer { try? harness.close() }
        let library = try compilePlugin("failing", source: Self.failingInterrupter, in: harness.directory)
        let manifest = try harness.writeConfig(["manifestVersion": 1, "plugins": [
            ["name": "failing", "library": .string(library), "abi": 1, "hooks": ["urlInterrupter"], "isolation": "inline"],
        ]], name: "plugins.json")
        guard case .object(var config) = harness.standardConfig(rooms: ["lobby"]) else { return XCTFail("config") }
        config["manifest"] = .string(manifest)
        let bot = try ChildProcess("roombot", ["run", "--config", try harness.writeConfig(.object(config))])
        let stderr = Stderr(bot)
        XCTAssertTrue(stderr.waitFor("control on ") && stderr.waitFor("\n", timeout: 2), stderr.text)
        let port = try XCTUnwrap(stderr.controlPort, stderr.text)
        await eventually(10, "ready") { http(port, "GET", "/readyz").0 == 200 }
        let (status, body) = http(port, "POST", "/v1/rooms/lobby/images",
                                  #"{"uuid":"i","url":"http://keep/me","x":0,"y":0,"width":1,"height":1}"#)
        XCTAssertEqual(status, 200, body)
        XCTAssertEqual(try JSON.parse(body)["url"], "http://keep/me", "a failed step leaves the URL unchanged")
        XCTAssertTrue(stderr.waitFor("plugin call failed"), stderr.text)
        let seen = stderr.text
        let line = seen.split(separator: "\n").first { $0.contains("plugin call failed") }.map(String.init) ?? ""
        XCTAssertTrue(line.contains("warning"), seen)
        XCTAssertTrue(line.contains("plugin=failing"), line)
        XCTAssertTrue(line.contains("no result"), "names the failure: \(line)")
        XCTAssertFalse(seen.contains("quarantined"), "one failure quarantines nothing")
        XCTAssertEqual(stderr.stop(bot), 0)
    }

    func testUnreachableRoomd_isLoggedAtWarningNamingTheURL_onTheFirstAttempt() throws {
        let harness = try BotHarness()
        defer { try? harness.close() }
        let url = "ws://127.0.0.1:\(freePort())/v1/rooms"
        guard case .object(var config) = harness.standardConfig(rooms: ["lobby"], control: nil) else { return XCTFail("config") }
        config["server"] = .string(url)
        let bot = try ChildProcess("roombot", ["run", "--config", try harness.writeConfig(.object(config))])
        let stderr = Stderr(bot)
        // The login timeout is 5 s: the line must come before any login fails.
        XCTAssertTrue(stderr.waitFor("cannot connect", timeout: 30), stderr.text)
        let seen = stderr.text
        _ = stderr.stop(bot)
        let line = seen.split(separator: "\n").first { $0.contains("cannot connect") }.map(String.init) ?? ""
        XCTAssertTrue(line.contains("warning"), seen)
        XCTAssertTrue(line.contains("url=\(url)"), line)
        XCTAssertTrue(line.contains("attempt=1"), line)
        XCTAssertFalse(seen.contains("login failed"), "logged before the first login timed out: \(seen)")
    }

    func testRefusedServiceToken_isLOGIN_FAILED1002033WithRoomdsReason_inTheEventLog() async throws {
        let harness = try BotHarness()
        defer { try? harness.close() }
        let now = Int64(Date().timeIntervalSince1970)
        let writer = TokenSigner(secret: harness.secret).sign(TokenClaims(sub: "bot-1", room: "*", role: .writer, exp: now + 3600, iat: now))
        guard case .object(var config) = harness.standardConfig(rooms: ["lobby"], control: nil) else { return XCTFail("config") }
        config["serviceToken"] = .string(writer)
        let bot = try ChildProcess("roombot", ["run", "--config", try harness.writeConfig(.object(config))])
        let stderr = Stderr(bot)
        let events = harness.directory + "/events.ndjson"
        await eventually(20, "LOGIN_FAILED") { (fileText(events) ?? "").contains(#""reason":"LOGIN_FAILED""#) }
        let failed = (fileText(events) ?? "").split(separator: "\n").first { $0.contains(#""reason":"LOGIN_FAILED""#) } ?? ""
        XCTAssertTrue(failed.contains(#""errorCode":1002033"#), String(failed))
        _ = stderr.stop(bot)
        let errors = stderr.text
        XCTAssertTrue(errors.contains("roomd refused the service token (1002033)"), errors)
        XCTAssertTrue(errors.contains("role service"), "roomd's reason: \(errors)")
    }
}
