import Foundation
import RoomKitTestSupport

/// A TCP proxy on 127.0.0.1 that injects network faults between a client and
/// a server (this kernel has no netem). Each accepted connection is pumped by
/// its own thread with poll(2).
///
/// Modes: `pass` forwards; `blackhole` keeps sockets open and forwards
/// nothing; `down` refuses new connections (accept, then reset). `cut()`
/// resets every open connection at once.
final class FaultProxy: @unchecked Sendable {
    // @unchecked Sendable: mutable state is guarded by `lock`.
    enum Mode { case pass, blackhole, down }

    let port: Int
    private let target: Int
    private let listener: Int32
    private let lock = NSLock()
    private var mode = Mode.pass
    private var pairs: [(Int32, Int32)] = []
    private var stopped = false

    init(targetPort: Int) {
        target = targetPort
        (listener, port) = listenLoopback(backlog: 128)
        Thread.detachNewThread { [self] in acceptLoop() }
    }

    func setMode(_ mode: Mode) {
        lock.lock(); self.mode = mode; lock.unlock()
    }

    var currentMode: Mode {
        lock.lock(); defer { lock.unlock() }
        return mode
    }

    /// Resets every open connection (both sides see the drop).
    func cut() {
        lock.lock()
        let open = pairs
        pairs.removeAll()
        lock.unlock()
        for (a, b) in open {
            Self.reset(a)
            Self.reset(b)
        }
    }

    func stop() {
        lock.lock(); stopped = true; lock.unlock()
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
        cut()
    }

    private func acceptLoop() {
        while true {
            let client = accept(listener, nil, nil)
            if client < 0 { return }
            if currentMode == .down {
                Self.reset(client)
                continue
            }
            let upstream = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var address = loopbackAddress(port: target)
            let rc = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(upstream, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            if rc != 0 {
                Self.reset(client)
                close(upstream)
                continue
            }
            lock.lock(); pairs.append((client, upstream)); lock.unlock()
            Thread.detachNewThread { [self] in pump(client, upstream) }
        }
    }

    private func isOpen(_ a: Int32, _ b: Int32) -> Bool {
        lock.lock(); defer { lock.unlock() }
        return pairs.contains { $0.0 == a && $0.1 == b }
    }

    private func pump(_ a: Int32, _ b: Int32) {
        var buffer = [UInt8](repeating: 0, count: 65536)
        while isOpen(a, b) {
            if currentMode == .blackhole {
                usleep(5_000)
                continue
            }
            var fds = [pollfd(fd: a, events: Int16(POLLIN), revents: 0), pollfd(fd: b, events: Int16(POLLIN), revents: 0)]
            let ready = poll(&fds, 2, 20)
            if ready <= 0 { continue }
            for (index, entry) in fds.enumerated() where entry.revents != 0 {
                let from = index == 0 ? a : b
                let to = index == 0 ? b : a
                let n = recv(from, &buffer, buffer.count, 0)
                if n <= 0 {
                    lock.lock(); pairs.removeAll { $0.0 == a && $0.1 == b }; lock.unlock()
                    close(a)
                    close(b)
                    return
                }
                var sent = 0
                while sent < n {
                    let m = buffer.withUnsafeBytes { send(to, $0.baseAddress! + sent, n - sent, Int32(MSG_NOSIGNAL)) }
                    if m <= 0 { break }
                    sent += m
                }
            }
        }
    }

    private static func reset(_ fd: Int32) {
        var linger = Foundation.linger(l_onoff: 1, l_linger: 0)
        setsockopt(fd, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Foundation.linger>.size))
        shutdown(fd, Int32(SHUT_RDWR))
        close(fd)
    }
}
