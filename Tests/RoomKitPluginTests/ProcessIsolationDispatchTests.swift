import Foundation
import RoomKit
import RoomKitPlugins
import RoomKitProtocol
import RoomKitTestSupport
import XCTest

/// The URL chain and host functions through a process-isolated plugin give
/// what the inline host gives.
final class ProcessIsolationDispatchTests: XCTestCase {
    private let urls = ["http://img/cat.png", "https://already/secure.png", "http://", "ftp://x/y", "http://a/b?c=d&e=%20", "ünïcode://x"]

    private func rewrite(_ isolation: String) async throws -> ([String], PluginReport?) {
        let harness = try PluginHarness()
        let (_, errors) = try harness.botHost(manifest: manifest([
            pluginEntry("url-rewrite", library: try shippedPlugin("url-rewrite"), hooks: ["urlInterrupter"],
                        config: ["from": "http://", "to": "https://cdn.example/"], isolation: isolation),
        ]))
        XCTAssertEqual(errors, [])
        var results: [String] = []
        for url in urls { results.append(await harness.manager.urlInterrupter(url)) }
        let report = harness.manager.reports.first
        try await harness.close()
        return (results, report)
    }

    func testURLInterrupter_inProcessMode_returnsWhatInlineReturns_forTheShippedURLRewrite() async throws {
        let (inline, inlineReport) = try await rewrite("inline")
        let (process, processReport) = try await rewrite("process")
        XCTAssertEqual(process, inline)
        XCTAssertEqual(inline.first, "https://cdn.example/img/cat.png", "the plugin did rewrite")
        XCTAssertEqual(inlineReport?.isolation, .inline)
        XCTAssertNil(inlineReport?.process)
        XCTAssertEqual(processReport?.isolation, .process)
        XCTAssertEqual(processReport?.calls, urls.count)
        XCTAssertEqual(processReport?.failures, inlineReport?.failures)
    }

    func testHangingURLInterrupter_inProcessMode_passesTheURLThroughWithinTimeout_countsAFailure_andIsKilled() async throws {
        let harness = try PluginHarness()
        let hanging = try compilePlugin("hanging", source: TestPlugins.hanging, in: harness.directory)
        _ = try harness.botHost(manifest: manifest([
            pluginEntry("hanging", library: hanging, hooks: ["urlInterrupter"], timeoutMs: 50,
                        supervision: ["hangFactor": 4, "restartBackoffMs": 10]),
        ]))
        let started = Date()
        let url = await harness.manager.urlInterrupter("http://keep/me")
        XCTAssertEqual(url, "http://keep/me", "a timed-out step leaves its input unchanged")
        XCTAssertLessThan(Date().timeIntervalSince(started), 1)
        XCTAssertEqual(harness.manager.reports.first?.failures, 1)
        // The hook is still sleeping in the process: timeoutMs × hangFactor later it is killed and restarted.
        await eventually(5, "killed and restarted") { harness.manager.reports.first?.process?.restarts == 1 }
        XCTAssertTrue(harness.statuses.all.contains { $0.hasPrefix("hanging crashed: hung: a call ran longer than 0.2 seconds") },
                      "\(harness.statuses.all)")
        XCTAssertTrue(harness.statuses.all.contains { $0.contains("in urlInterrupter") }, "\(harness.statuses.all)")
        XCTAssertEqual(harness.manager.reports.first?.status, .loaded)
        try await harness.close()
    }
}
