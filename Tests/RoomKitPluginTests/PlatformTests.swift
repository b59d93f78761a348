import Foundation
import RoomKit
import RoomKitPluginHost
import RoomKitProtocol
import RoomKitTestSupport
import XCTest

/// ABI 1.1 end to end: a real roomd, a bot host with a PluginManager, and a
/// member that talks to the probe plugin (Platform.probe) with magix events.
final class PlatformTests: XCTestCase {
    /// A bot host in `room` with the given plugins, a store at `storePath`,
    /// and a member in the same room.
    private struct Setup {
        let manager: PluginManager
        let bot: RoomHost
        let member: Room
        let inbox: MagixInbox
        let listeners: [MagixListener]
    }

    private func setup(_ harness: PluginHarness, plugins: [JSON], storePath: String, room: String = "lobby-1",
                       events: [String] = ["count", "config", "configChanged", "kv", "members"]) async throws -> Setup {
        let token = harness.token("bot")
        let bot = try harness.host(tokenProvider: ClosureTokenProvider { _, _ in token })
        let manager = PluginManager(host: bot)
        manager.useStore(try SQLitePluginStore(path: storePath))
        let errors = manager.load(try PluginManifest(path: try harness.writeManifest(manifest(plugins), name: "p-\(UUID().uuidString).json")))
        XCTAssertEqual(errors, [])
        _ = try await bot.loginRoom(room, user: LoginUser(id: "bot"), token: harness.token("bot"))
        let member = try await harness.host().loginRoom(room, user: LoginUser(id: "human"), token: harness.token("human"))
        let inbox = MagixInbox()
        let listeners = events.map { member.addMagixEventListener($0) { inbox.add($0) } }
        return Setup(manager: manager, bot: bot, member: member, inbox: inbox, listeners: listeners)
    }

    /// Sends `event` and waits for the next reply named `reply`.
    private func ask(_ s: Setup, _ event: String, _ payload: JSON = .null, reply: String) async throws -> JSON {
        let before = s.inbox.all.filter { $0.event == reply }.count
        try await s.member.dispatchMagixEvent(event, payload: payload)
        await eventually(5, "reply \(reply) to \(event)") { s.inbox.all.filter { $0.event == reply }.count > before }
        return s.inbox.all.filter { $0.event == reply }.last?.payload ?? .null
    }

    func testKeyValueStorage_boundedPerPlugin_persistsAcrossARestart() async throws {
        let harness = try PluginHarness()
        let probe = try Platform.plugin("probe", source: Platform.probe, in: harness.directory)
        let store = harness.directory + "/bot.plugins.sqlite"
        var entry = pluginEntry("probe", library: probe, hooks: ["magix"]).objectValue!
        entry["storageLimitBytes"] = 64
        let s = try await setup(harness, plugins: [.object(entry)], storePath: store)

        func kv(_ fields: [String: JSON]) async throws -> JSON { try await ask(s, "kv", .object(fields), reply: "kv") }
        same(try await kv(["op": "set", "key": "a/1", "value": "one"])["rc"], 0)
        same(try await kv(["op": "set", "key": "a/2", "value": "two \"quoted\""])["rc"], 0)
        same(try await kv(["op": "set", "key": "b", "value": "bee"])["rc"], 0)
        same(try await kv(["op": "get", "key": "a/2"])["value"], "two \"quoted\"")
        same(try await kv(["op": "get", "key": "nope"])["value"], .null)
        same(try await kv(["op": "scan", "prefix": "a/"])["pairs"], ["a/1": "one", "a/2": "two \"quoted\""])
        // Over the 64-byte quota: refused with ROOMKIT_KV_FULL (-2), nothing written.
        same(try await kv(["op": "set", "key": "big", "value": .string(String(repeating: "x", count: 60))])["rc"], -2)
        same(try await kv(["op": "get", "key": "big"])["value"], .null)
        // Replacing a value with one of the same size fits.
        same(try await kv(["op": "set", "key": "b", "value": "BEE"])["rc"], 0)
        same(try await kv(["op": "delete", "key": "a/1"])["rc"], 1)
        same(try await kv(["op": "delete", "key": "a/1"])["rc"], 0)
        s.listeners.forEach { $0.cancel() }
        s.manager.unloadAll()

        // A new manager on the same file (a restart) sees what was kept.
        let again = try await setup(harness, plugins: [.object(entry)], storePath: store, room: "lobby-2")
        same(try await ask(again, "kv", ["op": "scan", "prefix": ""], reply: "kv")["pairs"], ["a/2": "two \"quoted\"", "b": "BEE"])
        again.listeners.forEach { $0.cancel() }
        again.manager.unloadAll()
        try await harness.close()
    }

    func testLayeredConfig_pushedLive_persisted_andValidated() async throws {
        let harness = try PluginHarness()
        let probe = try Platform.plugin("probe", source: Platform.probe, in: harness.directory)
        let store = harness.directory + "/bot.plugins.sqlite"
        var entry = pluginEntry("probe", library: probe, hooks: ["magix"], config: ["greeting": "hi", "n": 1]).objectValue!
        entry["roomConfig"] = ["lobby-*": ["greeting": "hey"], "*": ["greeting": "base-glob", "wide": true]]
        let s = try await setup(harness, plugins: [.object(entry)], storePath: store)

        // Globs apply least specific first: lobby-* overrides *; both over config.
        same(try await ask(s, "config?", reply: "config")["config"], ["greeting": "hey", "n": 1, "wide": true])

        let before = s.inbox.all.filter { $0.event == "configChanged" }.count
        try s.manager.updateConfig("probe", body: ["config": ["greeting": "yo", "n": 2]])
        await eventually(5, "configChanged pushed") { s.inbox.all.filter { $0.event == "configChanged" }.count > before }
        let pushed = s.inbox.all.filter { $0.event == "configChanged" }
        XCTAssertEqual(pushed.count, before + 1, "one push per room the bot is in")
        XCTAssertEqual(pushed.last?.payload["config"], ["greeting": "hey", "n": 2, "wide": true])
        same(try await ask(s, "config?", reply: "config")["config"], ["greeting": "hey", "n": 2, "wide": true])
        XCTAssertEqual(s.bot.room("lobby-1")?.phase, .connected, "no reconnect")

        // Invalid: each problem names its field; nothing changes.
        XCTAssertThrowsError(try s.manager.updateConfig("probe", body: ["config": 1, "roomConfig": ["x": 3], "extra": true])) { error in
            let text = "\(error)"
            XCTAssertTrue(text.contains("extra: unknown field") && text.contains("roomConfig[\"x\"]: must be an object"), text)
        }
        XCTAssertThrowsError(try s.manager.updateConfig("nobody", body: ["config": 1]))
        XCTAssertEqual(s.manager.config(of: "probe")?.config, ["greeting": "yo", "n": 2])
        s.listeners.forEach { $0.cancel() }
        s.manager.unloadAll()

        // A restart keeps the live change (it overrides the manifest's config).
        let again = try await setup(harness, plugins: [.object(entry)], storePath: store, room: "other")
        same(try await ask(again, "config?", reply: "config")["config"], ["greeting": "base-glob", "n": 2, "wide": true])
        again.listeners.forEach { $0.cancel() }
        again.manager.unloadAll()
        try await harness.close()
    }

    /// login_room / switch_room / logout_room act as the bot's user, only in
    /// rooms the plugin's `rooms` match, and their outcome arrives as room
    /// events; publish/unpublish_stream reach the other members.
    func testHostFunctions_roomLifecycleAndStreams() async throws {
        let harness = try PluginHarness()
        let probe = try Platform.plugin("probe", source: Platform.probe, in: harness.directory)
        let s = try await setup(harness, plugins: [pluginEntry("probe", library: probe, hooks: ["magix"], rooms: ["lobby-*"])],
                                storePath: harness.directory + "/s.sqlite", events: ["room"])
        let seen = StatusLines()
        let token = s.bot.addObserver { event in
            if case .roomStateChanged(let room, let reason, _, _) = event { seen.add("\(room) \(reason.rawValue)") }
        }
        func act(_ fields: [String: JSON]) async throws -> JSON? { try await ask(s, "room", .object(fields), reply: "room")["rc"] }
        // No login handler yet: the manager has no identity to log in with.
        same(try await act(["op": "login", "room": "lobby-2"]), -1)
        let bot = s.bot
        let botToken = harness.token("bot")
        s.manager.useRoomLogin { room in _ = try await bot.loginRoom(room, user: LoginUser(id: "bot"), token: botToken) }
        same(try await act(["op": "login", "room": "lobby-2"]), 0)
        await eventually(5, "lobby-2 LOGINED") { seen.all.contains("lobby-2 LOGINED") }
        same(try await act(["op": "login", "room": "other"]), -1)  // outside the plugin's rooms
        same(try await act(["op": "switch", "room": "lobby-2", "to": "other"]), -1)
        same(try await act(["op": "switch", "room": "lobby-2", "to": "lobby-3"]), 0)
        await eventually(5, "switched") { seen.all.contains("lobby-2 LOGOUT") && seen.all.contains("lobby-3 LOGINED") }
        same(try await act(["op": "logout", "room": "lobby-3"]), 0)
        await eventually(5, "lobby-3 LOGOUT") { seen.all.contains("lobby-3 LOGOUT") }

        same(try await act(["op": "publish", "stream": "s1"]), 0)
        await eventually(5, "stream published") { s.member.streams.contains { $0.id == "s1" } }
        same(try await act(["op": "unpublish", "stream": "s1"]), 0)
        await eventually(5, "stream withdrawn") { !s.member.streams.contains { $0.id == "s1" } }
        XCTAssertEqual(seen.all.filter { $0 == "lobby-2 LOGINED" }.count, 1)
        token.cancel()
        s.listeners.forEach { $0.cancel() }
        s.manager.unloadAll()
        try await harness.close()
    }

    func testHostFunctions_membersExtraInfoMemberState() async throws {
        let harness = try PluginHarness()
        let probe = try Platform.plugin("probe", source: Platform.probe, in: harness.directory)
        let s = try await setup(harness, plugins: [pluginEntry("probe", library: probe, hooks: ["magix"])],
                                storePath: harness.directory + "/s.sqlite")
        let members = try await ask(s, "members?", reply: "members")["members"]?.arrayValue ?? []
        XCTAssertEqual(Set(members.compactMap { $0["userId"]?.stringValue }), ["bot", "human"])
        try await s.member.dispatchMagixEvent("extra", payload: .null)
        await eventually(5, "extra info set by the plugin") { s.member.extraInfo["bot"] == "hi" }
        try await s.member.dispatchMagixEvent("member", payload: .null)
        await eventually(5, "member state set by the plugin") {
            s.member.roomMembers.first { $0.userId == "bot" }?.memberState["mood"] == "busy"
        }
        s.listeners.forEach { $0.cancel() }
        s.manager.unloadAll()
        try await harness.close()
    }
}

/// Lines collected from any thread.
final class StatusLines: @unchecked Sendable {
    // @unchecked Sendable: guarded by lock.
    private let lock = NSLock()
    private var lines: [String] = []
    func add(_ line: String) { lock.withLock { lines.append(line) } }
    var all: [String] { lock.withLock { lines } }
}

/// The Swift SDK: typed handlers, injected host/config/log, hand-off, storage.
final class SwiftSDKTests: XCTestCase {
    func testTypedHandlers_injectedHostAndConfig_liveConfig_handOff() async throws {
        let harness = try PluginHarness()
        let library = try shippedPlugin("sdk-probe")
        let entry = pluginEntry("sdk", library: library, hooks: ["room"], config: ["greeting": "hey"])
        let bot = try harness.host()
        let manager = PluginManager(host: bot)
        manager.useStore(MemoryPluginStore())
        XCTAssertEqual(manager.load(try PluginManifest(path: try harness.writeManifest(manifest([entry]), name: "sdk.json"))), [])
        _ = try await bot.loginRoom("lobby", user: LoginUser(id: "bot"), token: harness.token("bot"))
        let room = try await harness.host().loginRoom("lobby", user: LoginUser(id: "human"), token: harness.token("human"))
        let inbox = MagixInbox()
        let listeners = ["hi", "recalled"].map { room.addMagixEventListener($0) { inbox.add($0) } }

        try await room.dispatchMagixEvent("hello", payload: .null)
        await eventually(5, "hi") { inbox.all.count == 1 }
        XCTAssertEqual(inbox.all[0].payload["greeting"], "hey")
        XCTAssertEqual(inbox.all[0].payload["joined"], ["human"], "userJoined heard the member")
        XCTAssertEqual(inbox.all[0].payload["count"], 1)

        try manager.updateConfig("sdk", body: ["config": ["greeting": "yo"]])
        let spec = try PluginManifest(path: try harness.writeManifest(manifest([entry]), name: "sdk2.json")).plugins[0]
        try manager.reload(spec)  // count 1 is handed over
        try await room.dispatchMagixEvent("remember", payload: ["text": "kept"])
        try await room.dispatchMagixEvent("recall", payload: .null)
        try await room.dispatchMagixEvent("hello", payload: .null)
        await eventually(5, "recalled and hi") { inbox.all.count == 3 }
        XCTAssertEqual(inbox.all[1].payload["text"], "kept")
        XCTAssertEqual(inbox.all[2].payload["greeting"], "yo", "the live config, kept across the reload")
        XCTAssertEqual(inbox.all[2].payload["count"], 4, "1 before the reload, handed over, then remember, recall, hello")
        listeners.forEach { $0.cancel() }
        manager.unloadAll()
        try await harness.close()
    }

    func testShippedURLRewrite_takesALiveConfigChange() async throws {
        let harness = try PluginHarness()
        let (_, errors) = try harness.botHost(manifest: manifest([
            pluginEntry("url-rewrite", library: try shippedPlugin("url-rewrite"), hooks: ["urlInterrupter"],
                        config: ["from": "http://", "to": "https://a/"]),
        ]))
        XCTAssertEqual(errors, [])
        let before = await harness.manager.urlInterrupter("http://x/1.png")
        XCTAssertEqual(before, "https://a/x/1.png")
        try harness.manager.updateConfig("url-rewrite", body: ["config": ["from": "http://", "to": "https://b/"]])
        // on_config_changed is posted in order before the next call.
        let after = await harness.manager.urlInterrupter("http://x/1.png")
        XCTAssertEqual(after, "https://b/x/1.png")
        // An invalid live config is refused by the plugin and the old rule kept.
        try harness.manager.updateConfig("url-rewrite", body: ["config": ["from": ""]])
        let kept = await harness.manager.urlInterrupter("http://x/1.png")
        XCTAssertEqual(kept, "https://b/x/1.png")
        try await harness.close()
    }
}
