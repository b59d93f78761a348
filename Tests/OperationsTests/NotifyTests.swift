import Foundation
import RoomKitTestSupport
import XCTest

/// systemd `Type=notify` without libsystemd: roomd and roombot send
/// `READY=1` once started and `STOPPING=1` on SIGTERM, as datagrams to the
/// unix socket in `$NOTIFY_SOCKET`. The test plays systemd's part.
final class NotifyTests: XCTestCase {
    /// A bound unix datagram socket collecting what services send it.
    final class NotifySocket {
        let fd: Int32
        let path: String

        /// `abstract`: a name in the abstract namespace (`@…`) instead of a file.
        init(abstract: Bool = false) throws {
            fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0)
            guard fd >= 0 else { throw XCTSkip("no unix datagram sockets here") }
            let name = "rk-notify-\(UUID().uuidString.prefix(8))"
            path = abstract ? "@" + name : NSTemporaryDirectory() + name
            var address = sockaddr_un()
            address.sun_family = sa_family_t(AF_UNIX)
            var bytes = Array(path.utf8)
            if abstract { bytes[0] = 0 }
            withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: bytes) }
            let length = socklen_t(MemoryLayout<sockaddr_un>.offset(of: \.sun_path)! + bytes.count + (abstract ? 0 : 1))
            let bound = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) }
            }
            XCTAssertEqual(bound, 0, "bind \(path): \(String(cString: strerror(errno)))")
            var timeout = timeval(tv_sec: 0, tv_usec: 100_000)
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        }

        /// Datagrams received until `predicate` holds for the list or `timeout` passes.
        func receive(until predicate: ([String]) -> Bool, timeout: TimeInterval = 20) -> [String] {
            var messages: [String] = []
            let deadline = Date().addingTimeInterval(timeout)
            var buffer = [UInt8](repeating: 0, count: 4096)
            while Date() < deadline && !predicate(messages) {
                let n = recv(fd, &buffer, buffer.count, 0)
                if n > 0 { messages.append(String(decoding: buffer[0..<n], as: UTF8.self)) }
            }
            return messages
        }

        deinit {
            close(fd)
            if !path.hasPrefix("@") { unlink(path) }
        }
    }

    private func count(_ assignment: String, in messages: [String]) -> Int {
        messages.filter { $0.split(separator: "\n").contains(Substring(assignment)) }.count
    }

    private func assertReadyThenStopping(_ child: Spawned, socket: NotifySocket, status: String, beforeStop: String? = nil,
                                         file: StaticString = #filePath, line: UInt = #line) {
        var started = socket.receive(until: { self.count("READY=1", in: $0) > 0 })
        XCTAssertEqual(count("READY=1", in: started), 1, "\(started); stderr: \(child.stderr)", file: file, line: line)
        XCTAssertTrue(started.contains { $0.contains("STATUS=\(status)") }, "\(started)", file: file, line: line)
        if let beforeStop {
            started += socket.receive(until: { $0.contains { $0.contains(beforeStop) } })
            XCTAssertTrue(started.contains { $0.contains(beforeStop) }, "\(started)", file: file, line: line)
        }
        XCTAssertEqual(count("STOPPING=1", in: started), 0, file: file, line: line)
        child.signal(SIGTERM)
        let exit = child.finish()
        XCTAssertEqual(exit.status, 0, exit.stderr, file: file, line: line)
        // Everything sent after READY, up to the exit (the socket keeps the datagrams).
        let rest = socket.receive(until: { _ in false }, timeout: 0.3)
        XCTAssertEqual(count("STOPPING=1", in: rest), 1, "\(rest)", file: file, line: line)
        XCTAssertEqual(count("READY=1", in: rest), 0, "READY=1 once only: \(rest)", file: file, line: line)
    }

    func testRoomd_underNotifySocket_sendsReadyOnceListeningAndStoppingOnSIGTERM() throws {
        let socket = try NotifySocket()
        let data = try temporaryDirectory("notify-roomd")
        defer { try? FileManager.default.removeItem(atPath: data) }
        let roomd = try startProduct("roomd", ["serve", "--listen", "127.0.0.1:0", "--data", data],
                                     environment: ["ROOMD_SECRET": "s", "NOTIFY_SOCKET": socket.path])
        assertReadyThenStopping(roomd, socket: socket, status: "listening on 127.0.0.1:")
        XCTAssertTrue(roomd.stdout.hasPrefix("listening on 127.0.0.1:"), roomd.stdout)
    }

    func testRoombot_underAbstractNotifySocket_sendsReadyAfterLoginsAndStoppingOnSIGTERM() throws {
        let roomd = RoomdProcess(secret: "notify-secret")
        try roomd.start()
        defer { roomd.stop() }
        let directory = try temporaryDirectory("notify-bot")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try """
            {"server": "ws://127.0.0.1:\(roomd.port)/v1/rooms", "user": {"id": "bot-n"},
             "auth": {"secret": "notify-secret"}, "rooms": ["lobby", "hall"]}
            """.write(toFile: directory + "/bot.json", atomically: true, encoding: .utf8)
        let socket = try NotifySocket(abstract: true)
        let bot = try startProduct("roombot", ["run", "--config", directory + "/bot.json"],
                                   environment: ["NOTIFY_SOCKET": socket.path])
        // READY once the control API serves (the rooms join in the background,
        // retried for up to the reconnect window: too long for a start timeout),
        // then a STATUS once both rooms are in.
        assertReadyThenStopping(bot, socket: socket, status: "control API up; joining 2 configured rooms",
                                beforeStop: "STATUS=2 of 2 rooms logged in")
    }
}
