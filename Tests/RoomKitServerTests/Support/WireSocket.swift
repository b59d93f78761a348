import Foundation
import XCTest

/// A minimal blocking WebSocket client on a raw TCP socket, for checks the
/// loop's client cannot make: libwebsockets 4.1's client parser rewrites a
/// received close code in 1012–2999 (such as 1013) to 1002, so the code the
/// server actually sent is read here, off the wire; and a hostile client
/// sends frames the loop's client never would (invalid UTF-8, reserved
/// opcodes, unmasked or fragmented frames). One thread at a time.
final class WireSocket {
    /// The answer to an upgrade request.
    enum Upgrade {
        /// 101: the socket is a WebSocket now.
        case open(WireSocket)
        /// Any other HTTP answer: its status and its whole text (head and body).
        case refused(status: Int, text: String)
        /// No HTTP answer at all (connect failed, reset, timeout).
        case failed(String)
    }

    /// A frame the server sent.
    enum Frame: Equatable {
        case text(String)
        case binary([UInt8])
        case close(UInt16?)
        case control(opcode: UInt8)
    }

    /// The socket; -1 once handed to another instance.
    private var fd: Int32
    private var buffer: [UInt8]
    /// Set once a close frame arrived or the peer closed the TCP connection.
    private(set) var isClosed = false

    private init(fd: Int32, buffer: [UInt8]) {
        self.fd = fd
        self.buffer = buffer
    }

    /// Connects to 127.0.0.1:`port` and upgrades on /v1/rooms offering room.v1;
    /// fails the test and throws unless the server answers 101.
    convenience init(port: Int, file: StaticString = #filePath, line: UInt = #line) throws {
        switch Self.upgrade(port: port) {
        case .open(let socket):
            let (fd, buffer) = socket.surrender()
            self.init(fd: fd, buffer: buffer)
        case .refused(let status, let text):
            XCTFail("upgrade refused with \(status): \(text)", file: file, line: line)
            throw TestTimeout(description: "upgrade refused")
        case .failed(let why):
            XCTFail("no upgrade: \(why)", file: file, line: line)
            throw TestTimeout(description: "no upgrade")
        }
    }

    /// Connects to 127.0.0.1:`port` (from the local address `source`, e.g.
    /// another loopback address such as 127.0.0.2, when given) and asks for
    /// the room.v1 upgrade on /v1/rooms.
    static func upgrade(port: Int, from source: String? = nil, timeout: TimeInterval = 5) -> Upgrade {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return .failed("socket: \(String(cString: strerror(errno)))") }
        var tv = timeval(tv_sec: 0, tv_usec: 100_000)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        if let source {
            var local = sockaddr_in()
            local.sin_family = sa_family_t(AF_INET)
            local.sin_addr.s_addr = inet_addr(source)
            let bound = withUnsafePointer(to: &local) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            guard bound == 0 else {
                close(fd)
                return .failed("bind \(source): \(String(cString: strerror(errno)))")
            }
        }
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
            return .failed("connect: \(String(cString: strerror(errno)))")
        }
        let socket = WireSocket(fd: fd, buffer: [])
        let handshake = "GET /v1/rooms HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
            + "Sec-WebSocket-Protocol: room.v1\r\n\r\n"
        socket.write(Array(handshake.utf8))
        let deadline = Date().addingTimeInterval(timeout)
        let separator: [UInt8] = [13, 10, 13, 10]
        while Date() < deadline {
            if let end = socket.buffer.indices.first(where: { socket.buffer[$0...].starts(with: separator) }) {
                let head = String(decoding: socket.buffer[..<end], as: UTF8.self)
                if head.hasPrefix("HTTP/1.1 101") {
                    socket.buffer.removeFirst(end + 4)
                    return .open(socket)
                }
                // A refusal: read its body until the server closes (or briefly).
                let bodyDeadline = min(deadline, Date().addingTimeInterval(1))
                while Date() < bodyDeadline, socket.fill(), !socket.isClosed {}
                let status = Int(head.split(separator: " ").dropFirst().first ?? "") ?? 0
                return .refused(status: status, text: String(decoding: socket.buffer, as: UTF8.self))
            }
            if !socket.fill() || socket.isClosed {
                return .failed("closed before answering: '\(String(decoding: socket.buffer, as: UTF8.self))'")
            }
        }
        return .failed("no answer within \(timeout) s")
    }

    deinit {
        if fd >= 0 { close(fd) }
    }

    /// Hands the descriptor and unread bytes to a new owner (this one no longer closes it).
    private func surrender() -> (Int32, [UInt8]) {
        defer { fd = -1 }
        return (fd, buffer)
    }

    // MARK: Sending

    /// Sends a masked text frame.
    func sendText(_ text: String) {
        sendFrame(opcode: 0x1, Array(text.utf8))
    }

    /// Sends a masked text frame holding `bytes` as they are (they need not be UTF-8).
    func sendText(bytes: [UInt8]) {
        sendFrame(opcode: 0x1, bytes)
    }

    /// Sends a masked binary frame.
    func sendBinary(_ bytes: [UInt8]) {
        sendFrame(opcode: 0x2, bytes)
    }

    /// Sends a masked ping control frame.
    func sendPing(_ payload: [UInt8] = [1, 2, 3]) {
        sendFrame(opcode: 0x9, payload)
    }

    /// Sends a close frame with `code`.
    func sendClose(_ code: UInt16 = 1000) {
        sendFrame(opcode: 0x8, [UInt8(code >> 8), UInt8(code & 0xFF)])
    }

    /// Sends one frame as told: `fin`, reserved bits `rsv` (0–7), masked or
    /// not. A claimed `length` other than the payload's makes a lying header.
    func sendFrame(opcode: UInt8, _ payload: [UInt8], fin: Bool = true, rsv: UInt8 = 0, masked: Bool = true,
                   claimedLength: Int? = nil) {
        write(Self.frame(opcode: opcode, payload, fin: fin, rsv: rsv, masked: masked, claimedLength: claimedLength))
    }

    /// The bytes of one client frame (see `sendFrame`).
    static func frame(opcode: UInt8, _ payload: [UInt8], fin: Bool = true, rsv: UInt8 = 0, masked: Bool = true,
                      claimedLength: Int? = nil) -> [UInt8] {
        let length = claimedLength ?? payload.count
        var frame: [UInt8] = [(fin ? 0x80 : 0) | (rsv & 7) << 4 | (opcode & 0x0F)]
        let maskBit: UInt8 = masked ? 0x80 : 0
        if length < 126 {
            frame.append(maskBit | UInt8(length))
        } else if length <= 0xFFFF {
            frame.append(maskBit | 126)
            frame += [UInt8(length >> 8), UInt8(length & 0xFF)]
        } else {
            frame.append(maskBit | 127)
            frame += (0..<8).reversed().map { UInt8((length >> ($0 * 8)) & 0xFF) }
        }
        frame.reserveCapacity(frame.count + 4 + payload.count)
        if masked {
            let mask: [UInt8] = [0x37, 0xFA, 0x21, 0x3D]
            frame += mask
            for (offset, byte) in payload.enumerated() { frame.append(byte ^ mask[offset & 3]) }
        } else {
            frame += payload
        }
        return frame
    }

    // MARK: Reading

    /// Reads frames until a close frame (its code, or nil without one),
    /// EOF, or `timeout`. Text frames read on the way go to `texts`.
    func readUntilClose(timeout: TimeInterval = 5) -> (code: UInt16?, texts: [String], closed: Bool) {
        var texts: [String] = []
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if let frame = nextFrame() {
                switch frame {
                case .text(let text): texts.append(text)
                case .close(let code): return (code, texts, true)
                default: break
                }
                continue
            }
            if !fill() || isClosed { return (nil, texts, true) }
        }
        return (nil, texts, false)
    }

    /// Reads frames until a text frame arrives; returns it.
    func readText(timeout: TimeInterval = 5) -> String? {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if let frame = nextFrame() {
                if case .text(let text) = frame { return text }
                if case .close = frame { return nil }
                continue
            }
            if !fill() || isClosed { return nil }
        }
        return nil
    }

    /// Reads what is available now (waiting at most `wait` ms for the first
    /// byte) and returns the whole frames read. After a close frame, or
    /// when the peer dropped the connection, `isClosed` is true.
    func readAvailable(waitMilliseconds wait: Int32 = 100) -> [Frame] {
        if !isClosed { fill(waitMilliseconds: wait) }
        var frames: [Frame] = []
        while let frame = nextFrame() { frames.append(frame) }
        return frames
    }

    /// One whole unmasked frame from the buffer, if it holds one.
    private func nextFrame() -> Frame? {
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
        switch opcode {
        case 0x1: return .text(String(decoding: payload, as: UTF8.self))
        case 0x2: return .binary(payload)
        case 0x8:
            isClosed = true
            return .close(payload.count >= 2 ? UInt16(payload[0]) << 8 | UInt16(payload[1]) : nil)
        default: return .control(opcode: opcode)
        }
    }

    /// Reads what is available, waiting up to `wait` ms for it; false on
    /// EOF or error (not on a timeout).
    @discardableResult
    private func fill(waitMilliseconds wait: Int32 = 100) -> Bool {
        var ready = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        let polled = poll(&ready, 1, wait)
        if polled == 0 { return true }
        if polled < 0 { return errno == EINTR }
        var chunk = [UInt8](repeating: 0, count: 65536)
        let n = recv(fd, &chunk, chunk.count, Int32(MSG_DONTWAIT))
        if n > 0 {
            buffer += chunk[0..<n]
            return true
        }
        if n == 0 || !(errno == EAGAIN || errno == EWOULDBLOCK) {
            isClosed = true
            return false
        }
        return true
    }

    /// Writes all of `bytes` (stops quietly when the peer is gone).
    func write(_ bytes: [UInt8]) {
        var sent = 0
        while sent < bytes.count {
            let n = bytes[sent...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n <= 0 { return }
            sent += n
        }
    }
}
