import Foundation
import Logging
import RoomKitLoop
import RoomKitRedis
import RoomKitTestSupport
import XCTest

/// Redis over TLS through a tunnel (docs/FLEET.md "TLS"): Debian's hiredis
/// 0.14 has no TLS, so roombot talks plain Redis to a local stunnel client,
/// which speaks TLS (verifying the server's certificate) to a stunnel server
/// in front of redis-server. The client authenticates through the tunnel,
/// and the tunnel's public port does not answer plain Redis.
/// stunnel4 comes with `make bootstrap`.
final class RedisTunnelTests: XCTestCase {
    private var children: [Process] = []
    private var directory = ""

    override func tearDown() {
        for child in children where child.isRunning { child.terminate(); child.waitUntilExit() }
        try? FileManager.default.removeItem(atPath: directory)
    }

    private func stunnel(_ name: String, _ config: String) throws {
        let path = "\(directory)/\(name).conf"
        try ("foreground = yes\npid =\noutput = \(directory)/\(name).log\n" + config).write(toFile: path, atomically: true, encoding: .utf8)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/stunnel4")
        process.arguments = [path]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        children.append(process)
    }

    private func waitListening(_ port: Int) {
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline {
            if let fd = connectLoopback(port: port) { close(fd); return }
            usleep(20_000)
        }
        XCTFail("nothing listens on \(port)")
    }

    func testRedisThroughAStunnelTLSTunnel_authenticatesAndAnswers_andTheTLSPortRefusesPlainRedis() throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/stunnel4") else {
            throw XCTSkip("stunnel4 is not installed: run `make bootstrap` (Debian's stunnel4)")
        }
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("tunnel-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let openssl = Process()
        openssl.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        openssl.arguments = ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=localhost",
                             "-addext", "subjectAltName=DNS:localhost", "-keyout", "\(directory)/key.pem", "-out", "\(directory)/cert.pem"]
        openssl.standardOutput = FileHandle.nullDevice
        openssl.standardError = FileHandle.nullDevice
        try openssl.run()
        openssl.waitUntilExit()
        XCTAssertEqual(openssl.terminationStatus, 0)

        let redis = RedisProcess(arguments: ["--requirepass", "tunnel-pass"])
        try redis.start()
        defer { redis.kill9() }
        let tlsPort = freePort()
        let localPort = freePort()
        try stunnel("server", """
            [redis-tls]
            accept = 127.0.0.1:\(tlsPort)
            connect = 127.0.0.1:\(redis.port)
            cert = \(directory)/cert.pem
            key = \(directory)/key.pem

            """)
        try stunnel("client", """
            [redis]
            client = yes
            accept = 127.0.0.1:\(localPort)
            connect = 127.0.0.1:\(tlsPort)
            verifyChain = yes
            CAfile = \(directory)/cert.pem
            checkHost = localhost

            """)
        waitListening(tlsPort)
        waitListening(localPort)

        // The TLS side does not speak plain Redis.
        XCTAssertFalse(rawExchange(port: tlsPort, "PING\r\n", timeout: 1).contains("PONG"))

        let loop = try EventLoop(name: "redis-tunnel")
        defer { try? loop.shutdown() }
        let endpoint = try XCTUnwrap(RedisEndpoint(url: "redis://:tunnel-pass@127.0.0.1:\(localPort)/0"))
        let client = try loop.runAndWait {
            let client = RedisClient(loop: loop, endpoint: endpoint, logger: Logger(label: "redis-tunnel"))
            try client.start()
            return client
        }
        defer { try? loop.runAndWait { client.close() } }
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline, try !loop.runAndWait({ client.isConnected }) { usleep(20_000) }
        XCTAssertTrue(try loop.runAndWait { client.isConnected }, fileText("\(directory)/client.log") ?? "")
        let reply = LockedValue<String?>(nil)
        let done = DispatchSemaphore(value: 0)
        _ = loop.execute {
            client.command(["SET", "through", "tls"]) { _ in
                client.command(["GET", "through"]) { result in
                    reply.withLock { $0 = (try? result.get())?.string }
                    done.signal()
                }
            }
        }
        XCTAssertEqual(done.wait(timeout: .now() + 5), .success)
        XCTAssertEqual(reply.withLock { $0 }, "tls")
        XCTAssertEqual(redis.cli(["-a", "tunnel-pass", "--no-auth-warning", "GET", "through"]).trimmingCharacters(in: .whitespacesAndNewlines),
                       "\"tls\"", "the value reached the real server")
    }
}
