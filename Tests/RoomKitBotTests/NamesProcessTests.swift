import Foundation
import RoomKitProtocol
import RoomKitTestSupport
import XCTest

/// Issue #27 §1, §2 and §6 on real roomd and roombot processes: host names
/// as listen and control addresses (a segfault before), the inputs that
/// crashed `roombot run` after `check` passed, and roomd's heartbeat and
/// `--secret` checks and warnings.
final class NamesProcessTests: XCTestCase {
    private var directory = ""

    override func setUpWithError() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("names-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    }

    override func tearDown() {
        try? FileManager.default.removeItem(atPath: directory)
    }

    private func write(_ json: JSON, _ name: String) throws -> String {
        let path = directory + "/" + name
        try Data(json.serialized()).write(to: URL(fileURLWithPath: path))
        return path
    }

    /// Starts roomd, waits for `listening on`, stops it with SIGTERM.
    private func serveAndStop(_ arguments: [String]) throws -> (stdout: String, stderr: String) {
        let roomd = try ChildProcess("roomd", ["serve", "--data", directory + "/data-\(UUID().uuidString)"] + arguments)
        let seen = ChildProcess.read(roomd.output, until: "listening on", while: { roomd.process.isRunning })
        roomd.signal(SIGTERM)
        let (status, rest, errors) = roomd.finish()
        XCTAssertEqual(roomd.process.terminationReason, .exit, "\(arguments): \(errors)")
        XCTAssertEqual(status, 0, "\(arguments): \(errors)")
        return (seen + rest, errors)
    }

    func testRoomd_listensOnAHostName_andOnAShortNumericForm() throws {
        for host in ["localhost", "127.1"] {
            let (out, errors) = try serveAndStop(["--listen", "\(host):0", "--secret-file", try secretFile()])
            XCTAssertTrue(out.contains("listening on 127.0.0.1:") || out.contains("listening on ::1:"), "\(host): \(out) \(errors)")
        }
        let result = try ChildProcess("roomd", ["serve", "--listen", "no-such-host.invalid:0", "--secret-file", try secretFile(),
                                                "--data", directory + "/d"]).finish()
        XCTAssertEqual(result.0, 2)
        XCTAssertTrue(result.2.hasPrefix("roomd: --listen: cannot resolve host 'no-such-host.invalid'"), result.2)
        XCTAssertEqual(result.2.filter { $0 == "\n" }.count, 1)
    }

    func testRoombot_controlOnAHostName_serves() throws {
        let config = try write(["server": "ws://127.0.0.1:1/v1/rooms", "user": ["id": "b"], "auth": ["secret": "s"],
                                "control": "localhost:0", "reconnectWindow": 30], "bot.json")
        let bot = try ChildProcess("roombot", ["run", "--config", config])
        let seen = ChildProcess.read(bot.errors, until: "control on ", while: { bot.process.isRunning })
        let port = Int(seen.components(separatedBy: "control on ").last?.prefix { $0.isNumber } ?? "") ?? 0
        XCTAssertGreaterThan(port, 0, seen)
        XCTAssertTrue(httpRequest(port: port, "GET", "/healthz").hasPrefix("HTTP/1.1 200"))
        bot.signal(SIGTERM)
        let (status, _, errors) = bot.finish()
        XCTAssertEqual(bot.process.terminationReason, .exit, errors)
        XCTAssertEqual(status, 0, errors)
    }

    /// `check` said OK to `timeoutMs` 1e12 and `run` crashed; a NUL in
    /// `library` was silently cut. Both are manifest errors now, the same
    /// for `check` and `run`.
    func testCheckAndRun_refuseTheSameManifest() throws {
        let library = try builtProduct("libecho-commands.so")
        for (plugin, field) in [
            (["name": "p", "library": .string(library), "abi": 1, "hooks": ["magix"], "timeoutMs": 1e12], "timeoutMs"),
            (["name": "p", "library": .string(library + "\u{0}.txt"), "abi": 1, "hooks": ["magix"]], "library"),
            (["name": "p", "library": .string(library), "abi": 1, "hooks": ["magix"], "hangFactor": 2_147_483_647], "hangFactor"),
        ] as [(JSON, String)] {
            let manifest = try write(["manifestVersion": 1, "plugins": .array([plugin])], "plugins.json")
            let check = try ChildProcess("roombot", ["check", "--manifest", manifest]).finish()
            XCTAssertEqual(check.0, 2, "check \(field): \(check.1)")
            XCTAssertTrue(check.2.hasPrefix("roombot: plugins.json: plugins[0].\(field): "), check.2)
            if field == "library" { XCTAssertTrue(check.2.contains("must not contain a NUL character"), check.2) }
            let config = try write(["server": "ws://127.0.0.1:1/v1/rooms", "user": ["id": "b"], "auth": ["secret": "s"],
                                    "manifest": .string(manifest)], "bot.json")
            let run = try ChildProcess("roombot", ["run", "--config", config])
            let (status, _, errors) = run.finish(timeout: 10)
            XCTAssertEqual(run.process.terminationReason, .exit, "run \(field): \(errors)")
            XCTAssertEqual(status, 2, "run \(field): \(errors)")
            XCTAssertTrue(errors.contains("plugins[0].\(field): "), errors)
        }
    }

    /// bot.json `reconnectWindow` or `loginTimeout` of 1e300 crashed roombot.
    func testRun_withAHugeDurationInBotJSON_exits2WithOneLine() throws {
        for key in ["reconnectWindow", "loginTimeout"] {
            var object: [String: JSON] = ["server": "ws://127.0.0.1:1/v1/rooms", "user": ["id": "b"], "auth": ["secret": "s"]]
            object[key] = 1e300
            let config = try write(.object(object), "bot.json")
            let run = try ChildProcess("roombot", ["run", "--config", config])
            let (status, _, errors) = run.finish(timeout: 10)
            XCTAssertEqual(run.process.terminationReason, .exit, errors)
            XCTAssertEqual(status, 2)
            XCTAssertEqual(errors, "roombot: bot.json: \(key): must be a number of seconds in 0.001...31536000, got 1e+300\n")
        }
    }

    /// `--progress-interval=-1` was accepted; `-1` as its own argument was
    /// "Missing value". Both are now the range error, exit 2.
    func testNegativeProgressInterval_isARangeError_inBothSpellings() throws {
        for arguments in [["--progress-interval=-1"], ["--progress-interval", "-1"]] {
            let run = try ChildProcess("roombot", ["run", "--config", directory + "/missing.json"] + arguments).finish()
            XCTAssertEqual(run.0, 2)
            XCTAssertEqual(run.2, "roombot: --progress-interval: must be a number of seconds in 0...86400, got -1\n", "\(arguments)")
        }
    }

    /// A scenario is outside input too: `roombot simulate` trapped (or ran
    /// forever) on times at Int64.max.
    func testSimulate_withTimesAtInt64Max_exits2NamingTheField() throws {
        let manifest = try write(["manifestVersion": 1, "plugins": []], "plugins.json")
        let login: JSON = ["at": 0, "login": ["room": "lobby"]]
        let max = JSON.int(.max)
        for (steps, server, field) in [
            ([login, ["at": max, "logout": ["room": "lobby"]]], nil, "steps[1].at"),
            ([login, ["at": 10, "disconnect": ["for": max]]], nil, "steps[1].disconnect.for"),
            ([login, ["at": 1, "expect": ["within": max, "event": ["event": "x"]]]], nil, "steps[1].expect.within"),
            ([login, ["at": 1, "tokenWillExpire": ["room": "lobby", "in": max]]], nil, "steps[1].tokenWillExpire.in"),
            ([login], ["heartbeatInterval": max] as JSON, "server.heartbeatInterval"),
        ] as [([JSON], JSON?, String)] {
            var object: [String: JSON] = ["steps": .array(steps)]
            object["server"] = server
            let script = try write(.object(object), "scenario.json")
            let child = try ChildProcess("roombot", ["simulate", "--manifest", manifest, "--script", script])
            let (status, _, errors) = child.finish(timeout: 20)
            XCTAssertEqual(child.process.terminationReason, .exit, "\(field): \(errors.prefix(300))")
            XCTAssertEqual(status, 2, "\(field): \(errors.prefix(300))")
            XCTAssertTrue(errors.contains("\(field): must be in "), "\(field): \(errors)")
            XCTAssertEqual(errors.filter { $0 == "\n" }.count, 1, errors)
        }
    }

    /// §6: an interval longer than the timeout is refused; a timeout under
    /// two intervals and `--secret` on the command line are warned about.
    func testRoomd_heartbeatAndSecretChecks() throws {
        let refused = try ChildProcess("roomd", ["serve", "--listen", "127.0.0.1:0", "--secret-file", try secretFile(),
                                                 "--data", directory + "/d", "--heartbeat-interval", "100",
                                                 "--heartbeat-timeout", "50"]).finish()
        XCTAssertEqual(refused.0, 2)
        XCTAssertTrue(refused.2.hasPrefix("roomd: --heartbeat-interval: 100.0 s is longer than --heartbeat-timeout 50.0 s"),
                      refused.2)
        let negative = try ChildProcess("roomd", ["serve", "--listen", "127.0.0.1:0", "--secret-file", try secretFile(),
                                                  "--data", directory + "/d", "--heartbeat-interval", "-1"]).finish()
        XCTAssertEqual(negative.0, 2)
        XCTAssertEqual(negative.2, "roomd: --heartbeat-interval: must be a number of seconds in 0.001...86400, got -1\n")
        let (_, warned) = try serveAndStop(["--listen", "127.0.0.1:0", "--secret", "on-the-command-line",
                                            "--heartbeat-interval", "10", "--heartbeat-timeout", "15"])
        XCTAssertTrue(warned.contains("--heartbeat-timeout 15.0 s is shorter than two --heartbeat-interval"), warned)
        XCTAssertEqual(warned.components(separatedBy: "--secret is visible").count, 2, "warned once: \(warned)")
        let (_, quiet) = try serveAndStop(["--listen", "127.0.0.1:0", "--secret-file", try secretFile()])
        XCTAssertFalse(quiet.contains("warning"), quiet)
        // A timeout alone below the default interval: the interval follows it (half), no refusal, no warning.
        let (_, shrunk) = try serveAndStop(["--listen", "127.0.0.1:0", "--secret-file", try secretFile(), "--heartbeat-timeout", "5"])
        XCTAssertFalse(shrunk.contains("warning"), shrunk)
    }

    private func secretFile() throws -> String {
        let path = directory + "/secret"
        try Data("a-secret\n".utf8).write(to: URL(fileURLWithPath: path))
        return path
    }
}
