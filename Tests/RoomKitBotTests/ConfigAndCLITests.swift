import Foundation
import RoomKitBot
import RoomKitProtocol
import RoomKitTestSupport
import XCTest

final class ConfigAndCLITests: XCTestCase {
    func testConfig_listsEveryProblemOnOneLineNamingFileAndField() throws {
        let json: JSON = [
            "server": "http://nope", "user": ["name": 3], "auth": ["secret": "s", "tokens": [:]],
            "rooms": ["ok", "bad room"], "loginTimeout": -1, "colour": "blue",
        ]
        XCTAssertThrowsError(try BotConfig(json: json, path: "/tmp/bot.json")) { error in
            let lines = (error as? ConfigErrors)?.errors.map(\.description) ?? []
            XCTAssertEqual(Set(lines), [
                "bot.json: colour: unknown field",
                "bot.json: server: must be a ws:// or wss:// URL, got 'http://nope'",
                "bot.json: user.id: must be a user ID (1-128 bytes, no control characters)",
                "bot.json: user.name: must be a string",
                "bot.json: auth: needs exactly one of secret, tokens, tokenFile",
                "bot.json: rooms[1]: must be a room ID (1-128 of [A-Za-z0-9_.:-])",
                "bot.json: loginTimeout: must be a number of seconds in 0.001...31536000, got -1",
            ])
        }
    }

    func testConfig_resolvesRelativePathsAgainstTheConfigFile() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("cfg-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try Data(#"{"lobby":"t"}"#.utf8).write(to: URL(fileURLWithPath: directory + "/tokens.json"))
        let config = try BotConfig(json: ["server": "ws://127.0.0.1:1/v1/rooms", "user": ["id": "b"],
                                          "auth": ["tokenFile": "tokens.json"], "events": "log/events.ndjson"],
                                   path: directory + "/bot.json")
        XCTAssertEqual(config.auth, .tokenFile(directory + "/tokens.json"))
        XCTAssertEqual(config.events, directory + "/log/events.ndjson")
        XCTAssertEqual(config.stateFile, directory + "/bot.state.sqlite")
        XCTAssertEqual(config.legacyStateFile, directory + "/bot.state.json", "imported once")
    }

    func testRun_withABadConfig_exits2WithOneLinePerProblem() throws {
        let harness = try BotHarness()
        defer { try? harness.close() }
        let path = try harness.writeConfig(["server": "ws://127.0.0.1:1/v1/rooms", "user": ["id": "b"], "auth": [:]])
        let (status, _, errors) = try ChildProcess("roombot", ["run", "--config", path]).finish()
        XCTAssertEqual(status, 2)
        XCTAssertEqual(errors, "roombot: bot.json: auth: needs exactly one of secret, tokens, tokenFile\n")
    }

    func testCheck_acceptsAGoodManifest_andNamesTheFieldOfABadOne() throws {
        let harness = try BotHarness()
        defer { try? harness.close() }
        let library = try builtProduct("libecho-commands.so")
        let good = try harness.writeConfig(["manifestVersion": 1, "plugins": [
            ["name": "echo", "library": .string(library), "abi": 1, "hooks": ["magix"]],
        ]], name: "good.json")
        let (okStatus, okOut, _) = try ChildProcess("roombot", ["check", "--manifest", good]).finish()
        XCTAssertEqual(okStatus, 0)
        XCTAssertEqual(okOut, "good.json: plugins[0] (echo): \(library), ABI 1.1, isolation process (memoryLimitMB 1024, "
                       + "cpuLimitSeconds 0, maxCrashes 5 in 300 s, hangFactor 20)\ngood.json: 1 plugin(s) OK\n")
        let bad = try harness.writeConfig(["manifestVersion": 1, "plugins": [
            ["name": "echo", "library": "lib/missing.so", "abi": 1, "hooks": ["magix"]],
            ["name": "hook", "library": .string(library), "abi": 1, "hooks": ["urlInterrupter"]],
        ]], name: "bad.json")
        let (badStatus, _, errors) = try ChildProcess("roombot", ["check", "--manifest", bad]).finish()
        XCTAssertEqual(badStatus, 2)
        XCTAssertTrue(errors.hasPrefix("roombot: bad.json: plugins[0].library: no such file: "), errors)
        // The second entry is checked only once the manifest itself is valid.
        let hookOnly = try harness.writeConfig(["manifestVersion": 1, "plugins": [
            ["name": "hook", "library": .string(library), "abi": 1, "hooks": ["urlInterrupter"]],
        ]], name: "hook.json")
        let (hookStatus, _, hookErrors) = try ChildProcess("roombot", ["check", "--manifest", hookOnly]).finish()
        XCTAssertEqual(hookStatus, 2)
        XCTAssertEqual(hookErrors, "roombot: hook.json: plugins[0] (hook): declares hook 'urlInterrupter' but does not export it\n")
    }
}

final class ControlSecurityTests: XCTestCase {
    func testControlAPI_onANonLoopbackAddress_requiresAControlToken() {
        let base: [String: JSON] = ["server": "ws://127.0.0.1:1/v1/rooms", "user": ["id": "b"], "auth": ["secret": "s"]]
        var open = base
        open["control"] = "0.0.0.0:7800"
        XCTAssertThrowsError(try BotConfig(json: .object(open), path: "/tmp/bot.json")) { error in
            XCTAssertEqual((error as? ConfigErrors)?.errors.map(\.description),
                           ["bot.json: control: binds to 0.0.0.0, which is not loopback: set controlToken to require authentication"])
        }
        var guarded = open
        guarded["controlToken"] = "0123456789abcdef-long-enough"
        XCTAssertNoThrow(try BotConfig(json: .object(guarded), path: "/tmp/bot.json"))
    }

    func testControlAPI_withAControlToken_refusesRequestsWithoutIt() async throws {
        let harness = try BotHarness()
        var json = harness.standardConfig(rooms: [])
        if case .object(var fields) = json { fields["controlToken"] = "s3cret-s3cret-s3cret"; json = .object(fields) }
        let path = try harness.writeConfig(json)
        let runner = try BotRunner(config: try BotConfig(path: path), logger: .init(label: "t"))
        try await runner.start()
        let port = try XCTUnwrap(runner.controlPort)
        XCTAssertEqual(http(port, "GET", "/v1/rooms").0, 401)
        XCTAssertEqual(http(port, "GET", "/healthz").0, 200, "health stays open for probes")
        XCTAssertEqual(http(port, "GET", "/v1/rooms", headers: ["Authorization: Bearer s3cret-s3cret-s3cret"]).0, 200)
        await runner.stop()
        try harness.close()
    }
}
