import Foundation
import RoomKitProtocol
import RoomKitTestSupport
import XCTest

/// `roombot check` checks every plugin in a child process, as `run` starts
/// it: a library that crashes while loading, an entry that is not a
/// function, a FIFO, or a command that never answers cost only that child.
final class CheckInChildTests: XCTestCase {
    private func check(_ entries: [JSON], in harness: BotHarness) throws -> (Int32, String, String) {
        let path = try harness.writeConfig(["manifestVersion": 1, "plugins": .array(entries)], name: "plugins.json")
        return try ChildProcess("roombot", ["check", "--manifest", path]).finish(timeout: 30)
    }

    func testCheck_aConstructorThatSegfaults_isAnErrorNamingTheSignal_notACrashOfCheck() throws {
        let harness = try BotHarness()
        defer { try? harness.close() }
        let library = try compilePlugin("ctor", source: """
            #include "roomkit_plugin.h"
            __attribute__((constructor)) static void boom(void) { static int *volatile nowhere; *nowhere = 1; }
            ROOMKIT_DECLARE_PLUGIN(.on_load = 0)
            """, in: harness.directory)
        let (status, _, errors) = try check([["name": "ctor", "library": .string(library), "abi": 1, "hooks": ["magix"]]], in: harness)
        XCTAssertEqual(status, 2, errors)
        XCTAssertTrue(errors.contains("plugins[0] (ctor): the plugin process was killed by signal 11 (SIGSEGV) while starting"), errors)
    }

    func testCheck_anEntryNamingADataSymbol_isAnError() throws {
        let harness = try BotHarness()
        defer { try? harness.close() }
        let library = try compilePlugin("data", source: "int not_a_function[64] = {1};\n", in: harness.directory)
        let (status, _, errors) = try check([["name": "data", "library": .string(library), "entry": "not_a_function", "abi": 1,
                                              "hooks": ["magix"]]], in: harness)
        XCTAssertEqual(status, 2, errors)
        XCTAssertTrue(errors.contains("plugins[0] (data): the plugin process was killed by signal"), errors)
    }

    func testCheck_aFIFOAsLibrary_doesNotHang() throws {
        let harness = try BotHarness()
        defer { try? harness.close() }
        let fifo = harness.directory + "/libfifo.so"
        XCTAssertEqual(mkfifo(fifo, 0o644), 0)
        let (status, _, errors) = try check([["name": "fifo", "library": .string(fifo), "abi": 1, "hooks": ["magix"]]], in: harness)
        XCTAssertEqual(status, 2, errors)
        XCTAssertTrue(errors.contains("plugins[0] (fifo): the plugin process did not answer within"), errors)
    }

    func testCheck_commandPlugins_answerTheHello_orGetAClearError() throws {
        guard PluginCommandProbe.python3 else { throw XCTSkip("python3 is not on PATH") }
        let harness = try BotHarness()
        defer { try? harness.close() }
        try WirePythonFixture.script.write(toFile: harness.directory + "/fixture_plugin.py", atomically: true, encoding: .utf8)
        let good: JSON = ["name": "py", "command": ["python3", "fixture_plugin.py", "rec.ndjson", "none"], "abi": 1, "hooks": ["magix"]]
        let (okStatus, out, okErrors) = try check([good], in: harness)
        XCTAssertEqual(okStatus, 0, okErrors)
        XCTAssertTrue(out.contains("plugins[0] (py): "), out)
        XCTAssertTrue(out.contains("fixture_plugin.py rec.ndjson none, ABI 1.1, isolation process"), out)

        let (missingStatus, _, missing) = try check([["name": "py", "command": ["no-such-plugin-command-xyz"], "abi": 1, "hooks": ["magix"]]],
                                                    in: harness)
        XCTAssertEqual(missingStatus, 2)
        XCTAssertTrue(missing.contains("plugins[0] (py).command[0]: not found on PATH: no-such-plugin-command-xyz"), missing)

        let (silentStatus, _, silent) = try check([["name": "py", "command": ["sleep", "30"], "abi": 1, "hooks": ["magix"]]], in: harness)
        XCTAssertEqual(silentStatus, 2)
        XCTAssertTrue(silent.contains("plugins[0] (py): the plugin process did not answer within"), silent)

        let (hookStatus, _, hook) = try check([["name": "py", "command": ["python3", "fixture_plugin.py", "r", "none"], "abi": 1,
                                                "hooks": ["player"]]], in: harness)
        XCTAssertEqual(hookStatus, 2)
        XCTAssertTrue(hook.contains("declares hook 'player' but does not export it"), hook)
    }

    func testManifest_commandAndLibraryTogether_orInline_areRefused() throws {
        let harness = try BotHarness()
        defer { try? harness.close() }
        let (status, _, errors) = try check([
            ["name": "a", "command": ["python3"], "library": "x.so", "abi": 1, "hooks": ["magix"]],
            ["name": "b", "command": ["python3"], "isolation": "inline", "abi": 1, "hooks": ["magix"]],
            ["name": "c", "command": [], "abi": 1, "hooks": ["magix"]],
        ], in: harness)
        XCTAssertEqual(status, 2)
        XCTAssertTrue(errors.contains("plugins[0].command: give library or command, not both"), errors)
        XCTAssertTrue(errors.contains("plugins[1].isolation: a command plugin always runs in its own process"), errors)
        XCTAssertTrue(errors.contains("plugins[2].command: must be a non-empty array"), errors)
    }
}
