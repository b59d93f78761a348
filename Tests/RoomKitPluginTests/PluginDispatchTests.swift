import Foundation
import RoomKit
import RoomKitPlugins
import RoomKitProtocol
import RoomKitTestSupport
import XCTest

final class PluginDispatchTests: XCTestCase {
    func testShippedPlugins_rewriteURLs_logErrors_andAnswerPing() async throws {
        let harness = try PluginHarness()
        let errorFile = harness.directory + "/errors.ndjson"
        let failingProvider = ClosureTokenProvider { _, _ in throw CancellationError() }
        let (bot, errors) = try harness.botHost(manifest: manifest([
            pluginEntry("url-rewrite", library: try shippedPlugin("url-rewrite"), hooks: ["urlInterrupter"],
                        config: ["from": "http://", "to": "https://cdn.example/"]),
            pluginEntry("error-log", library: try shippedPlugin("error-log"), hooks: ["throwError"], config: ["file": .string(errorFile)]),
            pluginEntry("echo-commands", library: try shippedPlugin("echo-commands"), hooks: ["magix"]),
        ]), tokenProvider: failingProvider)
        XCTAssertEqual(errors, [])
        let member = try harness.host()
        let botRoom = try await bot.loginRoom("lobby", user: LoginUser(id: "bot"), token: harness.token("bot", ttl: 2))
        let room = try await member.loginRoom("lobby", user: LoginUser(id: "human"), token: harness.token("human"))
        let inbox = MagixInbox()
        let listener = room.addMagixEventListener("reply") { inbox.add($0) }

        // url-rewrite: what the other member receives is rewritten.
        _ = try await botRoom.insertImage(Image(uuid: "i1", url: "http://img/cat.png", x: 0, y: 0, width: 1, height: 1))
        await eventually(3, "rewritten URL") { room.sceneState.scenes.first?.images.first?.url == "https://cdn.example/img/cat.png" }

        // echo-commands (C): !ping is answered with a reply event.
        try await room.dispatchMagixEvent("command", payload: "!ping")
        await eventually(3, "pong") { inbox.all.contains { $0.payload["text"] == "pong" } }
        XCTAssertEqual(inbox.all.first?.payload["to"]?.int64Value, room.memberId)

        // error-log: the failed automatic token renewal is a throwError, logged as a JSON line.
        await eventually(4, "error logged") {
            fileText(errorFile)?.contains("\"domain\":\"token\"") == true
        }
        let line = try String(contentsOfFile: errorFile, encoding: .utf8).split(separator: "\n").first.map(String.init) ?? ""
        XCTAssertNotNil(try? JSON.parse(line)["code"]?.int64Value)
        listener.cancel()
        XCTAssertTrue(harness.manager.reports.allSatisfy { $0.status == .loaded && $0.failures == 0 }, "\(harness.manager.reports)")
        try await harness.close()
    }

    func testURLChain_runsInOrderEachGivenThePreviousOutput_andRoomGlobsFilterEvents() async throws {
        let harness = try PluginHarness()
        let dir = harness.directory
        let a = try compilePlugin("marka", source: TestPlugins.marking("+a"), in: dir)
        let b = try compilePlugin("markb", source: TestPlugins.marking("+b"), in: dir)
        let (bot, errors) = try harness.botHost(manifest: manifest([
            pluginEntry("second", library: b, hooks: ["urlInterrupter"], order: 20),
            pluginEntry("first", library: a, hooks: ["urlInterrupter"], order: 10),
            pluginEntry("echo-commands", library: try shippedPlugin("echo-commands"), hooks: ["magix"], rooms: ["lobby-*"]),
        ]))
        XCTAssertEqual(errors, [])
        let url = await harness.manager.urlInterrupter("http://x/y.png")
        XCTAssertEqual(url, "http://x/y.png+a+b")

        let member = try harness.host()
        try await bot.loginRoom("lobby-1", user: LoginUser(id: "bot"), token: harness.token("bot"))
        try await bot.loginRoom("hall", user: LoginUser(id: "bot"), token: harness.token("bot"))
        let matching = try await member.loginRoom("lobby-1", user: LoginUser(id: "h"), token: harness.token("h"))
        let other = try await member.loginRoom("hall", user: LoginUser(id: "h"), token: harness.token("h"))
        let inMatching = MagixInbox(), inOther = MagixInbox()
        let l1 = matching.addMagixEventListener("reply") { inMatching.add($0) }
        let l2 = other.addMagixEventListener("reply") { inOther.add($0) }
        try await other.dispatchMagixEvent("command", payload: "!ping")
        try await matching.dispatchMagixEvent("command", payload: "!ping")
        await eventually(3) { inMatching.all.count == 1 }
        try await Task.sleep(for: .milliseconds(200))
        XCTAssertEqual(inOther.all.count, 0, "rooms glob lobby-* must not hear 'hall'")
        l1.cancel(); l2.cancel()
        try await harness.close()
    }

    func testHangingPlugin_isTimedOutAndQuarantined_whileRoomsKeepServing() async throws {
        let harness = try PluginHarness()
        let hanging = try compilePlugin("hanging", source: TestPlugins.hanging, in: harness.directory)
        let (bot, errors) = try harness.botHost(manifest: manifest([
            // Inline: this is the in-process watchdog (a process would be killed and restarted instead).
            pluginEntry("hanging", library: hanging, hooks: ["urlInterrupter", "room"], timeoutMs: 50, isolation: "inline"),
        ]))
        XCTAssertEqual(errors, [])
        let member = try harness.host()
        let botRoom = try await bot.loginRoom("lobby", user: LoginUser(id: "bot"), token: harness.token("bot"))
        let room = try await member.loginRoom("lobby", user: LoginUser(id: "h"), token: harness.token("h"))
        let started = Date()
        let (_, url) = try await botRoom.insertImage(Image(uuid: "i", url: "http://keep/me", x: 0, y: 0, width: 1, height: 1))
        XCTAssertEqual(url, "http://keep/me", "a timed-out step leaves its input unchanged")
        XCTAssertLessThan(Date().timeIntervalSince(started), 2, "the room did not wait for the plugin")
        await eventually(5, "quarantined") { harness.manager.reports.first?.status == .quarantined }
        // The status line is written just after the status changes (outside its lock): wait for it too.
        await eventually(2, "quarantine reported") {
            harness.statuses.all.contains { $0.hasPrefix("hanging quarantined: 3 failures in a row") }
        }
        // The rooms keep serving and lose nothing.
        let inbox = MagixInbox()
        let listener = botRoom.addMagixEventListener("chat") { inbox.add($0) }
        for i in 0..<20 { try await room.dispatchMagixEvent("chat", payload: .int(Int64(i))) }
        await eventually(3) { inbox.all.count == 20 }
        XCTAssertEqual(inbox.all.map { $0.payload.int64Value ?? -1 }, (0..<20).map(Int64.init))
        XCTAssertEqual(botRoom.phase, .connected)
        listener.cancel()
        try await harness.close()
    }

    func testFailingInterrupter_NULLOrInvalidUTF8_leavesTheURLUnchangedAndCountsFailures() async throws {
        let harness = try PluginHarness()
        let failing = try compilePlugin("failing", source: TestPlugins.failing, in: harness.directory)
        _ = try harness.botHost(manifest: manifest([pluginEntry("failing", library: failing, hooks: ["urlInterrupter"])]))
        let first = await harness.manager.urlInterrupter("http://a/1")
        let second = await harness.manager.urlInterrupter("http://a/2")
        XCTAssertEqual([first, second], ["http://a/1", "http://a/2"])
        XCTAssertEqual(harness.manager.reports.first?.failures, 2)
        XCTAssertEqual(harness.manager.reports.first?.calls, 2, "on_load is not a hook call")
        try await harness.close()
    }

    func testReload_switchesToTheNewLibrary_andEveryRoomStaysLogined() async throws {
        let harness = try PluginHarness()
        let library = harness.directory + "/libmark.so"
        try FileManager.default.copyItem(atPath: try compilePlugin("v1", source: TestPlugins.marking("+v1"), in: harness.directory),
                                         toPath: library)
        let events = RecorderBox()
        let (bot, _) = try harness.botHost(manifest: manifest([pluginEntry("mark", library: library, hooks: ["urlInterrupter"])]))
        bot.addObserver { events.add($0) }
        for room in ["r1", "r2", "r3"] {
            try await bot.loginRoom(room, user: LoginUser(id: "bot"), token: harness.token("bot"))
        }
        let before = await harness.manager.urlInterrupter("u")
        XCTAssertEqual(before, "u+v1")
        // Replace the file on disk, then reload it side by side.
        try FileManager.default.removeItem(atPath: library)
        try FileManager.default.copyItem(atPath: try compilePlugin("v2", source: TestPlugins.marking("+v2"), in: harness.directory),
                                         toPath: library)
        let spec = try PluginManifest(path: harness.directory + "/plugins.json").plugins[0]
        try harness.manager.reload(spec)
        let after = await harness.manager.urlInterrupter("u")
        XCTAssertEqual(after, "u+v2")
        for room in ["r1", "r2", "r3"] { XCTAssertEqual(bot.room(room)?.phase, .connected) }
        XCTAssertFalse(events.all.contains { if case .roomStateChanged(_, .reconnecting, _, _) = $0 { return true }; return false })
        try await harness.close()
    }
}

final class RecorderBox: @unchecked Sendable {
    // @unchecked Sendable: guarded by lock.
    private let lock = NSLock()
    private var events: [RoomEvent] = []
    func add(_ event: RoomEvent) { lock.withLock { events.append(event) } }
    var all: [RoomEvent] { lock.withLock { events } }
}
