import Foundation
import RoomKit
import RoomKitPluginHost
import RoomKitProtocol
import RoomKitTestSupport
import XCTest

/// ABI 1.1 keeps 1.0 plugins working, and the header helpers do what they say.
final class ABICompatibilityTests: XCTestCase {
    /// roomkit_json.h: a C test program (unit checks, every prefix of a
    /// document, 20000 seeded mutations, 90000-deep nesting), built with
    /// AddressSanitizer and UBSan when the compiler has them, must pass.
    func testJSONReader_unitAndMutationCases_passUnderSanitizers() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("roomkit-json-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let binary = directory + "/json_reader_test"
        let common = ["-std=c99", "-Wall", "-Wextra", "-Werror", "-g", "-I", Platform.include,
                      Platform.fixtures + "/json_reader_test.c", "-o", binary]
        var (status, output) = try Platform.cc(["-fsanitize=address,undefined", "-fno-sanitize-recover=all"] + common)
        if status != 0 { (status, output) = try Platform.cc(common) }
        XCTAssertEqual(status, 0, output)
        let (exit, text) = try Platform.run(binary)
        XCTAssertEqual(exit, 0, text)
        XCTAssertTrue(text.contains(", 0 failed"), text)
    }

    /// The shipped echo-commands as it was built against the 1.0 header (a
    /// copy of that header is a test fixture) loads in this 1.1 host, is
    /// reported as 1.0, and answers !ping; the 1.1 host never reads past its
    /// descriptor (it has no on_config_changed, so a live config change
    /// reaches it only through config_get_json, and is not an error).
    func testPluginBuiltAgainstTheABI10Header_loadsAndWorks() async throws {
        let harness = try PluginHarness()
        let include = harness.directory + "/include-1.0"
        try FileManager.default.createDirectory(atPath: include, withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: Platform.fixtures + "/roomkit_plugin_1_0.h", toPath: include + "/roomkit_plugin.h")
        try FileManager.default.copyItem(atPath: Platform.repo.path + "/Plugins/EchoCommands/include/echo_commands.h",
                                         toPath: include + "/echo_commands.h")
        let source = try String(contentsOfFile: Platform.fixtures + "/echo_commands_1_0.c", encoding: .utf8)
        let library = try Platform.plugin("echo10", source: source, in: harness.directory, include: include)
        let manifestPath = try harness.writeManifest(manifest([pluginEntry("echo10", library: library, hooks: ["magix"])]), name: "m10.json")
        XCTAssertEqual(PluginChecker.inspect(try PluginManifest(path: manifestPath)).map(\.abi), ["1.0"])

        let (bot, errors) = try harness.botHost(manifest: manifest([pluginEntry("echo10", library: library, hooks: ["magix"])]))
        XCTAssertEqual(errors, [])
        _ = try await bot.loginRoom("lobby", user: LoginUser(id: "bot"), token: harness.token("bot"))
        let room = try await harness.host().loginRoom("lobby", user: LoginUser(id: "human"), token: harness.token("human"))
        let inbox = MagixInbox()
        let listener = room.addMagixEventListener("reply") { inbox.add($0) }
        try harness.manager.updateConfig("echo10", body: ["config": ["prefix": "?"]])
        try await room.dispatchMagixEvent("command", payload: "!ping")
        await eventually(5, "pong from the 1.0 plugin") { inbox.all.count == 1 }
        XCTAssertEqual(inbox.all.first?.payload["text"], "pong")
        listener.cancel()
        XCTAssertTrue(harness.manager.reports.allSatisfy { $0.status == .loaded && $0.failures == 0 }, "\(harness.manager.reports)")
        try await harness.close()
    }

    /// The shipped echo-commands, now written with ROOMKIT_DECLARE_PLUGIN and
    /// roomkit_json.h, declares 1.1, reads escaped payloads correctly, and
    /// takes a new prefix live.
    func testShippedEchoCommands_declaresABI11_andTakesItsPrefixLive() async throws {
        let harness = try PluginHarness()
        let echo = try shippedPlugin("echo-commands")
        let path = try harness.writeManifest(manifest([pluginEntry("echo", library: echo, hooks: ["magix"])]), name: "m.json")
        XCTAssertEqual(PluginChecker.inspect(try PluginManifest(path: path)).map(\.abi), ["1.1"])
        let (bot, errors) = try harness.botHost(manifest: manifest([pluginEntry("echo", library: echo, hooks: ["magix"])]))
        XCTAssertEqual(errors, [])
        _ = try await bot.loginRoom("lobby", user: LoginUser(id: "bot"), token: harness.token("bot"))
        let room = try await harness.host().loginRoom("lobby", user: LoginUser(id: "human"), token: harness.token("human"))
        let inbox = MagixInbox()
        let listener = room.addMagixEventListener("reply") { inbox.add($0) }
        // An escaped payload ("\u0021ping" is "!ping") and the object form both count.
        try await room.dispatchMagixEvent("command", payload: ["text": "\u{21}ping"])
        await eventually(5, "pong") { inbox.all.count == 1 }
        try harness.manager.updateConfig("echo", body: ["config": ["prefix": "?"]])
        try await room.dispatchMagixEvent("command", payload: "!ping")  // the old prefix: no answer
        try await room.dispatchMagixEvent("command", payload: "?ping")
        await eventually(5, "pong to the new prefix") { inbox.all.count == 2 }
        try await Task.sleep(for: .milliseconds(200))
        XCTAssertEqual(inbox.all.count, 2, "the old prefix must no longer answer")
        XCTAssertEqual(inbox.all.last?.payload["to"]?.int64Value, room.memberId)
        listener.cancel()
        try await harness.close()
    }
}
