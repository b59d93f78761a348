import Foundation
import RoomKitProtocol
import RoomKitTokens
import XCTest

/// CLI.md `roomd`: flags, exit codes, `token`, and `serve`'s lifecycle.
final class CLITests: ServerTestCase {
    /// Asserts a usage failure: exit 2, nothing on stdout, one stderr line naming `flag`.
    private func assertFlagError(_ arguments: [String], names flag: String, file: StaticString = #filePath,
                                 line: UInt = #line) throws {
        let result = try runRoomd(arguments, file: file, line: line)
        XCTAssertEqual(result.status, 2, "\(arguments): stderr \(result.stderr)", file: file, line: line)
        XCTAssertEqual(result.stdout, "", "\(arguments)", file: file, line: line)
        let lines = result.stderr.split(separator: "\n", omittingEmptySubsequences: true)
        XCTAssertEqual(lines.count, 1, "one line for \(arguments): \(result.stderr)", file: file, line: line)
        XCTAssertTrue(result.stderr.contains(flag), "\(arguments): '\(result.stderr)' names \(flag)", file: file, line: line)
    }

    // MARK: token

    func testToken_printsOnlyTheJWT() throws {
        let result = try runRoomd(["token", "--secret", "s3cret", "--user", "u1", "--room", "lobby", "--role", "admin",
                                   "--ttl", "120"])
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertEqual(result.stderr, "")
        XCTAssertTrue(result.stdout.hasSuffix("\n"))
        let token = result.stdout.trimmingCharacters(in: .newlines)
        XCTAssertFalse(token.contains("\n"), "one line")
        XCTAssertEqual(token.split(separator: ".").count, 3, "a JWT: header.payload.signature")
        let now = Int64(Date().timeIntervalSince1970)
        let claims = try TokenSigner(secret: "s3cret").verify(token, now: now)
        XCTAssertEqual(claims.sub, "u1")
        XCTAssertEqual(claims.room, "lobby")
        XCTAssertEqual(claims.role, .admin)
        XCTAssertTrue((now + 118...now + 121).contains(claims.exp), "exp \(claims.exp) vs now \(now)")
        XCTAssertThrowsError(try TokenSigner(secret: "other").verify(token, now: now))
    }

    func testToken_defaultsToAnyRoomWriterOneHour() throws {
        let result = try runRoomd(["token", "--secret", "s", "--user", "bot-1"])
        XCTAssertEqual(result.status, 0, result.stderr)
        let now = Int64(Date().timeIntervalSince1970)
        let claims = try TokenSigner(secret: "s").verify(result.stdout.trimmingCharacters(in: .newlines), now: now)
        XCTAssertEqual(claims.room, "*")
        XCTAssertEqual(claims.role, .writer)
        XCTAssertTrue((now + 3598...now + 3601).contains(claims.exp))
    }

    func testToken_badFlags_exit2WithOneLineNamingTheFlag() throws {
        let base = ["token", "--secret", "s", "--user", "u1"]
        try assertFlagError(base + ["--role", "king"], names: "--role")
        try assertFlagError(base + ["--ttl", "0"], names: "--ttl")
        try assertFlagError(base + ["--ttl", "soon"], names: "--ttl")
        try assertFlagError(base + ["--room", "bad room"], names: "--room")
        try assertFlagError(["token", "--secret", "s"], names: "--user")
        try assertFlagError(["token", "--user", "u1"], names: "--secret")
        try assertFlagError(base + ["--colour", "red"], names: "--colour")
    }

    // MARK: serve

    func testServe_badFlags_exit2WithOneLineNamingTheFlag() throws {
        let data = try temporaryDirectory()
        let base = ["serve", "--secret", "s", "--data", data]
        try assertFlagError(base + ["--listen", "nonsense"], names: "--listen")
        try assertFlagError(base + ["--listen", "127.0.0.1:99999"], names: "--listen")
        try assertFlagError(base + ["--listen", ":7700"], names: "--listen")
        try assertFlagError(base + ["--heartbeat-timeout", "0"], names: "--heartbeat-timeout")
        try assertFlagError(base + ["--heartbeat-interval", "abc"], names: "--heartbeat-interval")
        try assertFlagError(base + ["--session-retention=-5"], names: "--session-retention")
        try assertFlagError(base + ["--tls-cert", "/nonexistent/cert.pem"], names: "--tls")
        try assertFlagError(base + ["--tls-cert", "/nonexistent/cert.pem", "--tls-key", "/nonexistent/key.pem"],
                            names: "--tls-cert")
        try assertFlagError(base + ["--synchronous", "sometimes"], names: "--synchronous")
        try assertFlagError(base + ["--max-message-bytes", "1000"], names: "--max-message-bytes")
        try assertFlagError(base + ["--max-connections", "0"], names: "--max-connections")
        try assertFlagError(base + ["--max-connections=-3"], names: "--max-connections")
        try assertFlagError(base + ["--max-connections", "many"], names: "--max-connections")
        try assertFlagError(base + ["--max-connections-per-ip", "0"], names: "--max-connections-per-ip")
        try assertFlagError(base + ["--bogus"], names: "--bogus")
        try assertFlagError(["serve", "--data", data], names: "--secret")
        try assertFlagError(["serve", "--secret", "s"], names: "--data")
    }

    func testServe_unusableDataDirectory_exit2NamingData() throws {
        let directory = try temporaryDirectory()
        let file = (directory as NSString).appendingPathComponent("plain-file")
        XCTAssertTrue(FileManager.default.createFile(atPath: file, contents: Data("x".utf8)))
        try assertFlagError(["serve", "--secret", "s", "--data", file, "--listen", "127.0.0.1:0"], names: "--data")
        try assertFlagError(["serve", "--secret", "s", "--data", file + "/below", "--listen", "127.0.0.1:0"],
                            names: "--data")
        // A directory holding something that is not a database.
        let corrupt = (directory as NSString).appendingPathComponent("corrupt")
        try FileManager.default.createDirectory(atPath: corrupt, withIntermediateDirectories: true)
        XCTAssertTrue(FileManager.default.createFile(atPath: (corrupt as NSString).appendingPathComponent("rooms.sqlite"),
                                                     contents: Data(repeating: 0x41, count: 8192)))
        try assertFlagError(["serve", "--secret", "s", "--data", corrupt, "--listen", "127.0.0.1:0"], names: "--data")
    }

    func testServe_createsAMissingDataDirectory() throws {
        let parent = try temporaryDirectory()
        let data = (parent as NSString).appendingPathComponent("a/b/c")
        let child = try startRoomd(dataDirectory: data)
        var isDirectory: ObjCBool = false
        XCTAssertTrue(FileManager.default.fileExists(atPath: data, isDirectory: &isDirectory) && isDirectory.boolValue)
        XCTAssertEqual(child.stop(), 0)
    }

    func testServe_portInUse_exit2NamingListen() throws {
        let child = try startRoomd(dataDirectory: try temporaryDirectory())
        try assertFlagError(["serve", "--secret", "s", "--data", try temporaryDirectory(), "--listen",
                             "127.0.0.1:\(child.port)"], names: "--listen")
    }

    func testServe_printsListeningLine_servesAndExitsZeroOnSIGTERM() throws {
        let child = try startRoomd(dataDirectory: try temporaryDirectory())
        XCTAssertEqual(child.host, "127.0.0.1")
        XCTAssertGreaterThan(child.port, 0)
        XCTAssertEqual(child.stdout.text, "listening on 127.0.0.1:\(child.port)\n", "exactly one line")
        XCTAssertEqual(try httpRequest(port: child.port, method: "GET", path: "/healthz").text, "ok")
        let side = try makeClientSide()
        let client = try side.connect(port: child.port)
        XCTAssertEqual(try client.login("r1", token: makeToken(user: "u1"), user: "u1")["ok"], true)
        XCTAssertEqual(child.stop(signal: SIGTERM), 0, "SIGTERM exits 0; stderr: \(child.stderr.text)")
        XCTAssertEqual(try client.waitForClose(), 1001, "connections are closed going-away")
    }

    func testServe_maxConnections_refusesTheUpgradeBeyondItWith503() throws {
        let child = try startRoomd(dataDirectory: try temporaryDirectory(), extra: ["--max-connections", "2"])
        let side = try makeClientSide()
        let first = try side.connect(port: child.port)
        _ = try side.connect(port: child.port)
        guard case .refused(let status, _) = WireSocket.upgrade(port: child.port) else {
            return XCTFail("a third upgrade must be refused")
        }
        XCTAssertEqual(status, 503)
        XCTAssertTrue(try first.isOpen())
    }

    func testServe_stopsOnSIGTERM_evenWhenStartedWithStopSignalsBlocked() throws {
        let child = try startRoomd(dataDirectory: try temporaryDirectory(), signalsBlocked: true)
        XCTAssertEqual(child.stop(signal: SIGTERM, timeout: 3), 0, "an inherited signal mask must not make roomd unstoppable")
    }

    func testServe_exitsZeroOnSIGINT() throws {
        let child = try startRoomd(dataDirectory: try temporaryDirectory())
        XCTAssertEqual(child.stop(signal: SIGINT), 0)
    }
}
