import CRoomKitPluginWire
import Foundation
@testable import RoomKitPluginHost
import XCTest

/// One frame read from a child: its type and body.
struct TestFrame {
    let type: UInt8
    let body: [UInt8]

    /// Reads the body with `read`, failing the test when it does not parse exactly.
    func parse<T>(_ read: (inout WireReader) -> T, file: StaticString = #filePath, line: UInt = #line) -> T {
        body.withUnsafeBytes { raw in
            var reader = WireReader(raw)
            let value = read(&reader)
            XCTAssertTrue(reader.complete, "frame \(type) has a body that does not parse exactly", file: file, line: line)
            return value
        }
    }
}

/// A wire child started by a test that plays the bot's side of
/// docs/PLUGIN-WIRE.md over a real socketpair: no roombot involved.
final class WireTestChild {
    let pid: pid_t
    let socket: Int32
    private var buffer: [UInt8] = []
    let stderrPipe: Int32

    /// Spawns `command` (argv) with the bot's environment for `plugin`, `versions` offered.
    init(_ command: [String], versions: String = ROOMKIT_WIRE_VERSIONS_OFFERED, extraEnvironment: [String: String] = [:],
         directory: String? = nil) throws {
        var pair: [Int32] = [-1, -1], out: [Int32] = [-1, -1]
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &pair) == 0,
              roomkit_wire_pipe(&out) == 0 else { throw XCTSkip("socketpair/pipe failed") }
        var environment = PluginEnvironment.forChild(plugin: "conformance", progressPage: false)
            .filter { !$0.hasPrefix("ROOMKIT_WIRE_VERSIONS=") } + ["ROOMKIT_WIRE_VERSIONS=\(versions)"]
        environment += extraEnvironment.map { "\($0.key)=\($0.value)" }
        let argv = command.map { strdup($0) } + [nil]
        let envp = environment.map { strdup($0) } + [nil]
        defer { for pointer in argv + envp { free(pointer) } }
        let pid = roomkit_wire_spawn(command[0], argv, envp, directory, pair[1], -1, out[1], out[1])
        close(pair[1])
        close(out[1])
        guard pid > 0 else { throw XCTSkip("cannot spawn \(command[0]): \(String(cString: strerror(-pid)))") }
        self.pid = pid
        socket = pair[0]
        stderrPipe = out[0]
    }

    deinit {
        Foundation.kill(pid, SIGKILL)
        var signal: Int32 = 0, code: Int32 = 0
        _ = roomkit_wire_reap(pid, 1, &signal, &code)
        close(socket)
        close(stderrPipe)
    }

    /// Sends raw bytes.
    func sendBytes(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { raw in
            var sent = 0
            while sent < raw.count {
                let n = Foundation.send(socket, raw.baseAddress! + sent, raw.count - sent, Int32(MSG_NOSIGNAL))
                if n <= 0 { return }
                sent += n
            }
        }
    }

    func send(_ frame: WireFrame) { sendBytes(frame.finished) }

    /// The next frame within `timeout` seconds; nil on EOF or timeout.
    func next(timeout: Double = 10) -> TestFrame? {
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            if buffer.count >= 5 {
                let length = Int(UInt32(buffer[0]) | UInt32(buffer[1]) << 8 | UInt32(buffer[2]) << 16 | UInt32(buffer[3]) << 24)
                if length >= 1, buffer.count >= 4 + length {
                    let frame = TestFrame(type: buffer[4], body: Array(buffer[5..<(4 + length)]))
                    buffer.removeFirst(4 + length)
                    return frame
                }
            }
            let left = deadline.timeIntervalSinceNow
            guard left > 0 else { return nil }
            var fd = pollfd(fd: socket, events: Int16(POLLIN), revents: 0)
            guard poll(&fd, 1, Int32(left * 1000) + 1) > 0 else { continue }
            var chunk = [UInt8](repeating: 0, count: 65536)
            let n = chunk.withUnsafeMutableBytes { read(socket, $0.baseAddress!, $0.count) }
            guard n > 0 else { return nil }
            buffer.append(contentsOf: chunk[0..<n])
        }
    }

    /// The next frame of `type`, skipping LOG frames (collected in `logs`) but failing on any other.
    func expect(_ type: roomkit_wire_up, logs: inout [(Int32, String)], timeout: Double = 10,
                file: StaticString = #filePath, line: UInt = #line) -> TestFrame? {
        while let frame = next(timeout: timeout) {
            if frame.type == UInt8(ROOMKIT_WIRE_LOG.rawValue), type != ROOMKIT_WIRE_LOG {
                logs.append(frame.parse { ($0.i32(), $0.string() ?? "") })
                continue
            }
            if frame.type == UInt8(ROOMKIT_WIRE_DONE.rawValue), type != ROOMKIT_WIRE_DONE { continue }
            XCTAssertEqual(frame.type, UInt8(type.rawValue), "expected frame \(type.rawValue)", file: file, line: line)
            return frame
        }
        XCTFail("no frame \(type.rawValue) within \(timeout) s (the child closed the socket or was silent)", file: file, line: line)
        return nil
    }

    /// Waits for the exit: (signal, exit code), nil after `timeout` seconds.
    func waitExit(timeout: Double = 10) -> (signal: Int32, code: Int32)? {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            var signal: Int32 = 0, code: Int32 = 0
            if roomkit_wire_reap(pid, 0, &signal, &code) == 1 { return (signal, code) }
            usleep(10_000)
        }
        return nil
    }

    /// What the child printed on stdout and stderr so far (non-blocking).
    func output() -> String {
        _ = fcntl(stderrPipe, F_SETFL, O_NONBLOCK)
        var text = [UInt8]()
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = chunk.withUnsafeMutableBytes { read(stderrPipe, $0.baseAddress!, $0.count) }
            if n <= 0 { break }
            text += chunk[0..<n]
        }
        return String(decoding: text, as: UTF8.self)
    }
}

/// Frames the tests send, as the bot encodes them.
enum BotFrames {
    static func load(_ config: String, timeoutMs: UInt32 = 1000) -> WireFrame {
        var frame = WireFrame(UInt8(ROOMKIT_WIRE_LOAD.rawValue))
        frame.u32(timeoutMs)
        frame.string(config)
        return frame
    }

    /// EVENTS with records (type, seq, number, a, b).
    static func events(_ records: [(roomkit_wire_record, UInt64, Int64, String?, String)]) -> WireFrame {
        var frame = WireFrame(UInt8(ROOMKIT_WIRE_EVENTS.rawValue))
        frame.u32(UInt32(records.count))
        for (type, seq, number, a, b) in records {
            frame.u8(UInt8(type.rawValue))
            frame.u64(seq)
            frame.u64(UInt64(bitPattern: number))
            frame.string(a)
            frame.string(b)
        }
        return frame
    }

    static func url(_ request: UInt64, _ url: String, deadlineUs: UInt32 = 1_000_000) -> WireFrame {
        var frame = WireFrame(UInt8(ROOMKIT_WIRE_URL.rawValue))
        frame.u64(request)
        frame.u32(deadlineUs)
        frame.string(url)
        return frame
    }

    static func reply(_ request: UInt64, result: Int32, text: String?) -> WireFrame {
        var frame = WireFrame(UInt8(ROOMKIT_WIRE_REPLY.rawValue))
        frame.u64(request)
        frame.i32(result)
        frame.string(text)
        return frame
    }

    static func u64(_ type: roomkit_wire_down, _ value: UInt64) -> WireFrame {
        var frame = WireFrame(UInt8(type.rawValue))
        frame.u64(value)
        return frame
    }

    static func importState(_ request: UInt64, _ state: String) -> WireFrame {
        var frame = u64(ROOMKIT_WIRE_IMPORT_STATE, request)
        frame.string(state)
        return frame
    }
}
