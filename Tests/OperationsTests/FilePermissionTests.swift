import Foundation
import RoomKitTestSupport
import XCTest

/// State and data files are private outside systemd too (issue 28 §6): roomd's
/// data, roombot's store and event log are created 0600 under a 022 umask,
/// and roombot warns once at start when its config holds a secret and its
/// group or everyone can read it.
final class FilePermissionTests: XCTestCase {
    private var directory = ""

    override func setUpWithError() throws {
        directory = try temporaryDirectory("perms")
    }

    override func tearDown() {
        try? FileManager.default.removeItem(atPath: directory)
    }

    private func mode(_ path: String) -> Int {
        ((try? FileManager.default.attributesOfItem(atPath: path))?[.posixPermissions] as? NSNumber)?.intValue ?? -1
    }

    /// Starts roombot with `bot.json` at `mode` under umask 022 (sh), waits
    /// until both rooms are in, stops it; returns its stderr.
    private func runBot(configMode: Int, roomd: RoomdProcess, secretInFile: Bool) throws -> String {
        let control = freePort()
        let auth = secretInFile ? #"{"secret": "perm-secret-0123456789"}"# : #"{"tokenFile": "\#(directory)/tokens.json"}"#
        try "{\"*\": \"\(try mint(roomd))\"}".write(toFile: directory + "/tokens.json", atomically: true, encoding: .utf8)
        try """
            {"server": "ws://127.0.0.1:\(roomd.port)/v1/rooms", "user": {"id": "bot-p"}, "auth": \(auth),
             "rooms": ["lobby"], "control": "127.0.0.1:\(control)",
             "state": "\(directory)/state.sqlite", "events": "\(directory)/events.ndjson"}
            """.write(toFile: directory + "/bot.json", atomically: true, encoding: .utf8)
        XCTAssertEqual(chmod(directory + "/bot.json", mode_t(configMode)), 0)
        let bot = try Spawned(path: "/bin/sh", arguments: ["-c", "umask 022; exec \"$0\" run --config \"$1\"",
                                                            try builtProduct("roombot"), directory + "/bot.json"], environment: [:])
        XCTAssertTrue(bot.waitFor("control on "), bot.stderr)
        let deadline = Date().addingTimeInterval(15)
        while Date() < deadline, !http(control, "GET", "/v1/rooms").1.contains("LOGINED") { usleep(50_000) }
        XCTAssertTrue(http(control, "GET", "/v1/rooms").1.contains("LOGINED"))
        bot.signal(SIGTERM)
        return bot.finish().stderr
    }

    private func mint(_ roomd: RoomdProcess) throws -> String {
        let run = try runProduct("roomd", ["token", "--user", "bot-p", "--room", "*"], environment: ["ROOMD_SECRET": roomd.secret])
        XCTAssertEqual(run.status, 0, run.stderr)
        return run.stdout.trimmingCharacters(in: .newlines)
    }

    func testStateDataAndEventLog_areCreated0600_underUmask022() throws {
        let roomd = RoomdProcess(secret: "perm-secret-0123456789")
        // roomd's own data, created under umask 022 as a shell would start it.
        let binary = try XCTUnwrap(RoomdProcess.binary)
        let data = directory + "/roomd-data"
        let server = try Spawned(path: "/bin/sh", arguments: ["-c", "umask 022; exec \"$0\" serve --listen 127.0.0.1:\(roomd.port) --data \"$1\"",
                                                               binary, data], environment: ["ROOMD_SECRET": roomd.secret])
        XCTAssertTrue(server.waitFor("listening on"), server.stderr)
        defer { server.signal(SIGTERM); _ = server.finish() }
        let stderr = try runBot(configMode: 0o600, roomd: roomd, secretInFile: true)
        XCTAssertFalse(stderr.contains("holds a secret"), stderr)
        for file in ["state.sqlite", "events.ndjson"] {
            XCTAssertEqual(mode(directory + "/" + file), 0o600, "\(file) is \(String(mode(directory + "/" + file), radix: 8))")
        }
        let files = try FileManager.default.contentsOfDirectory(atPath: data)
        XCTAssertFalse(files.isEmpty)
        for file in files {
            XCTAssertEqual(mode(data + "/" + file), 0o600, "roomd's \(file) is \(String(mode(data + "/" + file), radix: 8))")
        }
    }

    func testWorldReadableConfigWithASecret_warnsOnce_namingFileFieldAndFix() throws {
        let roomd = RoomdProcess(secret: "perm-secret-0123456789")
        try roomd.start()
        defer { roomd.stop() }
        let stderr = try runBot(configMode: 0o644, roomd: roomd, secretInFile: true)
        let warnings = stderr.components(separatedBy: "holds a secret").count - 1
        XCTAssertEqual(warnings, 1, stderr)
        XCTAssertTrue(stderr.contains("\(directory)/bot.json holds a secret (auth.secret) and its group and everyone can read it (mode 644)"), stderr)
        XCTAssertTrue(stderr.contains("chmod 600"), stderr)
    }

    func testGroupReadableConfigWithoutASecret_doesNotWarn() throws {
        let roomd = RoomdProcess(secret: "perm-secret-0123456789")
        try roomd.start()
        defer { roomd.stop() }
        let stderr = try runBot(configMode: 0o640, roomd: roomd, secretInFile: false)
        XCTAssertFalse(stderr.contains("holds a secret"), stderr)
    }
}
