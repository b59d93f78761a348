import Foundation
import RoomKitTestSupport
import XCTest

/// The fault proxy itself, over plain TCP to an echo server: each fault does
/// what it says, and bytes arrive intact and in order.
final class FaultProxyTests: XCTestCase {
    /// Echoes every byte back on each accepted connection, one thread each.
    final class EchoServer: @unchecked Sendable {
        let port: Int
        private let listener: Int32

        init() {
            (listener, port) = listenLoopback()
            Thread.detachNewThread { [listener] in
                while true {
                    let fd = accept(listener, nil, nil)
                    if fd < 0 { return }
                    Thread.detachNewThread {
                        var buffer = [UInt8](repeating: 0, count: 65536)
                        while true {
                            let n = recv(fd, &buffer, buffer.count, 0)
                            if n <= 0 { break }
                            var sent = 0
                            while sent < n {
                                let m = buffer.withUnsafeBytes { send(fd, $0.baseAddress! + sent, n - sent, Int32(MSG_NOSIGNAL)) }
                                if m <= 0 { break }
                                sent += m
                            }
                        }
                        close(fd)
                    }
                }
            }
        }

        func stop() {
            shutdown(listener, Int32(SHUT_RDWR))
            close(listener)
        }
    }

    private var echo: EchoServer!
    private var proxy: FaultProxy!

    override func setUp() {
        echo = EchoServer()
        proxy = FaultProxy(targetPort: echo.port)
    }

    override func tearDown() {
        proxy.stop()
        echo.stop()
    }

    /// Sends `bytes`, reads the same number back (or fewer on error/timeout).
    private func roundTrip(_ fd: Int32, _ bytes: [UInt8]) -> [UInt8] {
        let writer = Thread {
            var sent = 0
            while sent < bytes.count {
                let m = bytes.withUnsafeBytes { send(fd, $0.baseAddress! + sent, bytes.count - sent, Int32(MSG_NOSIGNAL)) }
                if m <= 0 { return }
                sent += m
            }
        }
        writer.start()
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while received.count < bytes.count {
            let n = recv(fd, &buffer, buffer.count, 0)
            if n <= 0 { break }
            received.append(contentsOf: buffer[0..<n])
        }
        return received
    }

    private func payload(_ count: Int) -> [UInt8] {
        var generator = SystemRandomNumberGenerator()
        return (0..<count).map { _ in UInt8.random(in: 0...255, using: &generator) }
    }

    func testPass_forwardsBytesIntactBothWays() throws {
        let fd = try XCTUnwrap(connectLoopback(port: proxy.port))
        defer { close(fd) }
        let bytes = payload(300_000)
        XCTAssertEqual(roundTrip(fd, bytes), bytes)
        XCTAssertEqual(proxy.stats.bytesForwarded, 600_000)
    }

    func testLatency_isAddedToEachDirection() throws {
        proxy.setFaults(.init(latency: .milliseconds(150)))
        let fd = try XCTUnwrap(connectLoopback(port: proxy.port))
        defer { close(fd) }
        let start = Date()
        XCTAssertEqual(roundTrip(fd, Array("ping".utf8)), Array("ping".utf8))
        let elapsed = Date().timeIntervalSince(start)
        XCTAssertGreaterThanOrEqual(elapsed, 0.3, "one round trip crosses the proxy twice")
        proxy.setFaults(.none)
        let again = Date()
        XCTAssertEqual(roundTrip(fd, Array("pong".utf8)), Array("pong".utf8))
        XCTAssertLessThan(Date().timeIntervalSince(again), 0.3, "latency removed for new bytes")
    }

    func testSlicing_forwardsInWritesOfAtMostTheSliceSize() throws {
        proxy.setFaults(.init(sliceBytes: 50, sliceGap: .microseconds(200)))
        let fd = try XCTUnwrap(connectLoopback(port: proxy.port))
        defer { close(fd) }
        let bytes = payload(5_000)
        XCTAssertEqual(roundTrip(fd, bytes), bytes, "reassembled intact")
        // The pump counts a flush after its send(2): the echo can arrive before the count.
        let deadline = Date().addingTimeInterval(2)
        while proxy.stats.bytesForwarded < 10_000 && Date() < deadline { usleep(1_000) }
        let stats = proxy.stats
        XCTAssertEqual(stats.bytesForwarded, 10_000)
        XCTAssertGreaterThanOrEqual(stats.writes, 200, "10,000 bytes in slices of 50 need at least 200 writes")
    }

    func testBandwidthLimit_capsBytesPerSecondInEachDirection() throws {
        proxy.setFaults(.init(bytesPerSecond: 100_000))
        let fd = try XCTUnwrap(connectLoopback(port: proxy.port))
        defer { close(fd) }
        let bytes = payload(200_000)
        let start = Date()
        XCTAssertEqual(roundTrip(fd, bytes), bytes)
        // Each direction may start with a 5,000-byte bucket; the rest is paced.
        XCTAssertGreaterThanOrEqual(Date().timeIntervalSince(start), 1.9, "200 kB at 100 kB/s takes about 2 s")
    }

    func testBlackhole_forwardsNothingButKeepsTheSocketOpen_thenDeliversWhenLifted() throws {
        let fd = try XCTUnwrap(connectLoopback(port: proxy.port, receiveTimeout: 0.3))
        defer { close(fd) }
        XCTAssertEqual(roundTrip(fd, [1]), [1])
        proxy.setMode(.blackhole)
        usleep(20_000)
        XCTAssertEqual(roundTrip(fd, [2, 3]), [], "nothing comes back while blackholed")
        XCTAssertEqual(proxy.openConnections, 1, "the connection stays open")
        proxy.setMode(.pass)
        var buffer = [UInt8](repeating: 0, count: 16)
        let n = recv(fd, &buffer, buffer.count, 0)
        XCTAssertEqual(Array(buffer[0..<max(n, 0)]), [2, 3], "held bytes flow once the partition heals")
    }

    func testCut_resetsOpenConnections_andDownRefusesNewOnes() throws {
        let fd = try XCTUnwrap(connectLoopback(port: proxy.port))
        defer { close(fd) }
        XCTAssertEqual(roundTrip(fd, [7]), [7])
        proxy.cut()
        var buffer = [UInt8](repeating: 0, count: 16)
        let n = recv(fd, &buffer, buffer.count, 0)
        XCTAssertEqual(n, -1, "a reset, not a clean end")
        XCTAssertEqual(errno, ECONNRESET)
        XCTAssertEqual(proxy.openConnections, 0)

        proxy.setMode(.down)
        let refused = try XCTUnwrap(connectLoopback(port: proxy.port))
        defer { close(refused) }
        XCTAssertLessThanOrEqual(recv(refused, &buffer, buffer.count, 0), 0, "refused at once")
        XCTAssertEqual(proxy.stats.refused, 1)
        proxy.setMode(.pass)
        let fresh = try XCTUnwrap(connectLoopback(port: proxy.port))
        defer { close(fresh) }
        XCTAssertEqual(roundTrip(fresh, [9]), [9])
    }
}
