import Foundation
import RoomKit
import RoomKitBot
import RoomKitLoop
import RoomKitProtocol
import RoomKitServer
import RoomKitTestSupport
import XCTest

/// roombot killed with -9 and started again: its store resumes every session
/// (PROTOCOL.md §4, §6). An observer (`Watcher`) sits in the room throughout.
/// roomd runs as a child process with shrunk timeouts, except where a
/// server setting has no flag (the recovery buffer's size).
final class BotRestartTests: XCTestCase {
    private struct Setup {
        /// The scratch directory, configs and tokens (its in-process roomd
        /// serves only when `roomd` is nil).
        let harness: BotHarness
        let roomd: RoomdProcess?
        let watcher: Watcher
        let room: Room
        let config: String
        let probe: String
        var eventsPath: String { harness.directory + "/events.ndjson" }
        var storePath: String { harness.directory + "/bot.state.sqlite" }
    }

    /// `roomd`: the flags of a roomd child process (`--heartbeat-timeout`,
    /// `--session-retention`, in seconds); nil: the in-process server with `configure`.
    private func setUp(roomd flags: [String]?, configure: (inout ServerConfiguration) -> Void = { _ in }) async throws -> Setup {
        let harness = try BotHarness(heartbeatTimeout: .seconds(8)) {
            $0.heartbeatInterval = .milliseconds(250)
            configure(&$0)
        }
        var roomd: RoomdProcess?
        if let flags {
            roomd = RoomdProcess(secret: harness.secret, arguments: ["--heartbeat-interval", "0.25"] + flags)
            try roomd!.start()
        }
        let serverURL = roomd.map { "ws://127.0.0.1:\($0.port)/v1/rooms" } ?? harness.serverURL
        let probe = harness.directory + "/probe.lines"
        let library = try compilePlugin("probe", source: ProbePlugin.source(output: probe), in: harness.directory)
        let manifest = try harness.writeConfig(["manifestVersion": 1, "plugins": [[
            "name": "probe", "library": .string(library), "abi": 1, "hooks": ["room"], "rooms": ["*"], "timeoutMs": 1000,
        ]]], name: "plugins.json")
        var config = harness.standardConfig(rooms: ["lobby"], control: nil).objectValue!
        config["manifest"] = .string(manifest)
        config["server"] = .string(serverURL)
        let path = try harness.writeConfig(.object(config))
        let watcher = try Watcher(url: serverURL)
        let room = try await watcher.host.loginRoom("lobby", user: LoginUser(id: "watcher"), token: harness.token("watcher"))
        return Setup(harness: harness, roomd: roomd, watcher: watcher, room: room, config: path, probe: probe)
    }

    private func startBot(_ setup: Setup) throws -> ChildProcess {
        try ChildProcess("roombot", ["run", "--config", setup.config, "--log-level", "error"])
    }

    private func kill9(_ bot: ChildProcess) {
        bot.signal(SIGKILL)
        _ = bot.finish()
    }

    /// The event log's lines, parsed.
    private func log(_ setup: Setup) -> [JSON] {
        guard let text = try? String(contentsOfFile: setup.eventsPath, encoding: .utf8) else { return [] }
        return text.split(separator: "\n").compactMap { try? JSON.parse(Array($0.utf8)) }
    }

    private func magixLines(_ setup: Setup, _ name: String) -> [JSON] {
        log(setup).filter { $0["event"] == "magix" && $0["magixEvent"] == .string(name) }
    }

    private func reasons(_ setup: Setup, _ reason: String) -> [JSON] {
        log(setup).filter { $0["event"] == "roomStateChanged" && $0["reason"] == .string(reason) }
    }

    private func botUpdates(_ watcher: Watcher) -> [(UpdateType, Int64)] {
        watcher.events.all.compactMap {
            if case .userUpdate(_, let type, let users) = $0, let bot = users.first(where: { $0.userId == "bot-1" }) {
                return (type, bot.memberId)
            }
            return nil
        }
    }

    private func probeMagix(_ setup: Setup, _ name: String) -> [JSON] {
        ProbePlugin.lines(setup.probe).filter { $0.kind == 8 }.compactMap { try? JSON.parse(Array($0.payload.utf8)) }
            .filter { $0["event"] == .string(name) }
    }

    /// Sends the state change and five magix events while the bot is down; returns their seqs.
    private func sendWhileDown(_ room: Room) async throws -> (state: Int64, magix: [Int64]) {
        let state = try await room.setGlobalState(["while-away": true])
        var seqs: [Int64] = []
        for index in 0..<5 { seqs.append(try await room.dispatchMagixEvent("tick", payload: .int(Int64(index)))) }
        return (state, seqs)
    }

    /// The missed events reached the event log and the plugin exactly once, in order, marked replayed.
    private func assertDeliveredOnce(_ setup: Setup, _ seqs: [Int64], file: StaticString = #filePath, line: UInt = #line) async throws {
        await eventually(10, "replayed events in the log") { self.magixLines(setup, "tick").count >= 5 }
        await eventually(5, "replayed events at the plugin") { self.probeMagix(setup, "tick").count >= 5 }
        try await Task.sleep(for: .milliseconds(300))  // a duplicate would show up now
        let lines = magixLines(setup, "tick")
        XCTAssertEqual(lines.compactMap { $0["seq"]?.int64Value }, seqs, "each once, in order", file: file, line: line)
        XCTAssertEqual(lines.map { $0["payload"] }, (0..<5).map { JSON.int(Int64($0)) }, file: file, line: line)
        XCTAssertTrue(lines.allSatisfy { $0["replayed"] == true }, "marked replayed: \(lines)", file: file, line: line)
        let probed = probeMagix(setup, "tick")
        XCTAssertEqual(probed.compactMap { $0["seq"]?.int64Value }, seqs, "the plugin: each once, in order", file: file, line: line)
        XCTAssertTrue(probed.allSatisfy { $0["replayed"] == true }, file: file, line: line)
        // What the plugin reads from the host's cache after the replay shows the change made while down.
        let state = ProbePlugin.lines(setup.probe).last { $0.kind == 0 }.flatMap { try? JSON.parse(Array($0.payload.utf8)) }
        XCTAssertEqual(state?["globalState"]?["while-away"], true, file: file, line: line)
    }

    private func close(_ setup: Setup, _ bot: ChildProcess) async throws {
        bot.signal(SIGTERM)
        XCTAssertEqual(bot.finish().0, 0)
        try await setup.watcher.close()
        setup.roomd?.stop()
        try setup.harness.close()
    }

    func testKill9AndRestartWithinHeartbeatTimeout_isInvisible_andTheMissedEventsArriveOnce() async throws {
        let setup = try await setUp(roomd: ["--heartbeat-timeout", "8"])
        var bot = try startBot(setup)
        await eventually(10, "the bot is in") { self.botUpdates(setup.watcher).count == 1 }
        let memberId = botUpdates(setup.watcher).first?.1
        await eventually(5, "the bot's session is stored") { (try? BotStore(path: setup.storePath, logger: .init(label: "t")))?.cursor(room: "lobby") != nil }
        kill9(bot)

        let (_, seqs) = try await sendWhileDown(setup.room)
        bot = try startBot(setup)
        try await assertDeliveredOnce(setup, seqs)
        let logined = reasons(setup, "LOGINED")
        XCTAssertEqual(logined.count, 2)
        XCTAssertEqual(logined.last?["recovered"], true)
        XCTAssertEqual(log(setup).filter { $0["event"] == "resync" }.count, 0)
        XCTAssertEqual(botUpdates(setup.watcher).map(\.0), [.add], "the observer saw no userUpdate from the restart")
        let allUpdates = setup.watcher.events.all.filter { if case .userUpdate = $0 { return true }; return false }
        XCTAssertEqual(allUpdates.count, 1, "no userUpdate of any kind but the bot's first arrival")
        XCTAssertEqual(setup.room.roomMembers.first { $0.userId == "bot-1" }?.memberId, memberId)
        try await close(setup, bot)
    }

    func testRestartAfterHeartbeatTimeoutWithinRetention_keepsTheMemberId_deleteThenAdd_nothingLost() async throws {
        let setup = try await setUp(roomd: ["--heartbeat-timeout", "0.8"])
        var bot = try startBot(setup)
        await eventually(10, "the bot is in") { self.botUpdates(setup.watcher).count == 1 }
        let memberId = botUpdates(setup.watcher).first?.1
        await eventually(5) { (try? BotStore(path: setup.storePath, logger: .init(label: "t")))?.cursor(room: "lobby") != nil }
        kill9(bot)
        await eventually(5, "the server drops the silent member") { self.botUpdates(setup.watcher).count == 2 }

        let (_, seqs) = try await sendWhileDown(setup.room)
        bot = try startBot(setup)
        try await assertDeliveredOnce(setup, seqs)
        await eventually(5, "re-added") { self.botUpdates(setup.watcher).count == 3 }
        let updates = botUpdates(setup.watcher)
        XCTAssertEqual(updates.map(\.0), [.add, .delete, .add])
        XCTAssertEqual(Set(updates.map(\.1)), [memberId!], "the same memberId throughout")
        XCTAssertEqual(reasons(setup, "LOGINED").last?["recovered"], true)
        try await close(setup, bot)
    }

    func testRestartPastRetention_logsInFresh_andLogsResyncWithItsSeqs() async throws {
        let setup = try await setUp(roomd: ["--heartbeat-timeout", "0.4", "--session-retention", "0.9"])
        var bot = try startBot(setup)
        await eventually(10, "the bot is in") { self.botUpdates(setup.watcher).count == 1 }
        await eventually(5) { (try? BotStore(path: setup.storePath, logger: .init(label: "t")))?.cursor(room: "lobby") != nil }
        kill9(bot)
        let stored = try XCTUnwrap(BotStore(path: setup.storePath, logger: .init(label: "t")).cursor(room: "lobby"))
        _ = try await sendWhileDown(setup.room)
        try await Task.sleep(for: .seconds(2))

        bot = try startBot(setup)
        await eventually(10, "resync logged") { self.log(setup).contains { $0["event"] == "resync" } }
        let resync = log(setup).filter { $0["event"] == "resync" }
        XCTAssertEqual(resync.count, 1)
        XCTAssertEqual(resync.first?["reason"], "sessionExpired")
        XCTAssertEqual(resync.first?["lastAppliedSeq"]?.int64Value, stored.seq)
        await eventually(5, "the watcher sees the new session") { self.botUpdates(setup.watcher).filter { $0.0 == .add }.count == 2 }
        XCTAssertEqual(resync.first?["resumedAtSeq"]?.int64Value, setup.room.content.seq, "the snapshot at the fresh login")
        XCTAssertEqual(reasons(setup, "LOGINED").last?["recovered"], false)
        XCTAssertEqual(magixLines(setup, "tick").count, 0, "events past retention are not delivered")
        let ids = botUpdates(setup.watcher).filter { $0.0 == .add }.map(\.1)
        XCTAssertEqual(ids.count, 2)
        XCTAssertNotEqual(ids.first, ids.last, "a fresh login: a new memberId")
        try await close(setup, bot)
    }

    func testRestartWithEventsEvicted_keepsTheSession_andLogsResyncNotRecovered() async throws {
        // roomd has no flag for its recovery buffer: the in-process server.
        let setup = try await setUp(roomd: nil) {
            $0.recoveryEvents = 2
            $0.recoveryWindow = .milliseconds(1)
        }
        var bot = try startBot(setup)
        await eventually(10, "the bot is in") { self.botUpdates(setup.watcher).count == 1 }
        await eventually(5) { (try? BotStore(path: setup.storePath, logger: .init(label: "t")))?.cursor(room: "lobby") != nil }
        kill9(bot)
        let stored = try XCTUnwrap(BotStore(path: setup.storePath, logger: .init(label: "t")).cursor(room: "lobby"))
        for index in 0..<6 {
            try await setup.room.dispatchMagixEvent("tick", payload: .int(Int64(index)))
            try await Task.sleep(for: .milliseconds(5))
        }
        let latest = try await setup.room.setGlobalState(["after": 1])

        bot = try startBot(setup)
        await eventually(10, "resync logged") { self.log(setup).contains { $0["event"] == "resync" } }
        let resync = log(setup).filter { $0["event"] == "resync" }
        XCTAssertEqual(resync.count, 1)
        XCTAssertEqual(resync.first?["reason"], "notRecovered")
        XCTAssertEqual(resync.first?["lastAppliedSeq"]?.int64Value, stored.seq)
        XCTAssertEqual(resync.first?["resumedAtSeq"]?.int64Value, latest)
        XCTAssertEqual(botUpdates(setup.watcher).map(\.0), [.add], "the session itself was kept")
        await eventually(5, "the plugin hears resync") { ProbePlugin.lines(setup.probe).contains { $0.kind == 13 } }
        try await close(setup, bot)
    }
}

extension BotRestartTests {
    /// Sends magix events one after another until stopped; keeps every acknowledged seq.
    final class Stream: @unchecked Sendable {
        // @unchecked Sendable: guarded by lock.
        private let lock = NSLock()
        private var acked: [Int64] = []
        private var running = true
        var seqs: [Int64] { lock.withLock { acked } }
        func stop() { lock.withLock { running = false } }
        var isRunning: Bool { lock.withLock { running } }
        func add(_ seq: Int64) { lock.withLock { acked.append(seq) } }
    }

    func testKill9TwentyTimesUnderAStreamOfEvents_everyAcknowledgedEventIsLoggedExactlyOnce_andTheStoreIsSound() async throws {
        let setup = try await setUp(roomd: ["--heartbeat-timeout", "60"])
        var bot = try startBot(setup)
        await eventually(10, "the bot is in") { self.botUpdates(setup.watcher).count == 1 }
        await eventually(5) { (try? BotStore(path: setup.storePath, logger: .init(label: "t")))?.cursor(room: "lobby") != nil }

        let stream = Stream()
        let room = setup.room
        let sender = Task {
            var index: Int64 = 0
            while stream.isRunning {
                if let seq = try? await room.dispatchMagixEvent("n", payload: .int(index)) { stream.add(seq) }
                index += 1
                try? await Task.sleep(for: .milliseconds(3))
            }
        }
        var random = SeededGenerator(seed: 14)
        for _ in 0..<20 {
            // Any moment: during start-up, mid-resume, mid-replay, or while live.
            try await Task.sleep(for: .milliseconds(Int.random(in: 20...600, using: &random)))
            kill9(bot)
            bot = try startBot(setup)
        }
        try await Task.sleep(for: .milliseconds(500))
        stream.stop()
        await sender.value
        let acked = stream.seqs
        XCTAssertGreaterThan(acked.count, 100)
        await eventually(20, "every acknowledged event logged") {
            Set(self.magixLines(setup, "n").compactMap { $0["seq"]?.int64Value }).isSuperset(of: acked)
        }
        XCTAssertEqual(botUpdates(setup.watcher).map(\.0), [.add], "twenty crashes, invisible to the observer")
        bot.signal(SIGTERM)
        XCTAssertEqual(bot.finish().0, 0)

        let logged = magixLines(setup, "n").compactMap { $0["seq"]?.int64Value }
        XCTAssertEqual(logged.count, Set(logged).count, "no event logged twice: \(logged.count - Set(logged).count) duplicates")
        XCTAssertEqual(logged, logged.sorted(), "in order across restarts")
        XCTAssertEqual(Set(logged), Set(acked), "exactly the acknowledged events")
        XCTAssertEqual(log(setup).filter { $0["event"] == "resync" }.count, 0, "continuity never broke")
        XCTAssertGreaterThan(magixLines(setup, "n").filter { $0["replayed"] == true }.count, 0, "restarts replayed what they missed")
        let store = try BotStore(path: setup.storePath, logger: .init(label: "t"))
        XCTAssertEqual(store.integrityCheck(), "ok")
        XCTAssertNil(store.cursor(room: "lobby"), "a graceful stop logs out and forgets the session")
        try await setup.watcher.close()
        setup.roomd?.stop()
        try setup.harness.close()
    }
}
