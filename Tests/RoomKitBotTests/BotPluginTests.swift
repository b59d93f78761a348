import Foundation
import RoomKitProtocol
import RoomKitTokens
import RoomKitTestSupport
import XCTest

/// roombot with plugins, as an operator runs it (issue 20, plugins 1 and 3).
final class BotPluginTests: XCTestCase {
    private func lines(_ path: String, containing text: String) -> Int {
        (fileText(path) ?? "").split(separator: "\n").filter { $0.contains(text) }.count
    }

    func testTokenFileGoingBadWhileRunning_isOneThrowError_andErrorLogWritesItOnce() async throws {
        let harness = try BotHarness()
        defer { try? harness.close() }
        let dir = harness.directory
        let now = Int64(Date().timeIntervalSince1970)
        // Good for 31 s: the server warns at 30 s left (its default notice), about a second from now.
        let token = TokenSigner(secret: harness.secret).sign(TokenClaims(sub: "bot-1", room: "*", role: .writer, exp: now + 31, iat: now))
        let tokenFile = dir + "/tokens.json"
        try Data(JSON.object(["*": .string(token)]).serialized()).write(to: URL(fileURLWithPath: tokenFile))
        let errorFile = dir + "/errors.ndjson"
        let manifest = try harness.writeConfig(["manifestVersion": 1, "plugins": [
            ["name": "error-log", "library": .string(try builtProduct("liberror-log.so")), "abi": 1, "hooks": ["throwError"],
             "config": ["file": .string(errorFile)]],
        ]], name: "plugins.json")
        guard case .object(var config) = harness.standardConfig(rooms: ["lobby"], control: nil) else { return XCTFail("config") }
        config["auth"] = ["tokenFile": .string(tokenFile)]
        config["manifest"] = .string(manifest)
        let path = try harness.writeConfig(.object(config))
        let bot = try ChildProcess("roombot", ["run", "--config", path, "--log-level", "warning"])
        let events = dir + "/events.ndjson"
        await eventually(10, "LOGINED") { self.lines(events, containing: #""reason":"LOGINED""#) == 1 }
        // The token file goes bad: the automatic renewal can no longer succeed.
        try Data(#"{"*": "not-a-token"}"#.utf8).write(to: URL(fileURLWithPath: tokenFile))
        await eventually(10, "the failed renewal is logged") {
            self.lines(events, containing: #""event":"throwError""#) >= 1 && self.lines(errorFile, containing: "\"domain\"") >= 1
        }
        try await Task.sleep(for: .milliseconds(500))  // a duplicate would be written by now
        bot.signal(SIGTERM)
        XCTAssertEqual(bot.finish().0, 0)
        XCTAssertEqual(lines(events, containing: #""event":"throwError""#), 1, fileText(events) ?? "")
        XCTAssertEqual(lines(errorFile, containing: "\"domain\""), 1, "error-log hears each error once: \(fileText(errorFile) ?? "")")
    }

    /// Runs `roombot check --manifest rel.json` in `directory` with
    /// `LD_LIBRARY_PATH` starting with `searchPath`.
    private func check(in directory: String, searchPath: String) throws -> (Int32, String, String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: try builtProduct("roombot"))
        process.arguments = ["check", "--manifest", "rel.json"]
        process.currentDirectoryURL = URL(fileURLWithPath: directory)
        var environment = ProcessInfo.processInfo.environment
        environment["LD_LIBRARY_PATH"] = [searchPath, environment["LD_LIBRARY_PATH"]].compactMap { $0 }.joined(separator: ":")
        process.environment = environment
        let output = Pipe(), errors = Pipe()
        process.standardOutput = output
        process.standardError = errors
        try process.run()
        let out = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        let err = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        return (process.terminationStatus, out, err)
    }

    /// A plugin exporting only what `hooks` sets (C designated initialisers).
    private static func plugin(_ hooks: String) -> String {
        """
        #include "roomkit_plugin.h"
        #include <stdlib.h>
        static char *keep(void *self, const char *url) { (void)self; (void)url; return NULL; }
        static roomkit_plugin descriptor = {
            .struct_size = sizeof(roomkit_plugin), .abi_major = ROOMKIT_PLUGIN_ABI_MAJOR,
            .abi_minor = ROOMKIT_PLUGIN_ABI_MINOR, \(hooks)
        };
        const roomkit_plugin *roomkit_plugin_entry(uint16_t major, uint16_t minor) { (void)major; (void)minor; (void)keep; return &descriptor; }
        """
    }

    func testBareLibraryName_inARelativeManifestPath_resolvesNextToTheManifest_neverThroughLD_LIBRARY_PATH() throws {
        let harness = try BotHarness()
        defer { try? harness.close() }
        let near = harness.directory + "/near", far = harness.directory + "/far"
        for dir in [near, far] { try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true) }
        let nearPath = URL(fileURLWithPath: near).resolvingSymlinksInPath().path
        // The one on the search path lacks the declared hook: loading it fails the check.
        try FileManager.default.moveItem(atPath: try compilePlugin("nohook", source: Self.plugin(""), in: far),
                                         toPath: far + "/libx.so")
        try Data(JSON.object(["manifestVersion": 1, "plugins": [
            ["name": "x", "library": "libx.so", "abi": 1, "hooks": ["urlInterrupter"]],
        ]]).serialized()).write(to: URL(fileURLWithPath: near + "/rel.json"))

        // Nothing next to the manifest: 'no such file', naming the resolved path.
        var (status, out, err) = try check(in: near, searchPath: far)
        XCTAssertEqual(status, 2, out)
        XCTAssertEqual(err, "roombot: rel.json: plugins[0].library: no such file: \(nearPath)/libx.so\n")

        // The library next to the manifest is the one loaded.
        try FileManager.default.moveItem(atPath: try compilePlugin("hook", source: Self.plugin(".url_interrupter = keep,"), in: near),
                                         toPath: near + "/libx.so")
        (status, out, err) = try check(in: near, searchPath: far)
        XCTAssertEqual(status, 0, err)
        XCTAssertEqual(out, "rel.json: plugins[0] (x): \(nearPath)/libx.so, ABI 1.1, isolation process (memoryLimitMB 1024, "
                       + "cpuLimitSeconds 0, maxCrashes 5 in 300 s, hangFactor 20)\nrel.json: 1 plugin(s) OK\n")
    }
}
