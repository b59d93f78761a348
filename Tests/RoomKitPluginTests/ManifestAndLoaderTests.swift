import Foundation
import RoomKitPluginHost
import RoomKitProtocol
import RoomKitTestSupport
import XCTest

final class ManifestAndLoaderTests: XCTestCase {
    private func problems(_ json: JSON) throws -> [String] {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("manifest-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("plugins.json").path
        try Data(json.serialized()).write(to: URL(fileURLWithPath: path))
        do {
            _ = try PluginManifest(path: path)
            return []
        } catch {
            return error.errors.map(\.description)
        }
    }

    func testManifest_everyProblemIsOneLineNamingFileAndField() throws {
        let lines = try problems([
            "manifestVersion": 1,
            "plugins": [
                ["name": "Bad Name", "library": "lib/none.so", "abi": 1, "hooks": ["room"]],
                ["name": "ok-one", "library": "/dev/null/x.so", "abi": 2, "hooks": ["nope"], "timeoutMs": 0],
                ["name": "dup", "library": "/etc/hostname", "abi": 1, "hooks": ["room"], "rooms": []],
                ["name": "dup", "library": "/etc/hostname", "abi": 1, "hooks": ["room"], "extra": true],
            ],
        ])
        XCTAssertTrue(lines.contains("plugins.json: plugins[0].name: must match [a-z0-9-]{1,64}, got 'Bad Name'"), "\(lines)")
        XCTAssertTrue(lines.contains { $0.hasPrefix("plugins.json: plugins[0].library: no such file: ") }, "\(lines)")
        XCTAssertTrue(lines.contains("plugins.json: plugins[1].abi: 2 does not match the host's ABI 1"), "\(lines)")
        XCTAssertTrue(lines.contains { $0.hasPrefix("plugins.json: plugins[1].hooks[0]: unknown hook \"nope\"") }, "\(lines)")
        XCTAssertTrue(lines.contains("plugins.json: plugins[1].timeoutMs: must be in 1...600000, got 0"), "\(lines)")
        XCTAssertTrue(lines.contains("plugins.json: plugins[2].rooms: must be a non-empty array of glob patterns"), "\(lines)")
        XCTAssertTrue(lines.contains("plugins.json: plugins[3].name: duplicate 'dup' (also plugins[2])"), "\(lines)")
        XCTAssertTrue(lines.contains("plugins.json: plugins[3].extra: unknown field"), "\(lines)")
        XCTAssertTrue(lines.allSatisfy { !$0.contains("\n") })
        XCTAssertEqual(try problems(["plugins": []]), ["plugins.json: manifestVersion: missing (expected 1)"])
    }

    func testManifest_isolation_defaultsToProcess_andIsValidatedByName() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("manifest-\(UUID().uuidString)").path
        let json: JSON = ["manifestVersion": 1, "plugins": [
            ["name": "a", "library": "/etc/hostname", "abi": 1, "hooks": ["room"]],
            ["name": "b", "library": "/etc/hostname", "abi": 1, "hooks": ["room"], "isolation": "inline"],
            ["name": "c", "library": "/etc/hostname", "abi": 1, "hooks": ["room"], "isolation": "process",
             "memoryLimitMB": 64, "cpuLimitSeconds": 2, "maxCrashes": 1, "crashWindowSeconds": 10, "restartBackoffMs": 5,
             "hangFactor": 3, "queueLimit": 7, "shutdownTimeoutMs": 100],
        ]]
        let specs = try PluginManifest(json: json, path: directory + "/plugins.json").plugins
        XCTAssertEqual(specs.map(\.isolation), [.process, .inline, .process])
        XCTAssertEqual(specs[0].supervision, PluginSupervision())
        var expected = PluginSupervision()
        expected.memoryLimitMB = 64; expected.cpuLimitSeconds = 2; expected.maxCrashes = 1; expected.crashWindowSeconds = 10
        expected.restartBackoffMs = 5; expected.hangFactor = 3; expected.queueLimit = 7; expected.shutdownTimeoutMs = 100
        XCTAssertEqual(specs[2].supervision, expected)

        let lines = try problems(["manifestVersion": 1, "plugins": [
            ["name": "a", "library": "/etc/hostname", "abi": 1, "hooks": ["room"], "isolation": "thread"],
            ["name": "b", "library": "/etc/hostname", "abi": 1, "hooks": ["room"], "isolation": "inline", "memoryLimitMB": 64],
            ["name": "c", "library": "/etc/hostname", "abi": 1, "hooks": ["room"], "hangFactor": 0, "memoryLimitMB": 8],
        ]])
        XCTAssertEqual(lines, [
            "plugins.json: plugins[0].isolation: must be \"process\" or \"inline\", got \"thread\"",
            "plugins.json: plugins[1].memoryLimitMB: only applies with \"isolation\": \"process\"",
            "plugins.json: plugins[2].hangFactor: must be in 1...1000, got 0",
            "plugins.json: plugins[2].memoryLimitMB: must be 0 (no limit) or at least 16",
        ])
    }

    func testLoader_givesADistinctErrorForEachStage() async throws {
        let harness = try PluginHarness()
        let dir = harness.directory
        let notALibrary = dir + "/libgarbage.so"
        try Data("not an ELF file".utf8).write(to: URL(fileURLWithPath: notALibrary))
        let cases: [(String, String, [String], PluginLoadError.Stage, String)] = [
            ("garbage", notALibrary, ["room"], .dlopen, "dlopen failed"),
            ("wrong-entry", try compilePlugin("wrongentry", source: TestPlugins.wrongEntry, in: dir), ["room"], .missingEntry,
             "entry symbol 'roomkit_plugin_entry' not found"),
            ("bad-abi", try compilePlugin("badabi", source: TestPlugins.badABI, in: dir), ["room"], .abiMismatch, "ABI mismatch: plugin 2."),
            ("refusing", try compilePlugin("refusing", source: TestPlugins.refusing, in: dir), ["room"], .entryRefused,
             "the entry refused host ABI 1.1"),
            ("no-hook", try compilePlugin("nohook", source: TestPlugins.missingHook, in: dir), ["urlInterrupter"], .hookNotExported,
             "declares hook 'urlInterrupter' but does not export it"),
        ]
        let (_, errors) = try harness.botHost(manifest: manifest(cases.map { pluginEntry($0.0, library: $0.1, hooks: $0.2) }))
        XCTAssertEqual(errors.count, cases.count)
        for (name, _, _, stage, text) in cases {
            let error = errors.first { $0.plugin == name }
            XCTAssertEqual(error?.stage, stage, name)
            XCTAssertTrue(error?.message.contains(text) == true, "\(name): \(error?.message ?? "no error")")
        }
        XCTAssertTrue(harness.manager.reports.allSatisfy { $0.status == .failed })
        try await harness.close()
    }
}

/// Inputs the fuzzers found, kept as regression tests (scripts/fuzz.sh).
final class FuzzRegressionTests: XCTestCase {
    /// fuzz-manifest crash-285d07ab: an unknown key with a newline made a
    /// "one-line" problem span lines (and could forge log lines).
    func testManifest_keyWithANewline_isReportedOnOneLine() throws {
        let json = try JSON.parse(#"{"manifestVersion":1,"plugins":[{"name":"a","library":"/x","abi":1,"hooks":["room"],"ab\nFAKE: line":true}]}"#)
        XCTAssertThrowsError(try PluginManifest(json: json, path: "/tmp/plugins.json")) { error in
            let lines = (error as? ManifestErrors)?.errors.map(\.description) ?? []
            XCTAssertTrue(lines.contains(#"plugins.json: plugins[0].ab\nFAKE: line: unknown field"#), "\(lines)")
            XCTAssertTrue(lines.allSatisfy { !$0.contains("\n") })
        }
    }
}
