import Foundation
import RoomKitTestSupport
import XCTest

/// bot.json `tls: {caFile, serverName}`: roombot reaches a roomd whose
/// certificate comes from a private CA (made here with openssl) and names a
/// host other than the address dialled.
final class TLSTests: XCTestCase {
    private var directory = ""

    override func setUpWithError() throws {
        directory = try temporaryDirectory("tls")
    }

    override func tearDown() {
        try? FileManager.default.removeItem(atPath: directory)
    }

    private func openssl(_ arguments: [String]) throws {
        guard let run = runTool(["openssl"] + arguments, directory: directory) else { throw XCTSkip("openssl is not installed") }
        XCTAssertEqual(run.status, 0, "openssl \(arguments.joined(separator: " ")): \(run.stderr)")
    }

    /// A CA, and a server certificate it signed for `roomd.test` only.
    private func makeCertificates() throws -> (ca: String, cert: String, key: String) {
        try openssl(["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem", "-days", "1",
                     "-subj", "/CN=RoomKit Test CA", "-addext", "basicConstraints=critical,CA:TRUE",
                     "-addext", "keyUsage=critical,keyCertSign,cRLSign"])
        try openssl(["req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=roomd.test"])
        try "subjectAltName=DNS:roomd.test\nextendedKeyUsage=serverAuth\n".write(toFile: directory + "/ext.cnf", atomically: true, encoding: .utf8)
        try openssl(["x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
                     "-out", "server.pem", "-days", "1", "-extfile", "ext.cnf"])
        return (directory + "/ca.pem", directory + "/server.pem", directory + "/server.key")
    }

    /// Runs roombot with `tls` against `port` and returns lobby's reason once it leaves LOGINING.
    private func lobbyReason(port: Int, tls: String?, name: String) throws -> String {
        let config = """
            {"server": "wss://127.0.0.1:\(port)/v1/rooms", "user": {"id": "bot-\(name)"},
             "auth": {"secret": "tls-secret"}, "rooms": ["lobby"], "control": "127.0.0.1:0",
             "loginTimeout": 3\(tls.map { ", \"tls\": \($0)" } ?? "")}
            """
        let path = directory + "/\(name).json"
        try config.write(toFile: path, atomically: true, encoding: .utf8)
        let bot = try startProduct("roombot", ["run", "--config", path])
        defer {
            bot.signal(SIGTERM)
            _ = bot.finish()
        }
        XCTAssertTrue(bot.waitFor("control on "), bot.stderr)
        let line = try XCTUnwrap(bot.stderr.split(separator: "\n").first { $0.hasPrefix("control on ") }, bot.stderr)
        let control = try XCTUnwrap(Int(line.dropFirst("control on ".count)))
        var reason = "LOGINING"
        let deadline = Date().addingTimeInterval(15)
        // The control API is up before the first login: LOGOUT (not yet
        // started) and LOGINING both mean "no outcome yet".
        while (reason == "LOGINING" || reason == "LOGOUT" || reason == "?") && Date() < deadline {
            let (status, body) = http(control, "GET", "/v1/rooms")
            if status == 200, let rooms = try? JSONSerialization.jsonObject(with: Data(body.utf8)) as? [[String: Any]],
               let lobby = rooms.first(where: { $0["room"] as? String == "lobby" }) {
                reason = lobby["reason"] as? String ?? "?"
            }
            if reason == "LOGINING" || reason == "LOGOUT" || reason == "?" { usleep(50_000) }
        }
        return reason
    }

    func testPrivateCA_withCAFileAndServerName_logsIn_andWithoutEitherFails() throws {
        let (ca, cert, key) = try makeCertificates()
        let roomd = RoomdProcess(secret: "tls-secret", arguments: ["--tls-cert", cert, "--tls-key", key])
        try roomd.start()
        defer { roomd.stop() }
        let both = #"{"caFile": "ca.pem", "serverName": "roomd.test"}"#  // caFile relative to the config
        XCTAssertEqual(try lobbyReason(port: roomd.port, tls: both, name: "both"), "LOGINED")
        // The system's CAs do not know the private CA.
        XCTAssertEqual(try lobbyReason(port: roomd.port, tls: #"{"serverName": "roomd.test"}"#, name: "noca"), "LOGIN_FAILED")
        // The certificate names roomd.test, not 127.0.0.1.
        XCTAssertEqual(try lobbyReason(port: roomd.port, tls: "{\"caFile\": \"\(ca)\"}", name: "noname"), "LOGIN_FAILED")
    }

    func testTLSConfig_problems_areOneLineErrorsNamingTheField() throws {
        let cases: [(String, String, String)] = [
            ("ws://127.0.0.1:1/v1/rooms", #"{"serverName": "a"}"#, "bot.json: tls: applies to a wss:// server only"),
            ("wss://127.0.0.1:1/v1/rooms", #"{"caFile": "missing.pem"}"#, "bot.json: tls.caFile: cannot read"),
            ("wss://127.0.0.1:1/v1/rooms", #"{"serverName": "a b"}"#, "bot.json: tls.serverName: must be a host name"),
            ("wss://127.0.0.1:1/v1/rooms", #"{"ca": "x"}"#, "bot.json: tls.ca: unknown field"),
            ("wss://127.0.0.1:1/v1/rooms", #""yes""#, "bot.json: tls: must be an object"),
        ]
        for (server, tls, expected) in cases {
            let path = directory + "/bot.json"
            try """
                {"server": "\(server)", "user": {"id": "b"}, "auth": {"secret": "s"}, "tls": \(tls)}
                """.write(toFile: path, atomically: true, encoding: .utf8)
            let run = try runProduct("roombot", ["run", "--config", path])
            XCTAssertEqual(run.status, 2, "\(tls): \(run.stderr)")
            XCTAssertEqual(run.stderr.split(separator: "\n").count, 1, run.stderr)
            XCTAssertTrue(run.stderr.contains(expected), "\(tls): expected '\(expected)' in \(run.stderr)")
        }
    }
}
