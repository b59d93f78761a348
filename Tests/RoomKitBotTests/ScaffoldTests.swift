import Foundation
import RoomKit
import RoomKitProtocol
import RoomKitTestSupport
import XCTest

/// `roombot new-plugin`: each scaffold whose toolchain is on the machine is
/// written into a temporary directory, built and tested with the commands its
/// README gives, checked with `roombot check`, and run in a real `roombot run`
/// against roomd, where it answers, takes roomConfig, and takes a live config
/// change (PUT /v1/plugins/{name}/config) that survives a restart.
final class ScaffoldTests: XCTestCase {
    func testCScaffold_buildsWithPkgConfig_loadsAndRuns() async throws {
        try require("cc")
        try require("make")
        try require("pkg-config")
        try await scaffold(lang: "c") { directory in
            // The Makefile knows where the roombot that wrote it lives (its PREFIX after `make install`).
            let makefile = (try? String(contentsOfFile: directory + "/Makefile", encoding: .utf8)) ?? ""
            let roombot = URL(fileURLWithPath: try builtProduct("roombot")).resolvingSymlinksInPath()
            XCTAssertTrue(makefile.contains("ROOMKIT_PREFIX ?= \(roombot.deletingLastPathComponent().deletingLastPathComponent().path)\n"), makefile)
            XCTAssertTrue(makefile.contains("$(wildcard \(roombot.path))"), makefile)
            XCTAssertTrue(makefile.contains("run `make install` of RoomKit first"), makefile)
            // What `make install` writes, pointing at this checkout's headers.
            let pc = directory + "/../pkgconfig"
            try FileManager.default.createDirectory(atPath: pc, withIntermediateDirectories: true)
            try """
                prefix=/unused
                includedir=\(Self.repo)/Sources/CRoomKitPluginABI/include
                Name: roomkit-plugin
                Description: C ABI for RoomKit handler plugins
                Version: 0.1.0
                Cflags: -I${includedir}

                """.write(toFile: pc + "/roomkit-plugin.pc", atomically: true, encoding: .utf8)
            return ["PKG_CONFIG_PATH": pc]
        }
    }

    func testRustScaffold_buildsOffline_loadsAndRuns() async throws {
        try require("cargo")
        try await scaffold(lang: "rust") { _ in ["CARGO_NET_OFFLINE": "true"] }
    }

    /// The Rust scaffold's sources are files (`Sources/roombot/Templates/rust/`,
    /// resources of roombot): each one is in the project, its placeholders
    /// filled in, the rest byte for byte.
    func testRustScaffold_isWrittenFromTheTemplateFiles() throws {
        let harness = try BotHarness()
        defer { try? harness.close() }
        let project = harness.directory + "/project"
        let (made, output, errors) = try ChildProcess("roombot", ["new-plugin", "tpl-check", "--lang", "rust", "--dir", project]).finish()
        XCTAssertEqual(made, 0, output + errors)
        let templates = Self.repo + "/Sources/roombot/Templates/rust"
        let files = try XCTUnwrap(FileManager.default.subpathsOfDirectory(atPath: templates)).filter {
            var isDirectory: ObjCBool = false
            return FileManager.default.fileExists(atPath: templates + "/" + $0, isDirectory: &isDirectory) && !isDirectory.boolValue
        }
        XCTAssertEqual(Set(files), ["Cargo.toml", "README.md", "src/abi.rs", "src/json.rs", "src/lib.rs", "tests/simulate.rs"])
        for file in files {
            let template = try String(contentsOfFile: templates + "/" + file, encoding: .utf8)
            let written = try String(contentsOfFile: project + "/" + file, encoding: .utf8)
            XCTAssertFalse(written.contains("@@"), file)
            let head = try XCTUnwrap(template.components(separatedBy: "@@runSection@@").first)
            XCTAssertEqual(written.hasPrefix(head.replacingOccurrences(of: "@@name@@", with: "tpl-check")
                                                .replacingOccurrences(of: "@@identifier@@", with: "tpl_check")), true, file)
        }
    }

    /// The Python scaffold is the resource files of Templates/python (not a
    /// Swift string), each with its placeholders filled in.
    func testPythonScaffold_isWrittenFromTheTemplateFiles() throws {
        let harness = try BotHarness()
        defer { try? harness.close() }
        let project = harness.directory + "/project"
        let (made, output, errors) = try ChildProcess("roombot", ["new-plugin", "tpl-check", "--lang", "python", "--dir", project,
                                                                  "--roomkit-path", Self.repo]).finish()
        XCTAssertEqual(made, 0, output + errors)
        let templates = Self.repo + "/Sources/roombot/Templates/python"
        let files = try FileManager.default.contentsOfDirectory(atPath: templates)
        XCTAssertEqual(Set(files), ["plugin.py", "test_plugin.py", "README.md"])
        let written = ["plugin.py": "tpl_check.py", "test_plugin.py": "test_tpl_check.py", "README.md": "README.md"]
        for file in files {
            let template = try String(contentsOfFile: templates + "/" + file, encoding: .utf8)
            let text = try String(contentsOfFile: project + "/" + (written[file] ?? file), encoding: .utf8)
            XCTAssertFalse(text.contains("@@"), file)
            // Up to the first placeholder that is not the name.
            var head = template
            for mark in ["@@checkout@@", "@@install@@", "@@sdkPath@@", "@@runSection@@"] {
                head = try XCTUnwrap(head.components(separatedBy: mark).first)
            }
            XCTAssertTrue(text.hasPrefix(head.replacingOccurrences(of: "@@name@@", with: "tpl-check")
                                             .replacingOccurrences(of: "@@identifier@@", with: "tpl_check")), file)
        }
        let readme = try String(contentsOfFile: project + "/README.md", encoding: .utf8)
        XCTAssertTrue(readme.contains("pip install " + Self.repo + "/sdk/python"), readme)
    }

    /// Without --roomkit-path: roombot finds the checkout it was built in, and
    /// the scaffold depends on it by path (no URL, no version to resolve).
    func testSwiftScaffold_dependsOnTheCheckoutByPath_buildsLoadsAndRuns() async throws {
        try require("swift")
        try await scaffold(lang: "swift") { project in
            let manifest = (try? String(contentsOfFile: project + "/Package.swift", encoding: .utf8)) ?? ""
            XCTAssertTrue(manifest.contains(".package(name: \"RoomKit\", path: \"\(Self.repo)\")"), manifest)
            XCTAssertFalse(manifest.contains("github.com"), manifest)
            return [:]
        }
    }

    func testPythonScaffold_testsInTheSimulator_loadsAndRuns() async throws {
        try require("python3")
        // What `pip install ROOMKIT/sdk/python` provides, from this checkout.
        try await scaffold(lang: "python", extra: ["--roomkit-path", Self.repo]) { _ in
            ["PYTHONPATH": Self.repo + "/sdk/python"]
        }
    }

    // MARK: Support

    static let repo = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path

    private func require(_ tool: String) throws {
        let (status, _) = try shell("command -v \(tool)", in: "/", environment: [:])
        if status != 0 { throw XCTSkip("\(tool) is not installed") }
    }

    /// Runs `command` with sh in `directory`, roombot first on PATH.
    private func shell(_ command: String, in directory: String, environment extra: [String: String]) throws -> (Int32, String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = ["-c", command]
        process.currentDirectoryURL = URL(fileURLWithPath: directory)
        var environment = ProcessInfo.processInfo.environment
        let bin = (try builtProduct("roombot") as NSString).deletingLastPathComponent
        environment["PATH"] = bin + ":" + (environment["PATH"] ?? "/usr/bin:/bin")
        for (key, value) in extra { environment[key] = value }
        process.environment = environment
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        try process.run()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        return (process.terminationStatus, text)
    }

    /// The README's two commands (the indented lines under "Build, test and load").
    private func readmeCommands(_ readme: String) -> [String] {
        guard let section = readme.components(separatedBy: "## Build, test and load").dropFirst().first else { return [] }
        return section.split(separator: "\n").prefix { !$0.hasPrefix("##") }
            .filter { $0.hasPrefix("    ") }
            .map { $0.trimmingCharacters(in: .whitespaces).components(separatedBy: "  #").first!.trimmingCharacters(in: .whitespaces) }
            .filter { !$0.isEmpty }
    }

    private func scaffold(lang: String, extra: [String] = [], environment: (String) throws -> [String: String]) async throws {
        let harness = try BotHarness()
        defer { try? harness.close() }
        let name = "hello-\(lang)"
        let project = harness.directory + "/project"
        let (made, madeOutput, madeErrors) = try ChildProcess("roombot", ["new-plugin", name, "--lang", lang, "--dir", project] + extra).finish()
        XCTAssertEqual(made, 0, madeOutput + madeErrors)
        // Refuses to write over a project.
        let (again, _, againErrors) = try ChildProcess("roombot", ["new-plugin", name, "--lang", lang, "--dir", project]).finish()
        XCTAssertEqual(again, 2)
        XCTAssertTrue(againErrors.contains("--dir: \(project) exists and is not empty"), againErrors)

        let env = try environment(project)
        let commands = readmeCommands(try String(contentsOfFile: project + "/README.md", encoding: .utf8))
        XCTAssertEqual(commands.count, 2, "the README builds and loads in two commands: \(commands)")
        var outputs = ""
        for command in commands {
            let (status, output) = try shell(command, in: project, environment: env)
            outputs += output
            // The Swift scaffold resolves RoomKit's own dependencies (swift-log, …):
            // with neither a network nor SwiftPM's cache that cannot work here.
            if status != 0, lang == "swift", output.contains("Failed to clone") || output.contains("Couldn't fetch")
                || output.contains("Could not resolve") {
                throw XCTSkip("the Swift scaffold's dependencies cannot be fetched: \(output.suffix(300))")
            }
            XCTAssertEqual(status, 0, "\(command):\n\(output)")
            if status != 0 { return }
        }
        // The test the README runs includes scenario.json in roombot's simulator.
        let simulated = ["c": "scenario.json: 3 expectation(s) held", "rust": "test scenario_holds_in_the_simulator ... ok",
                         "swift": "testScenarioHoldsInTheSimulator' passed",
                         "python": "test_scenario_holds_in_the_simulator"][lang]!
        XCTAssertTrue(outputs.contains(simulated), "the scaffold's test ran its scenario: \(outputs.suffix(2000))")

        // roombot run with the scaffold's own manifest.
        let events = harness.directory + "/events.ndjson"
        let port = freePort()
        guard case .object(var config) = harness.standardConfig(rooms: ["lobby", "vip-1"], control: "127.0.0.1:\(port)") else { return }
        config["manifest"] = .string(project + "/plugins.json")
        let path = try harness.writeConfig(.object(config))
        var bot = try ChildProcess("roombot", ["run", "--config", path, "--log-level", "warning"], environment: env)
        await eventually(20, "both rooms LOGINED") { (fileText(events) ?? "").components(separatedBy: #""reason":"LOGINED""#).count == 3 }

        let member = try Watcher(url: harness.serverURL)
        let lobby = try await member.host.loginRoom("lobby", user: LoginUser(id: "human"), token: harness.token("human"))
        let vip = try await member.host.loginRoom("vip-1", user: LoginUser(id: "human"), token: harness.token("human"))
        let inbox = MagixCollector()
        let listeners = [lobby, vip].map { room in room.addMagixEventListener("pong") { inbox.add(room.id, $0.payload) } }

        func pong(_ room: Room) async throws -> JSON? {
            let before = inbox.count
            try await room.dispatchMagixEvent("ping", payload: .null)
            await eventually(10, "pong in \(room.id)") { inbox.count > before }
            return inbox.last
        }
        var reply = try await pong(lobby)
        XCTAssertEqual(reply?["greeting"], "hello")
        XCTAssertEqual(reply?["to"]?.int64Value, lobby.memberId)
        reply = try await pong(vip)
        XCTAssertEqual(reply?["greeting"], "welcome back", "roomConfig vip-* overrides the greeting")

        let (status, body) = http(port, "PUT", "/v1/plugins/\(name)/config", #"{"config": {"greeting": "hi"}}"#)
        XCTAssertEqual(status, 200, body)
        let refused = http(port, "PUT", "/v1/plugins/\(name)/config", #"{"greeting": "no wrapper"}"#)
        XCTAssertEqual(refused.0, 400)
        XCTAssertEqual(try JSON.parse(refused.1)["code"], 1009006)
        XCTAssertTrue(try JSON.parse(refused.1)["message"]?.stringValue?.contains("greeting: unknown field") == true, refused.1)
        XCTAssertEqual(http(port, "PUT", "/v1/plugins/nobody/config", #"{"config": 1}"#).0, 404)
        reply = try await pong(lobby)
        XCTAssertEqual(reply?["greeting"], "hi")
        reply = try await pong(vip)
        XCTAssertEqual(reply?["greeting"], "welcome back")
        XCTAssertEqual((fileText(events) ?? "").components(separatedBy: #""event":"pluginConfig""#).count - 1, 1)

        // A restart keeps the live config.
        bot.signal(SIGTERM)
        XCTAssertEqual(bot.finish().0, 0)
        bot = try ChildProcess("roombot", ["run", "--config", path, "--log-level", "warning"], environment: env)
        await eventually(20, "LOGINED again") { (fileText(events) ?? "").components(separatedBy: #""reason":"LOGINED""#).count == 5 }
        reply = try await pong(lobby)
        XCTAssertEqual(reply?["greeting"], "hi")
        bot.signal(SIGTERM)
        XCTAssertEqual(bot.finish().0, 0)
        listeners.forEach { $0.cancel() }
        try await member.close()
    }
}

/// Magix payloads a member receives, in order.
final class MagixCollector: @unchecked Sendable {
    // @unchecked Sendable: guarded by lock.
    private let lock = NSLock()
    private var payloads: [(String, JSON)] = []
    func add(_ room: String, _ payload: JSON) { lock.withLock { payloads.append((room, payload)) } }
    var count: Int { lock.withLock { payloads.count } }
    var last: JSON? { lock.withLock { payloads.last?.1 } }
}
