import Foundation
import RoomKitTestSupport
import XCTest

/// Issue 27 §3: with `ulimit -n 256` and 400 connections, roomd logged
/// "accept: errno 24" 203,973 times in 10 s. Now lws is told how many
/// sockets it may hold (it stops accepting at that many, until one closes),
/// and a repeated lws line is logged once per interval with a count.
final class DescriptorExhaustionTests: ServerTestCase {
    func testAcceptAtDescriptorExhaustion_logsAtMostOncePerInterval_andServesAgainAfterwards() throws {
        let data = try temporaryDirectory()
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = ["-c", "ulimit -n 256 && exec \"$0\" serve --listen 127.0.0.1:0 --secret s --data \"$1\"",
                             try roomdExecutable(), data]
        let out = Pipe(), err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.run()
        defer { if process.isRunning { kill(process.processIdentifier, SIGKILL); process.waitUntilExit() } }
        let stdout = OutputCollector(out.fileHandleForReading)
        let stderr = OutputCollector(err.fileHandleForReading)
        let port = try poll("roomd's listening line", timeout: 10) { () -> Int? in
            guard let line = stdout.text.split(separator: "\n").first, let colon = line.lastIndex(of: ":") else { return nil }
            return Int(line[line.index(after: colon)...])
        }

        var sockets: [Int32] = []
        defer { sockets.forEach { close($0) } }
        for _ in 0..<400 {
            guard let fd = connectLoopback(port: port, receiveTimeout: 1) else { break }
            sockets.append(fd)
        }
        XCTAssertEqual(sockets.count, 400, "the kernel queues what roomd does not accept")
        Thread.sleep(forTimeInterval: 3)
        let lines = stderr.text.split(separator: "\n")
        let acceptLines = lines.filter { $0.contains("accept") }
        print("DescriptorExhaustionTests: \(acceptLines.count) accept lines, \(lines.count) lines in all, in 3 s")
        XCTAssertLessThanOrEqual(acceptLines.count, 2, "at most one line per 5 s interval: \(acceptLines.prefix(5))")
        XCTAssertLessThan(lines.count, 50, "no flood of any kind: \(lines.prefix(10))")
        XCTAssertTrue(process.isRunning, "roomd survives")

        sockets.forEach { close($0) }
        sockets.removeAll()
        let healthy = try poll("/healthz once the connections are gone", timeout: 30) { () -> Bool? in
            http(port, "GET", "/healthz").1 == "ok" ? true : nil
        }
        XCTAssertTrue(healthy)
    }

    private func poll<T>(_ what: String, timeout: TimeInterval, _ body: () -> T?) throws -> T {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if let value = body() { return value }
            usleep(20_000)
        }
        XCTFail("timed out waiting for \(what)")
        throw TestTimeout(description: "timed out waiting for \(what)")
    }
}
