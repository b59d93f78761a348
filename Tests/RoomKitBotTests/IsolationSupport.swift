import Foundation
import RoomKit
import RoomKitProtocol
import RoomKitTestSupport
import XCTest

/// C plugins for the isolation tests. Each records the payload of every
/// magix event it finished handling to `record` (one JSON line, written with
/// write(2) so a crash loses nothing already handled), and misbehaves when
/// `trigger` (a C expression over `payload`) holds.
enum IsolationPlugins {
    static func source(record: String, trigger: String = "0", misbehave: String = "") -> String {
        """
        #include "roomkit_plugin.h"
        #include <fcntl.h>
        #include <stdio.h>
        #include <stdlib.h>
        #include <string.h>
        #include <unistd.h>
        static int out = -1;
        static int on_load(void *self, const roomkit_host_api *api, const char *config) {
            (void)self; (void)api; (void)config;
            out = open("\(record)", O_WRONLY | O_CREAT | O_APPEND, 0644);
            return out < 0;
        }
        static void misbehave(const char *payload) { (void)payload; \(misbehave) }
        static void on_room_event(void *self, int32_t kind, const char *room, const char *payload) {
            (void)self; (void)room;
            if (kind != ROOMKIT_ROOM_MAGIX) return;
            if (\(trigger)) misbehave(payload);
            char line[4096];
            int n = snprintf(line, sizeof line, "%s\\n", payload);
            if (write(out, line, (size_t)n) != n) abort();
        }
        static void on_unload(void *self) { (void)self; if (write(out, "{\\"unloaded\\":true}\\n", 18) != 18) abort(); }
        static roomkit_plugin descriptor = {
            .struct_size = sizeof(roomkit_plugin), .abi_major = ROOMKIT_PLUGIN_ABI_MAJOR,
            .abi_minor = ROOMKIT_PLUGIN_ABI_MINOR, .on_load = on_load, .on_unload = on_unload, .on_room_event = on_room_event,
        };
        const roomkit_plugin *roomkit_plugin_entry(uint16_t major, uint16_t minor) { (void)major; (void)minor; return &descriptor; }
        """
    }

    /// A store through a null pointer the compiler cannot see is null (a literal NULL store is UB it may drop).
    static let segfault = "static int *volatile nowhere; *nowhere = 1;"
    static let abort = "abort();"
    static let exit3 = "exit(3);"
    static let hang = "for (;;) sleep(1000);"
    static let spin = "for (volatile unsigned long n = 0;; n++) {}"
    static let allocate = "for (;;) { char *p = malloc(1 << 20); if (!p) abort(); memset(p, 1, 1 << 20); }"
    /// Fake frames and binary junk on stdout, a line on stderr: none of it may reach the socket.
    static let garbage = """
        static const char junk[] = "\\x05\\x00\\x00\\x00\\x41\\xff\\xfe\\x00\\x01";
        if (write(1, junk, sizeof junk) < 0) abort();
        printf("\\nGARBAGE-MARKER %s\\n", payload); fflush(stdout);
        fprintf(stderr, "STDERR-MARKER\\n");
        """
    /// Writes a frame that cannot parse straight onto the bot's socket (fd 3).
    static let badFrame = "if (write(3, \"\\xff\\xff\\xff\\x7fjunk\", 8) < 0) abort(); sleep(1);"
    static let onEveryEvent = "1"
    static let onBoom = "strstr(payload, \"\\\"boom\\\"\") != NULL"
}

/// roombot as a real process with a real (in-process) roomd, two plugins
/// (a healthy one and the one under test), and a watcher in both rooms.
final class IsolationScenario {
    let harness: BotHarness
    let watcher: Watcher
    let bot: ChildProcess
    let port: Int
    let healthyRecord: String
    let badRecord: String
    private let stderrText = LockedText()

    final class LockedText: @unchecked Sendable {
        // @unchecked Sendable: guarded by lock.
        private let lock = NSLock()
        private var text = ""
        func add(_ more: String) { lock.withLock { text += more } }
        var value: String { lock.withLock { text } }
    }

    /// `bad` is the misbehaving C plugin's source maker (given its record file);
    /// `supervision` its manifest fields.
    /// `badPython`, when given, makes the plugin under test a `"command"`
    /// plugin: WirePythonFixture run with that mode instead of `bad`.
    convenience init(bad: @escaping (String) -> String, supervision: [String: JSON], logLevel: String = "warning",
                     badPython: String? = nil, environment: [String: String] = [:]) async throws {
        try await self.init(badEntry: { record, directory in
            var entry: [String: JSON] = ["name": "bad", "abi": 1, "hooks": ["magix"]]
            if let badPython {
                try WirePythonFixture.script.write(toFile: directory + "/fixture_plugin.py", atomically: true, encoding: .utf8)
                entry["command"] = ["python3", "fixture_plugin.py", "bad.ndjson", .string(badPython)]
            } else {
                entry["library"] = .string(try compilePlugin("bad", source: bad(record), in: directory))
            }
            return entry
        }, supervision: supervision, logLevel: logLevel, environment: environment)
    }

    /// `badEntry` writes the misbehaving plugin (given its record file and
    /// the test's directory) and returns its manifest entry (a `library` or
    /// a `command`); `supervision` adds to it.
    init(badEntry: (String, String) throws -> [String: JSON], supervision: [String: JSON], logLevel: String = "warning",
         environment: [String: String] = [:]) async throws {
        harness = try BotHarness()
        let directory = harness.directory
        healthyRecord = directory + "/healthy.ndjson"
        badRecord = directory + "/bad.ndjson"
        let healthy = try compilePlugin("healthy", source: IsolationPlugins.source(record: healthyRecord), in: directory)
        var badEntry = try badEntry(badRecord, directory)
        badEntry.merge(["timeoutMs": 50, "restartBackoffMs": 10]) { given, _ in given }
        badEntry.merge(supervision) { _, new in new }
        badEntry = badEntry.filter { $0.value != .null }  // a null in `supervision` removes a field
        _ = try harness.writeConfig(["manifestVersion": 1, "plugins": [
            ["name": "healthy", "library": .string(healthy), "abi": 1, "hooks": ["magix"], "order": 1],
            .object(badEntry),
        ]], name: "plugins.json")
        var config = harness.standardConfig(rooms: ["lobby", "hall"])
        if case .object(var fields) = config { fields["manifest"] = "plugins.json"; config = .object(fields) }
        let path = try harness.writeConfig(config)
        watcher = try Watcher(url: harness.serverURL)
        for room in ["lobby", "hall"] {
            try await watcher.host.loginRoom(room, user: LoginUser(id: "watcher"), token: harness.token("watcher"))
        }
        bot = try ChildProcess("roombot", ["run", "--config", path, "--log-level", logLevel], environment: environment)
        let handle = bot.errors.fileHandleForReading
        let text = stderrText
        let reader = Thread {
            while true {
                let chunk = handle.availableData
                if chunk.isEmpty { return }
                text.add(String(decoding: chunk, as: UTF8.self))
            }
        }
        reader.start()
        var found = 0
        let deadline = Date().addingTimeInterval(10)
        while found == 0 && Date() < deadline {
            let seen = text.value
            if let range = seen.range(of: "control on "), seen[range.upperBound...].contains("\n") {
                found = Int(seen[range.upperBound...].prefix { $0.isNumber }) ?? 0
            } else {
                usleep(20_000)
            }
        }
        port = found
        XCTAssertNotEqual(port, 0, "no control port in: \(text.value)")
        let watcher = self.watcher
        await eventually(10, "bot joined both rooms") {
            watcher.events.all.filter { if case .userUpdate(_, .add, let u) = $0 { return u.contains { $0.userId == "bot-1" } }; return false }.count == 2
        }
    }

    /// roombot's stderr so far (its log).
    var log: String { stderrText.value }

    /// Sends `payloads` as magix "chat" events from the watcher into `room`, in order.
    func send(_ payloads: [JSON], in room: String = "lobby") async throws {
        let handle = try XCTUnwrap(watcher.host.room(room))
        for payload in payloads { try await handle.dispatchMagixEvent("chat", payload: payload) }
    }

    /// The payloads a plugin recorded for `room`, in order.
    static func recorded(_ path: String, room: String = "lobby") -> [JSON] {
        (fileText(path) ?? "").split(separator: "\n").compactMap { try? JSON.parse(String($0)) }
            .filter { $0["room"]?.stringValue == room && $0["event"] == "chat" }.compactMap { $0["payload"] }
    }

    /// The `plugin` lines of the event log for plugin `name` with `status`.
    func statusLines(_ status: String, plugin: String = "bad") -> [String] {
        (fileText(harness.directory + "/events.ndjson") ?? "").split(separator: "\n").map(String.init).filter {
            guard let line = try? JSON.parse($0) else { return false }
            return line["event"] == "plugin" && line["plugin"]?.stringValue == plugin && line["status"]?.stringValue == status
        }
    }

    func plugin(_ name: String) throws -> JSON? {
        try JSON.parse(http(port, "GET", "/v1/plugins").1).arrayValue?.first { $0["name"]?.stringValue == name }
    }

    /// The checks every scenario shares: roombot alive, every room LOGINED,
    /// the watcher never saw the bot leave, the healthy plugin got every event in order.
    func assertRoomsUnaffected(expected: [JSON], file: StaticString = #filePath, line: UInt = #line) async throws {
        let healthyRecord = self.healthyRecord
        await eventually(10, file: file, line: line, "healthy plugin got every event") {
            Self.recorded(healthyRecord).count >= expected.count
        }
        XCTAssertEqual(Self.recorded(healthyRecord), expected, "healthy plugin: every event, in order, once", file: file, line: line)
        XCTAssertTrue(bot.process.isRunning, "roombot stays up", file: file, line: line)
        let rooms = try JSON.parse(http(port, "GET", "/v1/rooms").1).arrayValue ?? []
        XCTAssertEqual(rooms.compactMap { $0["reason"]?.stringValue }, ["LOGINED", "LOGINED"], file: file, line: line)
        XCTAssertEqual(watcher.deletes(of: "bot-1"), 0, "no member saw the bot leave", file: file, line: line)
    }

    /// After a crash loop (maxCrashes 2): rooms and the healthy plugin
    /// unaffected, three crashes each naming one of `reasons` and
    /// `context`, one poison event skipped, two restarts, the quarantine,
    /// the report's counters, and no event the bad plugin finished. The
    /// C and the Python crash tests share it.
    func assertCrashLoopContained(expected: [JSON], reasons: [String], context: String,
                                  file: StaticString = #filePath, line: UInt = #line) async throws {
        try await assertRoomsUnaffected(expected: expected, file: file, line: line)
        XCTAssertEqual(Self.recorded(healthyRecord, room: "hall"), ["hall-event"], file: file, line: line)
        try await Task.sleep(for: .milliseconds(200))  // nothing more may follow the quarantine
        let crashes = statusLines("crashed")
        XCTAssertEqual(crashes.count, 3, "\(crashes)", file: file, line: line)
        XCTAssertTrue(crashes.allSatisfy { crash in reasons.contains { crash.contains($0) } && crash.contains(context) },
                      "\(crashes)", file: file, line: line)
        XCTAssertEqual(statusLines("skipped").count, 1, file: file, line: line)
        XCTAssertTrue(statusLines("skipped").first?.contains("skipped magix in room lobby: it crashed the plugin twice") == true,
                      "\(statusLines("skipped"))", file: file, line: line)
        XCTAssertEqual(statusLines("restarted").count, 2, file: file, line: line)
        XCTAssertTrue(statusLines("quarantined").first?.contains("3 crashes within 60 s") == true, file: file, line: line)
        let report = try XCTUnwrap(try plugin("bad"), file: file, line: line)
        XCTAssertEqual(report["status"], "quarantined", file: file, line: line)
        XCTAssertEqual(report["process"]?["crashes"], 3, file: file, line: line)
        XCTAssertEqual(report["process"]?["restarts"], 2, file: file, line: line)
        XCTAssertEqual(report["process"]?["skipped"], 1, file: file, line: line)
        XCTAssertEqual(Self.recorded(badRecord), [], "it never finished an event", file: file, line: line)
        try await finish(file: file, line: line)
    }

    /// SIGTERM: roombot exits 0 and leaves no plugin process behind.
    func finish(file: StaticString = #filePath, line: UInt = #line) async throws {
        let pids = ((try? JSON.parse(http(port, "GET", "/v1/plugins").1).arrayValue) ?? [])
            .compactMap { $0["process"]?["pid"]?.int64Value }.map { pid_t($0) }
        bot.signal(SIGTERM)
        let (status, _, _) = bot.finish()
        XCTAssertEqual(status, 0, log, file: file, line: line)
        XCTAssertTrue(fileText(healthyRecord)?.hasSuffix("{\"unloaded\":true}\n") == true, "ordered shutdown: on_unload ran last",
                      file: file, line: line)
        await eventually(5, file: file, line: line, "plugin processes gone") { pids.allSatisfy { !processAlive($0) } }
        try await watcher.close()
        try harness.close()
    }
}

/// Whether `pid` is a live process (a zombie counts as gone).
func processAlive(_ pid: pid_t) -> Bool {
    guard kill(pid, 0) == 0 else { return false }
    guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
          let close = stat.lastIndex(of: ")") else { return false }
    return stat[stat.index(close, offsetBy: 2)] != "Z"
}
