import Foundation
import RoomKit
import RoomKitPluginHost
import RoomKitProtocol
import RoomKitTokens
import RoomKitTestSupport
import XCTest

/// Lines of a recorder plugin's file.
func recorded(_ path: String) -> [String] {
    (fileText(path) ?? "").split(separator: "\n").map(String.init)
}

/// Counts the app's own common callbacks.
final class CountingCommonCallbacks: CommonCallbacks, @unchecked Sendable {
    // @unchecked Sendable: guarded by lock.
    private let lock = NSLock()
    private var errors: [String] = []
    private var urls = 0
    func throwError(domain: String, code: ErrorCode, message: String) { lock.withLock { errors.append("\(domain) \(code.rawValue)") } }
    func urlInterrupter(_ url: String) async -> String {
        lock.withLock { urls += 1 }
        return url + "+app"
    }
    var thrown: [String] { lock.withLock { errors } }
    var rewritten: Int { lock.withLock { urls } }
}

/// Issue 20, plugins 1–6: each event reaches each plugin once; the URL chain
/// follows the rooms globs; failed actions reach the plugin; enabled:false;
/// reload cleans up after itself.
final class PluginRouteTests: XCTestCase {
    func testThrowError_reachesEachPluginAndTheAppsCommonCallbacksExactlyOnce() async throws {
        let harness = try PluginHarness()
        let errorFile = harness.directory + "/errors.ndjson"
        let recorderFile = harness.directory + "/recorder.txt"
        let recorder = try compilePlugin("recorder", source: TestPlugins.recorder(), in: harness.directory)
        let failingProvider = ClosureTokenProvider { _, _ in throw CancellationError() }
        let app = CountingCommonCallbacks()
        let host = try harness.host(tokenProvider: failingProvider)
        host.commonCallbacks = app  // set before the manager exists: it must not be replaced
        let statuses = harness.statuses
        let manager = PluginManager(host: host) { name, status, _ in statuses.add("\(name) \(status.rawValue)") }
        let path = try harness.writeManifest(manifest([
            pluginEntry("error-log", library: try shippedPlugin("error-log"), hooks: ["throwError"], config: ["file": .string(errorFile)]),
            pluginEntry("recorder", library: recorder, hooks: ["throwError"], config: .string(recorderFile)),
        ]))
        XCTAssertEqual(manager.load(try PluginManifest(path: path)), [])
        let observed = LockedList()
        host.addObserver { if case .throwError(let domain, _, _) = $0 { observed.add(domain) } }

        // The automatic renewal fails (the provider throws): one throwError.
        try await host.loginRoom("lobby", user: LoginUser(id: "bot"), token: harness.token("bot", ttl: 2))
        await eventually(5, "the app hears the error") { app.thrown.count >= 1 }
        await eventually(2, "the plugins hear it") {
            recorded(recorderFile).contains { $0.hasPrefix("error ") } && (fileText(errorFile) ?? "").contains("\"domain\":\"token\"")
        }
        try await Task.sleep(for: .milliseconds(300))  // a duplicate would arrive by now
        XCTAssertEqual(observed.all, ["token"], "the engine raised one error")
        XCTAssertEqual(app.thrown, ["token \(ErrorCode.tokenInvalid.rawValue)"], "the app's commonCallbacks hear it once")
        XCTAssertEqual(recorded(recorderFile).filter { $0.hasPrefix("error ") }, ["error token \(ErrorCode.tokenInvalid.rawValue)"])
        XCTAssertEqual(recorded(errorFile).count, 1, "error-log writes one line per error")
        manager.unloadAll()
        try await harness.close()
    }

    func testURLChain_isThePluginsWhoseRoomsGlobsMatchTheRoom_inOrder_thenTheApp() async throws {
        let harness = try PluginHarness()
        let a = try compilePlugin("marka", source: TestPlugins.marking("+a"), in: harness.directory)
        let b = try compilePlugin("markb", source: TestPlugins.marking("+b"), in: harness.directory)
        let c = try compilePlugin("markc", source: TestPlugins.marking("+c"), in: harness.directory)
        let (bot, errors) = try harness.botHost(manifest: manifest([
            pluginEntry("c-every", library: c, hooks: ["urlInterrupter"], order: 30),
            pluginEntry("a-lobby", library: a, hooks: ["urlInterrupter"], order: 10, rooms: ["lobby*"]),
            pluginEntry("b-other", library: b, hooks: ["urlInterrupter"], order: 20, rooms: ["other"]),
        ]))
        XCTAssertEqual(errors, [])
        let third = try await bot.loginRoom("third", user: LoginUser(id: "bot"), token: harness.token("bot"))
        let lobby = try await bot.loginRoom("lobby-1", user: LoginUser(id: "bot"), token: harness.token("bot"))
        var inserted = 0
        func insert(in room: Room) async throws -> String {
            inserted += 1
            return try await room.insertImage(Image(uuid: "i\(inserted)", url: "http://x/y.png", x: 0, y: 0, width: 1, height: 1)).url
        }

        let inThird = try await insert(in: third)
        XCTAssertEqual(inThird, "http://x/y.png+c", "neither a (lobby*) nor b (other) matches 'third'")
        let inLobby = try await insert(in: lobby)
        XCTAssertEqual(inLobby, "http://x/y.png+a+c", "only a matches 'lobby-1', before c (order 10 < 30)")
        var calls = Dictionary(uniqueKeysWithValues: harness.manager.reports.map { ($0.name, $0.calls) })
        XCTAssertEqual(calls, ["a-lobby": 1, "b-other": 0, "c-every": 2])

        // The app's own interrupter joins the chain last; it replaces no plugin.
        let app = CountingCommonCallbacks()
        bot.commonCallbacks = app
        let withApp = try await insert(in: lobby)
        XCTAssertEqual(withApp, "http://x/y.png+a+c+app")
        XCTAssertEqual(app.rewritten, 1)
        calls = Dictionary(uniqueKeysWithValues: harness.manager.reports.map { ($0.name, $0.calls) })
        XCTAssertEqual(calls, ["a-lobby": 2, "b-other": 0, "c-every": 3])
        try await harness.close()
    }

    func testFailedPluginAction_reachesThePluginAsThrowError_onceWithTheRequestsCode() async throws {
        let harness = try PluginHarness()
        let recorderFile = harness.directory + "/recorder.txt"
        let recorder = try compilePlugin("recorder", source: TestPlugins.recorder(), in: harness.directory)
        // `magix` only: action failures reach the plugin that acted without the `throwError` hook.
        let (bot, errors) = try harness.botHost(manifest: manifest([
            pluginEntry("echo", library: recorder, hooks: ["magix"], config: .string(recorderFile)),
        ]))
        XCTAssertEqual(errors, [])
        let now = Int64(Date().timeIntervalSince1970)
        let reader = TokenSigner(secret: harness.secret).sign(TokenClaims(sub: "bot", room: "*", role: .reader, exp: now + 3600, iat: now))
        let botRoom = try await bot.loginRoom("lobby", user: LoginUser(id: "bot"), token: reader)
        XCTAssertFalse(botRoom.writable)
        let member = try harness.host()
        let room = try await member.loginRoom("lobby", user: LoginUser(id: "human"), token: harness.token("human"))
        try await room.dispatchMagixEvent("command", payload: "!ping")
        await eventually(5, "the failure reaches the plugin") { recorded(recorderFile).contains { $0.hasPrefix("error ") } }
        try await Task.sleep(for: .milliseconds(300))
        XCTAssertEqual(recorded(recorderFile).filter { $0.hasPrefix("error ") },
                       ["error dispatch_magix \(ErrorCode.notPermitted.rawValue)"])
        try await harness.close()
    }

    func testEnabledFalse_isHonouredOnLoadAndOnReload() async throws {
        let harness = try PluginHarness()
        let offFile = harness.directory + "/off.txt", onFile = harness.directory + "/on.txt"
        let off = try compilePlugin("off", source: TestPlugins.recorder(marker: "+off"), in: harness.directory)
        let on = try compilePlugin("on", source: TestPlugins.recorder(marker: "+on"), in: harness.directory)
        func entries(offEnabled: Bool, onEnabled: Bool) -> JSON {
            var offEntry = pluginEntry("off", library: off, hooks: ["urlInterrupter"], order: 1, config: .string(offFile))
            var onEntry = pluginEntry("on", library: on, hooks: ["urlInterrupter"], order: 2, config: .string(onFile))
            if case .object(var fields) = offEntry { fields["enabled"] = .bool(offEnabled); offEntry = .object(fields) }
            if case .object(var fields) = onEntry { fields["enabled"] = .bool(onEnabled); onEntry = .object(fields) }
            return manifest([offEntry, onEntry])
        }
        let (bot, errors) = try harness.botHost(manifest: entries(offEnabled: false, onEnabled: true))
        XCTAssertEqual(errors, [])
        let room = try await bot.loginRoom("lobby", user: LoginUser(id: "bot"), token: harness.token("bot"))
        var inserted = 0
        func insert() async throws -> String {
            inserted += 1
            return try await room.insertImage(Image(uuid: "i\(inserted)", url: "u", x: 0, y: 0, width: 1, height: 1)).url
        }
        var url = try await insert()
        XCTAssertEqual(url, "u+on", "a disabled plugin is not in the chain")
        XCTAssertEqual(recorded(offFile), [], "a disabled plugin is never started")
        XCTAssertEqual(harness.manager.reports.first { $0.name == "off" }?.status, .unloaded)

        // Disable "on" and reload it: it unloads and leaves the chain.
        let path = try harness.writeManifest(entries(offEnabled: false, onEnabled: false))
        try harness.manager.reload(try PluginManifest(path: path).plugins.first { $0.name == "on" }!)
        url = try await insert()
        XCTAssertEqual(url, "u")
        XCTAssertEqual(harness.manager.reports.first { $0.name == "on" }?.status, .unloaded)
        await eventually(2) { recorded(onFile) == ["load", "unload"] }
        XCTAssertEqual(recorded(onFile), ["load", "unload"])
        XCTAssertEqual(harness.statuses.all.filter { $0.hasPrefix("on ") }, ["on loaded", "on unloaded: disabled in the manifest"])

        // Reloading "off" with enabled:false again starts nothing; enabling it starts it.
        try harness.manager.reload(try PluginManifest(path: path).plugins.first { $0.name == "off" }!)
        XCTAssertEqual(recorded(offFile), [])
        let enabled = try harness.writeManifest(entries(offEnabled: true, onEnabled: false))
        try harness.manager.reload(try PluginManifest(path: enabled).plugins.first { $0.name == "off" }!)
        url = try await insert()
        XCTAssertEqual(url, "u+off")
        XCTAssertEqual(recorded(offFile), ["load"])
        try await harness.close()
    }

    func testReload_deletesItsSideBySideCopy_andReportsTheOldInstanceUnloadedOnce() async throws {
        let harness = try PluginHarness()
        // A unique file name: the copies of this test's library are the files ending with it.
        let name = "libmark-\(UUID().uuidString).so"
        let library = harness.directory + "/" + name
        let recorderFile = harness.directory + "/recorder.txt"
        try FileManager.default.copyItem(atPath: try compilePlugin("v1", source: TestPlugins.recorder(marker: "+v1"), in: harness.directory),
                                         toPath: library)
        let (bot, errors) = try harness.botHost(manifest: manifest([
            pluginEntry("mark", library: library, hooks: ["urlInterrupter"], config: .string(recorderFile)),
        ]))
        XCTAssertEqual(errors, [])
        let room = try await bot.loginRoom("lobby", user: LoginUser(id: "bot"), token: harness.token("bot"))
        let copies = FileManager.default.temporaryDirectory.appendingPathComponent("roomkit-plugins").path
        func copiesLeft() -> Int {
            ((try? FileManager.default.contentsOfDirectory(atPath: copies)) ?? []).filter { $0.hasSuffix(name) }.count
        }
        let spec = try PluginManifest(path: harness.directory + "/plugins.json").plugins[0]
        for version in ["v2", "v3"] {
            try FileManager.default.removeItem(atPath: library)
            try FileManager.default.copyItem(atPath: try compilePlugin(version, source: TestPlugins.recorder(marker: "+\(version)"),
                                                                       in: harness.directory), toPath: library)
            try harness.manager.reload(spec)
            XCTAssertEqual(copiesLeft(), 0, "the copy is deleted once mapped")
            let url = try await room.insertImage(Image(uuid: version, url: "u", x: 0, y: 0, width: 1, height: 1)).url
            XCTAssertEqual(url, "u+\(version)", "the mapped copy still runs after its file is gone")
        }
        let lines = harness.statuses.all
        XCTAssertEqual(lines.filter { $0 == "mark unloaded: replaced by a reload" }.count, 2, "\(lines)")
        XCTAssertEqual(lines.filter { $0 == "mark loaded" }.count, 3, "\(lines)")
        XCTAssertEqual(lines, ["mark loaded", "mark unloaded: replaced by a reload", "mark loaded",
                               "mark unloaded: replaced by a reload", "mark loaded"])
        try await harness.close()
        XCTAssertEqual(harness.statuses.all.filter { $0.hasPrefix("mark unloaded") }.count, 3, "and the last one at unloadAll")
    }
}

/// Strings several threads may add.
final class LockedList: @unchecked Sendable {
    // @unchecked Sendable: guarded by lock.
    private let lock = NSLock()
    private var items: [String] = []
    func add(_ item: String) { lock.withLock { items.append(item) } }
    var all: [String] { lock.withLock { items } }
}
