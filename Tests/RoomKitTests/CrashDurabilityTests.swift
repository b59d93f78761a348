import Foundation
import RoomKit
import RoomKitLoop
import RoomKitProtocol
import RoomKitTokens
@testable import RoomKitServer
import RoomKitTestSupport
import XCTest

/// Crash durability of roomd: SIGKILL at random points while a client writes.
/// Every acknowledged event must be in the recording afterwards, and SQLite's
/// integrity_check must be ok. CRASH_ITERATIONS sets the count (default 10 in
/// CI; the test mode of the reliability issue is 100).
final class CrashDurabilityTests: XCTestCase {
    final class Acks: @unchecked Sendable {
        // @unchecked Sendable: guarded by lock.
        let lock = NSLock()
        var bySeq: [Int64: Int64] = [:]  // seq -> payload number
    }

    func testSIGKILLAtRandomPoints_keepsEveryAcknowledgedEvent_andTheDatabaseIntact() async throws {
        let iterations = Int(ProcessInfo.processInfo.environment["CRASH_ITERATIONS"] ?? "") ?? 10
        let roomd = RoomdProcess(secret: "crash", arguments: ["--rate-limit", "5000", "--rate-limit-burst", "5000"])
        let now = Int64(Date().timeIntervalSince1970)
        let token = TokenSigner(secret: "crash").sign(TokenClaims(sub: "w", room: "*", role: .writer, exp: now + 3600, iat: now))
        let acks = Acks()
        var counter: Int64 = 0
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<iterations {
            try roomd.start()
            let loop = try EventLoop(name: "crash")
            var configuration = RoomHostConfiguration(serverURL: "ws://127.0.0.1:\(roomd.port)/v1/rooms")
            configuration.requestsPerSecond = 2000
            configuration.requestBurst = 500
            let host = try RoomHost(loop: loop, configuration: configuration)
            let room = try await host.loginRoom("ledger", user: LoginUser(id: "w"), token: token)
            let start = counter
            let writer = Task {
                var number = start
                while !Task.isCancelled {
                    number += 1
                    let n = number
                    guard let seq = try? await room.dispatchMagixEvent("n", payload: .int(n)) else { break }
                    acks.lock.withLock { acks.bySeq[seq] = n }
                }
                return number
            }
            try await Task.sleep(for: .milliseconds(Int.random(in: 30...250, using: &generator)))
            roomd.kill9()
            counter = await writer.value
            await host.shutdown()
            try loop.shutdown()
        }

        // Restart once more and read the recording over HTTP.
        try roomd.start()
        let response = httpRequest(port: roomd.port, "GET", "/v1/rooms/ledger/recording", token: token)
        let body = response.components(separatedBy: "\r\n\r\n").dropFirst().joined(separator: "\r\n\r\n")
        var recorded: [Int64: Int64] = [:]
        for line in body.split(separator: "\n").dropFirst() {
            let frame = try JSON.parse(String(line))
            if frame["op"] == "magix", let seq = frame["seq"]?.int64Value {
                recorded[seq] = frame["payload"]?.int64Value
            }
        }
        roomd.stop()
        let acknowledged = acks.lock.withLock { acks.bySeq }
        XCTAssertGreaterThan(acknowledged.count, iterations, "the writer got acknowledgements")
        for (seq, number) in acknowledged {
            XCTAssertEqual(recorded[seq], number, "acknowledged event seq \(seq) is missing or changed after SIGKILL")
        }
        let store = try RoomStore(directory: roomd.dataDirectory)
        XCTAssertEqual(try store.integrityCheck(), "ok")
        store.close()
        print("crash durability: \(iterations) SIGKILLs, \(acknowledged.count) acknowledged events checked, 0 lost, integrity_check ok")
    }
}
