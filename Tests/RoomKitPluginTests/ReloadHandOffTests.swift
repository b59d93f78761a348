import Foundation
import RoomKit
import RoomKitPluginHost
import RoomKitProtocol
import RoomKitTestSupport
import XCTest

/// Reload with state hand-off: the counting probe keeps its count across a
/// reload made while events stream in, and a refused import rolls back.
final class ReloadHandOffTests: XCTestCase {
    /// In a plugin process (the default isolation).
    func testCountSurvivesAReloadUnderLoad_eachEventCountedOnce_andARefusedImportRollsBack() async throws {
        try await countAcrossReloads(isolation: nil)
    }

    /// In the bot's own process.
    func testCountSurvivesAReloadUnderLoad_inline() async throws {
        try await countAcrossReloads(isolation: "inline")
    }

    private func countAcrossReloads(isolation: String?) async throws {
        let harness = try PluginHarness()
        let probe = try Platform.plugin("probe", source: Platform.probe, in: harness.directory)
        let refusing = try Platform.plugin("probe-refusing", source: Platform.probe, in: harness.directory, defines: ["REFUSE_IMPORT"])
        let entry = pluginEntry("probe", library: probe, hooks: ["magix"], timeoutMs: 500, isolation: isolation)
        let (bot, errors) = try harness.botHost(manifest: manifest([entry]))
        XCTAssertEqual(errors, [])
        _ = try await bot.loginRoom("lobby", user: LoginUser(id: "bot"), token: harness.token("bot"))
        let room = try await harness.host().loginRoom("lobby", user: LoginUser(id: "human"), token: harness.token("human"))
        let inbox = MagixInbox()
        let listener = room.addMagixEventListener("count") { inbox.add($0) }
        let manager = harness.manager!
        let spec = try PluginManifest(path: try harness.writeManifest(manifest([entry]), name: "reload.json")).plugins[0]

        // 300 ticks; a reload starts once the first 100 are sent and runs
        // while the rest stream in.
        let reloaded = LockedFlag()
        let reloader = Thread {
            do { try manager.reload(spec); reloaded.set() } catch { XCTFail("reload failed: \(error)") }
        }
        for tick in 0..<300 {
            if tick == 100 { reloader.start() }
            try await room.dispatchMagixEvent("tick", payload: .int(Int64(tick)))
        }
        await eventually(10, "reload finished") { reloaded.isSet }
        try await room.dispatchMagixEvent("count?", payload: .null)
        await eventually(5, "count") { inbox.all.count == 1 }
        XCTAssertEqual(inbox.all.last?.payload["n"], 300, "every tick counted exactly once across the two versions")
        XCTAssertEqual(harness.statuses.all.filter { $0.hasPrefix("probe unloaded") }.count, 1, "\(harness.statuses.all)")
        XCTAssertEqual(harness.statuses.all.filter { $0 == "probe loaded" }.count, 2, "\(harness.statuses.all)")

        // A new version whose import_state refuses: rolled back, the old one
        // keeps running with its count, and the ticks sent meanwhile count.
        let refusingSpec = { var copy = spec; copy.library = refusing; return copy }()
        let rollback = Thread {
            do { try manager.reload(refusingSpec); XCTFail("a refused import must fail the reload") } catch {
                XCTAssertTrue("\(error)".contains("import_state refused the state (returned 7)"), "\(error)")
                reloaded.set(false)
            }
        }
        for tick in 0..<50 {
            if tick == 10 { rollback.start() }
            try await room.dispatchMagixEvent("tick", payload: .int(Int64(tick)))
        }
        await eventually(10, "rollback finished") { !reloaded.isSet }
        try await room.dispatchMagixEvent("count?", payload: .null)
        await eventually(5, "count after rollback") { inbox.all.count == 2 }
        XCTAssertEqual(inbox.all.last?.payload["n"], 350)
        XCTAssertEqual(manager.reports.first { $0.name == "probe" }?.status, .loaded)
        XCTAssertEqual(harness.statuses.all.filter { $0.hasPrefix("probe unloaded") }.count, 1, "the old version was not unloaded")
        listener.cancel()
        try await harness.close()
    }
}

/// A thread-safe flag for a reload running on a thread of its own.
final class LockedFlag: @unchecked Sendable {
    // @unchecked Sendable: guarded by lock.
    private let lock = NSLock()
    private var value = false
    func set(_ flag: Bool = true) { lock.withLock { value = flag } }
    var isSet: Bool { lock.withLock { value } }
}
