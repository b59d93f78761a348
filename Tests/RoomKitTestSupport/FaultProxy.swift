import Foundation

/// A TCP proxy on 127.0.0.1 that injects network faults between a client and
/// a server. This kernel has no `netem`, so the proxy is the tool: tests point
/// a client at `port` and the proxy connects each accepted connection to
/// `127.0.0.1:targetPort`. It listens on loopback only.
///
/// Faults:
/// - ``Mode/down``: refuse new connections (accept, then reset);
/// - ``Mode/blackhole``: sockets stay open, nothing is read or forwarded
///   (a silent partition);
/// - ``cut()``: reset every open connection, both sides at once;
/// - ``Faults``: latency added to each direction, slicing into small writes,
///   and a bandwidth limit per direction. They apply to bytes read after the
///   change, and combine.
///
/// Each connection is pumped by its own thread with non-blocking sockets and
/// poll(2); only that thread closes its sockets, so a cut never races a
/// reused descriptor.
public final class FaultProxy: @unchecked Sendable {
    // @unchecked Sendable: mutable state is guarded by `lock`; the sockets of
    // a link belong to its pump thread.
    public enum Mode: Sendable { case pass, blackhole, down }

    public struct Faults: Sendable, Equatable, CustomStringConvertible {
        /// Added to each direction: a byte read at t is written at t + latency.
        public var latency: Duration
        /// When set, bytes are forwarded in writes of at most this many bytes,
        /// one write per `sliceGap` (TCP_NODELAY is on, so each is a segment).
        public var sliceBytes: Int?
        public var sliceGap: Duration
        /// When set, each direction forwards at most this many bytes per second.
        public var bytesPerSecond: Int?

        public init(latency: Duration = .zero, sliceBytes: Int? = nil, sliceGap: Duration = .milliseconds(1),
                    bytesPerSecond: Int? = nil) {
            self.latency = latency
            self.sliceBytes = sliceBytes
            self.sliceGap = sliceGap
            self.bytesPerSecond = bytesPerSecond
        }

        public static let none = Faults()

        public var description: String {
            var parts: [String] = []
            if latency > .zero { parts.append("latency \(latency)") }
            if let sliceBytes { parts.append("slices of \(sliceBytes) B") }
            if let bytesPerSecond { parts.append("\(bytesPerSecond) B/s") }
            return parts.isEmpty ? "none" : parts.joined(separator: ", ")
        }
    }

    /// Counters since the proxy started.
    public struct Statistics: Sendable {
        public var accepted = 0
        public var refused = 0
        public var resets = 0
        public var bytesForwarded = 0
        public var writes = 0
    }

    public let port: Int
    private let target: Int
    private let listener: Int32
    private let lock = NSLock()
    private var mode = Mode.pass
    private var faults = Faults.none
    private var links: [Link] = []
    private var statistics = Statistics()
    private var stopped = false

    /// One proxied connection. Fields are guarded by the proxy's lock.
    private final class Link: @unchecked Sendable {
        let client: Int32
        let upstream: Int32
        var resetRequested = false
        let finished = DispatchSemaphore(value: 0)
        init(client: Int32, upstream: Int32) {
            self.client = client
            self.upstream = upstream
        }
    }

    public init(targetPort: Int) {
        target = targetPort
        (listener, port) = listenLoopback(backlog: 256)
        Thread.detachNewThread { [self] in acceptLoop() }
    }

    public func setMode(_ mode: Mode) {
        lock.withLock { self.mode = mode }
    }

    public var currentMode: Mode { lock.withLock { mode } }

    public func setFaults(_ faults: Faults) {
        lock.withLock { self.faults = faults }
    }

    public var currentFaults: Faults { lock.withLock { faults } }

    public var stats: Statistics { lock.withLock { statistics } }

    /// Connections currently open through the proxy.
    public var openConnections: Int { lock.withLock { links.count } }

    /// Resets every open connection (both sides see a TCP reset) and waits
    /// (up to a second each) until their pump threads have closed them.
    public func cut() {
        let open = lock.withLock {
            for link in links { link.resetRequested = true }
            return links
        }
        for link in open { _ = link.finished.wait(timeout: .now() + 1) }
    }

    /// Stops accepting and resets every open connection.
    public func stop() {
        let first = lock.withLock {
            defer { stopped = true }
            return !stopped
        }
        guard first else { return }
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
        cut()
    }

    private func acceptLoop() {
        while true {
            let client = accept(listener, nil, nil)
            if client < 0 {
                if errno == EINTR || errno == ECONNABORTED { continue }
                return
            }
            if currentMode == .down {
                lock.withLock { statistics.refused += 1 }
                Self.reset(client)
                continue
            }
            let upstream = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var address = loopbackAddress(port: target)
            let rc = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(upstream, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            if rc != 0 {
                lock.withLock { statistics.refused += 1 }
                Self.reset(client)
                close(upstream)
                continue
            }
            for fd in [client, upstream] {
                var yes: Int32 = 1
                setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &yes, socklen_t(MemoryLayout<Int32>.size))
                _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
            }
            let link = Link(client: client, upstream: upstream)
            lock.withLock {
                links.append(link)
                statistics.accepted += 1
            }
            Thread.detachNewThread { [self] in pump(link) }
        }
    }

    /// Bytes read from `from`, waiting to be written to `to`.
    private struct Direction {
        let from: Int32
        let to: Int32
        var chunks: [(due: UInt64, bytes: [UInt8])] = []
        var head = 0
        var offset = 0
        var queued = 0
        var eof = false
        var blocked = false
        var tokens = 0.0
        var lastRefill: UInt64 = 0
        var nextSliceAt: UInt64 = 0
        /// When this direction next has something to do without new input.
        var wake: UInt64?

        init(from: Int32, to: Int32) {
            self.from = from
            self.to = to
        }

        var isEmpty: Bool { head == chunks.count }

        /// Writes what is due. Returns the bytes written and writes made, or
        /// nil when the destination failed.
        mutating func flush(now: UInt64, faults: Faults) -> (bytes: Int, writes: Int)? {
            wake = nil
            var bytes = 0
            var writes = 0
            if let rate = faults.bytesPerSecond {
                let capacity = Double(max(faults.sliceBytes ?? 0, rate / 20, 1))
                if lastRefill == 0 { tokens = capacity }
                tokens = min(capacity, tokens + Double(now &- lastRefill) / 1e9 * Double(rate))
                lastRefill = now
            }
            while head < chunks.count {
                let due = chunks[head].due
                if due > now {
                    wake = due
                    break
                }
                if faults.sliceBytes != nil, now < nextSliceAt {
                    wake = nextSliceAt
                    break
                }
                var amount = chunks[head].bytes.count - offset
                if let slice = faults.sliceBytes { amount = min(amount, max(1, slice)) }
                if let rate = faults.bytesPerSecond {
                    if tokens < 1 {
                        wake = now + UInt64((1 - tokens) / Double(rate) * 1e9) + 1
                        break
                    }
                    amount = min(amount, Int(tokens))
                }
                let start = offset
                let written = chunks[head].bytes.withUnsafeBytes {
                    send(to, $0.baseAddress! + start, amount, Int32(MSG_NOSIGNAL | MSG_DONTWAIT))
                }
                if written < 0 {
                    if errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR {
                        blocked = true
                        break
                    }
                    return nil
                }
                blocked = false
                bytes += written
                writes += 1
                offset += written
                queued -= written
                if faults.bytesPerSecond != nil { tokens -= Double(written) }
                if offset == chunks[head].bytes.count {
                    head += 1
                    offset = 0
                }
                if faults.sliceBytes != nil {
                    nextSliceAt = now + UInt64(faults.sliceGap.nanoseconds)
                    if head < chunks.count { wake = nextSliceAt }
                    break
                }
            }
            if head > 64 {
                chunks.removeFirst(head)
                head = 0
            }
            return (bytes, writes)
        }
    }

    /// Most bytes a direction buffers before it stops reading (back-pressure).
    private static let maximumQueued = 4 << 20

    private func pump(_ link: Link) {
        var directions = [Direction(from: link.client, to: link.upstream), Direction(from: link.upstream, to: link.client)]
        var buffer = [UInt8](repeating: 0, count: 65536)
        func finish(reset: Bool) {
            if reset {
                Self.reset(link.client)
                Self.reset(link.upstream)
            } else {
                close(link.client)
                close(link.upstream)
            }
            lock.withLock {
                links.removeAll { $0 === link }
                if reset { statistics.resets += 1 }
            }
            link.finished.signal()
        }
        while true {
            let (mode, faults, resetRequested) = lock.withLock { (self.mode, self.faults, link.resetRequested) }
            if resetRequested { return finish(reset: true) }
            if mode == .blackhole {
                usleep(5_000)
                continue
            }
            let now = DispatchTime.now().uptimeNanoseconds
            for index in directions.indices {
                guard let done = directions[index].flush(now: now, faults: faults) else { return finish(reset: true) }
                if done.writes > 0 {
                    lock.withLock {
                        statistics.bytesForwarded += done.bytes
                        statistics.writes += done.writes
                    }
                }
                if directions[index].eof && directions[index].isEmpty { return finish(reset: false) }
            }
            var events: [Int16] = [0, 0]  // client, upstream
            for (index, direction) in directions.enumerated() {
                if !direction.eof && direction.queued < Self.maximumQueued { events[index] |= Int16(POLLIN) }
                if direction.blocked { events[1 - index] |= Int16(POLLOUT) }
            }
            var timeout: Int32 = 20
            for direction in directions {
                if let wake = direction.wake {
                    timeout = min(timeout, Int32(clamping: (wake > now ? wake - now : 0) / 1_000_000))
                }
            }
            // A descriptor with nothing to wait for is left out (-1), so a hung-up
            // peer does not wake poll while latency holds its last bytes.
            var fds = [pollfd(fd: events[0] == 0 ? -1 : link.client, events: events[0], revents: 0),
                       pollfd(fd: events[1] == 0 ? -1 : link.upstream, events: events[1], revents: 0)]
            if poll(&fds, 2, max(timeout, 0)) <= 0 { continue }
            for index in directions.indices where fds[index].revents != 0 && !directions[index].eof {
                guard directions[index].queued < Self.maximumQueued else { continue }
                let n = recv(directions[index].from, &buffer, buffer.count, Int32(MSG_DONTWAIT))
                if n > 0 {
                    let due = DispatchTime.now().uptimeNanoseconds + UInt64(faults.latency.nanoseconds)
                    directions[index].chunks.append((due, Array(buffer[0..<n])))
                    directions[index].queued += n
                } else if n == 0 {
                    directions[index].eof = true
                } else if errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR {
                    return finish(reset: true)
                }
            }
        }
    }

    private static func reset(_ fd: Int32) {
        var linger = Foundation.linger(l_onoff: 1, l_linger: 0)
        setsockopt(fd, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Foundation.linger>.size))
        close(fd)
    }
}

extension Duration {
    /// Whole nanoseconds (negative durations count as zero).
    var nanoseconds: Int64 {
        let (seconds, attoseconds) = components
        return max(0, seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
    }
}
