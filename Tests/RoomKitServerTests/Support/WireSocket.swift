import Foundation
import XCTest

/// A minimal blocking WebSocket client on a raw TCP socket, for checks the
/// loop's client cannot make: libwebsockets 4.1's client parser rewrites a
/// received close code in 1012–2999 (such as 1013) to 1002, so the code the
/// server actually sent is read here, off the wire.
final class WireSocket {
    private let fd: Int32
    private var buffer: [UInt8] = []

    /// Connects to 127.0.0.1:`port`, upgrades on /v1/rooms offering room.v1.
    init(port: Int, file: StaticString = #filePath, line: UInt = #line) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var tv = timeval(tv_sec: 0, tv_usec: 100_000)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0 else {
            close(fd)
            XCTFail("cannot connect to \(port)", file: file, line: line)
            throw TestTimeout(description: "cannot connect")
        }
        let handshake = "GET /v1/rooms HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
            + "Sec-WebSocket-Protocol: room.v1\r\n\r\n"
        write(Array(handshake.utf8))
        let deadline = Date().addingTimeInterval(5)
        let separator: [UInt8] = [13, 10, 13, 10]
        while Date() < deadline {
            if let end = buffer.indices.first(where: { buffer[$0...].starts(with: separator) }) {
                let head = String(decoding: buffer[..<end], as: UTF8.self)
                buffer.removeFirst(end + 4)
                guard head.hasPrefix("HTTP/1.1 101") else {
                    close(fd)
                    XCTFail("upgrade refused: \(head)", file: file, line: line)
                    throw TestTimeout(description: "upgrade refused")
                }
                return
            }
            fill()
        }
        close(fd)
        XCTFail("no upgrade answer", file: file, line: line)
        throw TestTimeout(description: "no upgrade answer")
    }

    deinit {
        close(fd)
    }

    /// Sends a masked text frame.
    func sendText(_ text: String) {
        sendFrame(opcode: 0x1, Array(text.utf8))
    }

    /// Sends a masked ping control frame.
    func sendPing(_ payload: [UInt8] = [1, 2, 3]) {
        sendFrame(opcode: 0x9, payload)
    }

    private func sendFrame(opcode: UInt8, _ payload: [UInt8]) {
        var frame: [UInt8] = [0x80 | opcode]
        if payload.count < 126 {
            frame.append(0x80 | UInt8(payload.count))
        } else if payload.count <= 0xFFFF {
            frame.append(0x80 | 126)
            frame += [UInt8(payload.count >> 8), UInt8(payload.count & 0xFF)]
        } else {
            frame.append(0x80 | 127)
            frame += (0..<8).reversed().map { UInt8((payload.count >> ($0 * 8)) & 0xFF) }
        }
        let mask: [UInt8] = [0x37, 0xFA, 0x21, 0x3D]
        frame += mask
        frame += payload.enumerated().map { $0.element ^ mask[$0.offset % 4] }
        write(frame)
    }

    /// Reads frames until a close frame (its code, or nil without one),
    /// EOF, or `timeout`. Text frames read on the way go to `texts`.
    func readUntilClose(timeout: TimeInterval = 5) -> (code: UInt16?, texts: [String], closed: Bool) {
        var texts: [String] = []
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if let (opcode, payload) = nextFrame() {
                switch opcode {
                case 0x1: texts.append(String(decoding: payload, as: UTF8.self))
                case 0x8:
                    let code = payload.count >= 2 ? UInt16(payload[0]) << 8 | UInt16(payload[1]) : nil
                    return (code, texts, true)
                default: break
                }
                continue
            }
            if !fill() { return (nil, texts, true) }
        }
        return (nil, texts, false)
    }

    /// Reads frames until a text frame arrives; returns it.
    func readText(timeout: TimeInterval = 5) -> String? {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if let (opcode, payload) = nextFrame() {
                if opcode == 0x1 { return String(decoding: payload, as: UTF8.self) }
                continue
            }
            if !fill() { return nil }
        }
        return nil
    }

    /// One whole unmasked frame from the buffer, if it holds one.
    private func nextFrame() -> (UInt8, [UInt8])? {
        guard buffer.count >= 2 else { return nil }
        let opcode = buffer[0] & 0x0F
        var length = Int(buffer[1] & 0x7F)
        var offset = 2
        if length == 126 {
            guard buffer.count >= 4 else { return nil }
            length = Int(buffer[2]) << 8 | Int(buffer[3])
            offset = 4
        } else if length == 127 {
            guard buffer.count >= 10 else { return nil }
            length = (2..<10).reduce(0) { $0 << 8 | Int(buffer[$1]) }
            offset = 10
        }
        guard buffer.count >= offset + length else { return nil }
        let payload = Array(buffer[offset..<(offset + length)])
        buffer.removeFirst(offset + length)
        return (opcode, payload)
    }

    /// Reads what is available; false on EOF or error (not on a timeout).
    @discardableResult
    private func fill() -> Bool {
        var chunk = [UInt8](repeating: 0, count: 65536)
        let n = recv(fd, &chunk, chunk.count, 0)
        if n > 0 {
            buffer += chunk[0..<n]
            return true
        }
        return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)
    }

    private func write(_ bytes: [UInt8]) {
        var sent = 0
        while sent < bytes.count {
            let n = bytes[sent...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n <= 0 { return }
            sent += n
        }
    }
}
