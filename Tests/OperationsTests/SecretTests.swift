import Foundation
import RoomKitProtocol
import RoomKitTokens
import RoomKitTestSupport
import XCTest

/// Secrets off the command line: every secret flag has a `--…-file` form and
/// an environment variable, so `ps` never shows it (docs/CLI.md).
final class SecretTests: XCTestCase {
    private var directory = ""

    override func setUpWithError() throws {
        directory = try temporaryDirectory("secrets")
    }

    override func tearDown() {
        try? FileManager.default.removeItem(atPath: directory)
    }

    private func writeFile(_ name: String, _ text: String) throws -> String {
        let path = directory + "/" + name
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    private func mintedToken(_ run: Finished, file: StaticString = #filePath, line: UInt = #line) throws -> String {
        XCTAssertEqual(run.status, 0, run.stderr, file: file, line: line)
        return run.stdout.trimmingCharacters(in: .newlines)
    }

    // MARK: roomd token

    func testToken_secretFromFile_signsWithTheFileContentWithoutItsNewline() throws {
        let path = try writeFile("secret", "file-secret\n")
        let token = try mintedToken(try runProduct("roomd", ["token", "--secret-file", path, "--user", "u1"]))
        let now = Int64(Date().timeIntervalSince1970)
        XCTAssertEqual(try TokenSigner(secret: "file-secret").verify(token, now: now).sub, "u1")
        XCTAssertThrowsError(try TokenSigner(secret: "file-secret\n").verify(token, now: now))
    }

    func testToken_secretFromEnvironment_signsWithIt() throws {
        let token = try mintedToken(try runProduct("roomd", ["token", "--user", "u2"], environment: ["ROOMD_SECRET": "env-secret"]))
        XCTAssertEqual(try TokenSigner(secret: "env-secret").verify(token, now: Int64(Date().timeIntervalSince1970)).sub, "u2")
    }

    func testToken_flagBeatsEnvironment() throws {
        let token = try mintedToken(try runProduct("roomd", ["token", "--secret", "flag-secret", "--user", "u3"],
                                                   environment: ["ROOMD_SECRET": "env-secret"]))
        XCTAssertNoThrow(try TokenSigner(secret: "flag-secret").verify(token, now: Int64(Date().timeIntervalSince1970)))
    }

    func testToken_secretProblems_areOneLineErrorsNamingTheFlag() throws {
        let empty = try writeFile("empty", "\n")
        let cases: [([String], [String: String], String)] = [
            (["--secret", "a", "--secret-file", empty], [:], "--secret: give --secret or --secret-file, not both"),
            (["--secret-file", empty], [:], "--secret-file: \(empty) is empty"),
            (["--secret-file", directory + "/missing"], [:], "--secret-file: cannot read \(directory)/missing"),
            ([], ["ROOMD_SECRET": ""], "ROOMD_SECRET: is set but empty"),
            ([], [:], "--secret: missing: give --secret-file FILE, set ROOMD_SECRET"),
        ]
        for (flags, environment, message) in cases {
            let run = try runProduct("roomd", ["token", "--user", "u"] + flags, environment: environment)
            XCTAssertEqual(run.status, 2, "\(flags) \(environment): \(run.stderr)")
            XCTAssertEqual(run.stdout, "", "\(flags)")
            XCTAssertEqual(run.stderr.split(separator: "\n").count, 1, run.stderr)
            XCTAssertTrue(run.stderr.contains(message), "\(flags) \(environment): expected '\(message)' in '\(run.stderr)'")
        }
    }

    // MARK: roomd serve

    /// Starts `roomd serve` with the secret given by `arguments`/`environment`,
    /// and checks that tokens signed with `secret` are accepted and others refused.
    private func assertServeUsesSecret(_ secret: String, arguments: [String], environment: [String: String]) throws {
        let data = directory + "/data-\(UUID().uuidString)"
        let roomd = try startProduct("roomd", ["serve", "--listen", "127.0.0.1:0", "--data", data] + arguments,
                                     environment: environment)
        XCTAssertTrue(roomd.waitFor("listening on"), "roomd did not start: \(roomd.stderr)")
        let port = try XCTUnwrap(roomd.stdout.split(separator: ":").last.flatMap { Int($0.trimmingCharacters(in: .whitespacesAndNewlines)) },
                                 roomd.stdout)
        func admin(_ key: String) -> String {
            let now = Int64(Date().timeIntervalSince1970)
            return TokenSigner(secret: key).sign(TokenClaims(sub: "ops", room: "*", role: .admin, exp: now + 60, iat: now))
        }
        let good = httpRequest(port: port, "GET", "/v1/admin/rooms", token: admin(secret))
        XCTAssertTrue(good.hasPrefix("HTTP/1.1 200"), good)
        let bad = httpRequest(port: port, "GET", "/v1/admin/rooms", token: admin(secret + "x"))
        XCTAssertTrue(bad.hasPrefix("HTTP/1.1 401"), bad)
        roomd.signal(SIGTERM)
        XCTAssertEqual(roomd.finish().status, 0, roomd.stderr)
        // The secret never reached the command line.
        XCTAssertFalse(roomd.process.arguments?.contains(secret) ?? true)
    }

    func testServe_secretFromFile_isTheServersSecret() throws {
        let path = try writeFile("serve-secret", "served-from-file\n")
        try assertServeUsesSecret("served-from-file", arguments: ["--secret-file", path], environment: [:])
    }

    func testServe_secretFromEnvironment_isTheServersSecret() throws {
        try assertServeUsesSecret("served-from-env", arguments: [], environment: ["ROOMD_SECRET": "served-from-env"])
    }

    // MARK: roombot replay

    /// With no recorded room on the server, a token the server accepts gets
    /// "no such room", a refused one "the token was refused": that tells
    /// which token replay sent.
    func testReplay_tokenFromFileOrEnvironment_isTheOneSent() throws {
        let roomd = RoomdProcess(secret: "replay-secret")
        try roomd.start()
        defer { roomd.stop() }
        let now = Int64(Date().timeIntervalSince1970)
        let valid = TokenSigner(secret: "replay-secret").sign(TokenClaims(sub: "u", room: "ghost", role: .reader, exp: now + 60, iat: now))
        let invalid = TokenSigner(secret: "wrong").sign(TokenClaims(sub: "u", room: "ghost", role: .reader, exp: now + 60, iat: now))
        let base = ["replay", "--server", "ws://127.0.0.1:\(roomd.port)/v1/rooms", "--room", "ghost", "--events", directory + "/events"]
        let file = try writeFile("token", valid + "\n")
        let badFile = try writeFile("bad-token", invalid + "\n")
        let cases: [([String], [String: String], String)] = [
            (["--token-file", file], [:], "no such room"),
            (["--token-file", badFile], [:], "the token was refused"),
            ([], ["ROOMBOT_TOKEN": valid], "no such room"),
            ([], ["ROOMBOT_TOKEN": invalid], "the token was refused"),
        ]
        for (flags, environment, expected) in cases {
            let run = try runProduct("roombot", base + flags, environment: environment, timeout: 30)
            XCTAssertEqual(run.status, 1, "\(flags) \(environment.keys): \(run.stderr)")
            XCTAssertTrue(run.stderr.contains(expected), "\(flags) \(environment.keys): expected '\(expected)' in \(run.stderr)")
        }
        let missing = try runProduct("roombot", base, timeout: 30)
        XCTAssertEqual(missing.status, 2, missing.stderr)
        XCTAssertTrue(missing.stderr.contains("--token: missing: give --token-file FILE, set ROOMBOT_TOKEN"), missing.stderr)
    }
}
