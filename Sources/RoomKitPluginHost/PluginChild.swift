import CRoomKitPluginWire
import Dispatch
import Foundation
import Logging
import RoomKitProtocol

/// One incarnation of a plugin process (docs/PLUGIN-WIRE.md): its pid,
/// socket, optional progress page, and two threads of its own: a reader
/// (frames from the process) and an output reader (its stdout and stderr, to
/// the log line by line).
///
/// Thread safety: `state` is guarded by `condition`; writes to the socket
/// are serialised by `writeLock` (a semaphore); the rest is immutable.
final class PluginChild: @unchecked Sendable {
    // @unchecked Sendable: see above; `progress` is shared memory read with atomics.

    /// The child's HELLO (PLUGIN-WIRE.md section 3).
    struct Hello {
        var version: UInt32
        var flags: UInt32
        var hooks: UInt32
        var abiMajor: UInt16
        var abiMinor: UInt16
        var stage: Int32
        var message: String
    }

    /// An ANSWER frame's fields (PLUGIN-WIRE.md section 6).
    typealias Answer = (result: Int32, text: [UInt8]?)

    /// Why a URL request ended without its ANSWER.
    enum NoAnswer: Error {
        case timedOut
        /// The process exited (how: `exitDescription`).
        case exited(String)
    }

    struct State {
        var hello: Hello?
        var loaded: Int32?
        var unloaded = false
        var exited = false
        var exitDescription: String?
        var exitSignal: Int32 = 0
        /// Set before the bot kills the process, to say why (hang, garbage).
        var killReason: String?
        var nextRequest: UInt64 = 0
        /// Open state requests: nil until the ANSWER (result, text) arrives.
        var answers: [UInt64: (result: Int32, text: [UInt8]?)?] = [:]
        /// Open URL requests: no thread waits for them; the reader runs
        /// `finish` with the ANSWER, the watchdog's `expireRequests` with
        /// `.timedOut` once `deadline` (CLOCK_MONOTONIC ns) has passed, or
        /// `reap` with `.exited`.
        var callbacks: [UInt64: (deadline: UInt64, finish: @Sendable (Result<Answer, NoAnswer>) -> Void)] = [:]
        /// The last DONE's seq, and the last PONG's nonce.
        var done: UInt64 = 0
        var pong: UInt64 = 0
        /// The last PING's nonce.
        var ping: UInt64 = 0
    }

    let pid: pid_t
    let socket: Int32
    /// The shared progress page; the child updates it only when its HELLO says so (`usesPage`).
    let progress: UnsafeMutablePointer<roomkit_wire_progress>
    let owner: PluginProcess  // strong: the process outlives its children; `current = nil` on exit breaks the cycle
    private let condition = NSCondition()
    private var state = State()
    /// A semaphore rather than a lock: a send the caller's thread must not
    /// wait for is finished, and released, on another thread (`sendSoon`).
    private let writeLock = DispatchSemaphore(value: 1)

    init(pid: pid_t, socket: Int32, progress: UnsafeMutablePointer<roomkit_wire_progress>, owner: PluginProcess) {
        self.pid = pid
        self.socket = socket
        self.progress = progress
        self.owner = owner
    }

    deinit {
        roomkit_wire_progress_release(progress)
    }

    /// Starts the reader and output threads (they keep the child alive until the process is reaped).
    func start(stdout: Int32, stderr: Int32) {
        let reader = Thread { [self] in readFrames() }
        reader.name = "roomkit.plugin.\(owner.spec.name).reader"
        reader.start()
        let output = Thread { [self] in forwardOutput(stdout: stdout, stderr: stderr) }
        output.name = "roomkit.plugin.\(owner.spec.name).output"
        output.start()
    }

    // MARK: State

    private func update(_ body: (inout State) -> Void) {
        condition.lock()
        body(&state)
        condition.broadcast()
        condition.unlock()
    }

    /// `update` for a frame that shows the child is making progress; the
    /// frame also goes to the supervisor machine (what its hang, lateness
    /// and PING rules read).
    private func progressed(_ frame: PluginSupervisorMachine.Frame = .progress, _ body: (inout State) -> Void) {
        update(body)
        owner.childMadeProgress(frame)
    }

    /// Waits until `ready` gives a value, the process exits, or `timeout` passes.
    private func wait<T>(_ timeout: Duration, _ ready: (State) -> T?) -> T? {
        let deadline = Date().addingTimeInterval(Double(timeout.components.seconds) + Double(timeout.components.attoseconds) / 1e18)
        condition.lock()
        defer { condition.unlock() }
        while true {
            if let value = ready(state) { return value }
            if state.exited || !condition.wait(until: deadline) { return ready(state) }
        }
    }

    func waitForHello(timeout: Duration) -> Hello? {
        wait(timeout) { $0.hello }
    }

    /// Whether the child keeps the progress page (HELLO flag bit 0).
    var usesPage: Bool { condition.withLock { (state.hello?.flags ?? 0) & ROOMKIT_WIRE_FLAG_PROGRESS_PAGE != 0 } }

    /// Sends LOAD and waits for on_load's result (nil: exited or timed out).
    func load(config: String, callTimeout: Duration, timeout: Duration) -> Int32? {
        var frame = WireFrame(UInt8(ROOMKIT_WIRE_LOAD.rawValue))
        frame.u32(UInt32(clamping: callTimeout.milliseconds))
        frame.string(config)
        send(frame.finished)
        return wait(timeout) { $0.loaded }
    }

    /// True once the process has exited (and was reaped) within `timeout`.
    func waitForExit(timeout: Duration) -> Bool {
        wait(timeout) { $0.exited ? true : nil } ?? false
    }

    var exitDescription: String? { condition.withLock { state.exitDescription } }
    var exitSignal: Int32 { condition.withLock { state.exitSignal } }
    var killReason: String? { condition.withLock { state.killReason } }
    /// The last event the child finished: its DONE frames, or the progress page when it keeps one.
    var doneSeq: UInt64 {
        let page = roomkit_wire_load64(&progress.pointee.done_seq)
        return max(page, condition.withLock { state.done })
    }


    /// Waits until the child reported `seq` finished (DONE), it exits, or `timeout` passes.
    func waitDone(_ seq: UInt64, timeout: Duration) -> Bool {
        wait(timeout) { $0.done >= seq ? true : nil } ?? false
    }

    /// Sends a PING with the next nonce (the supervisor machine's `tick` said when).
    func ping() {
        let nonce = condition.withLock { () -> UInt64 in
            state.ping += 1
            return state.ping
        }
        var frame = WireFrame(UInt8(ROOMKIT_WIRE_PING.rawValue))
        frame.u64(nonce)
        send(frame.finished)
    }

    /// SIGKILL, noting why (the crash report says it).
    func kill(because reason: String? = nil) {
        update { if $0.killReason == nil { $0.killReason = reason } }
        _ = Foundation.kill(pid, SIGKILL)
    }

    // MARK: Round trips

    /// EXPORT_STATE / IMPORT_STATE: a round trip answered by ANSWER; nil on timeout.
    func stateRequest(_ type: roomkit_wire_down, state: String?, timeout: Duration) -> (result: Int32, text: [UInt8]?)? {
        request(timeout) { request in
            var frame = WireFrame(UInt8(type.rawValue), capacity: 24 + (state?.utf8.count ?? 0))
            frame.u64(request)
            if type == ROOMKIT_WIRE_IMPORT_STATE { frame.string(state) }
            return frame
        }
    }

    /// URL without a waiting thread: sends the request from the caller's
    /// thread and returns. `finish` runs once: on the reader thread with
    /// the ANSWER, or with why there is none: no ANSWER within `timeout`
    /// (the watchdog's `expireRequests`, so up to a tick later), or the
    /// process exited. The round trip is four thread hand-offs (caller to
    /// the child's reader and main thread, to the bot's reader, to the
    /// caller's task), with no queue of the bot's on the way.
    func interrupt(_ url: String, timeout: Duration, then finish: @escaping @Sendable (Result<Answer, NoAnswer>) -> Void) {
        let deadline = Self.monotonicNow() &+ PluginSupervisorMachine.nanoseconds(timeout)
        let request = condition.withLock { () -> UInt64? in
            guard !state.exited else { return nil }
            state.nextRequest += 1
            state.callbacks[state.nextRequest] = (deadline, finish)
            return state.nextRequest
        }
        guard let request else { return finish(.failure(.exited(exitDescription ?? "exited"))) }
        owner.requestSent()
        var frame = WireFrame(UInt8(ROOMKIT_WIRE_URL.rawValue), capacity: 28 + url.utf8.count)
        frame.u64(request)
        frame.u32(UInt32(clamping: timeout.milliseconds * 1000))
        frame.string(url)
        sendSoon(frame.finished)
    }

    /// Sends a small frame without blocking the caller's thread (a URL
    /// caller may be a Swift task): `sendSoon(_:to:guardedBy:)`.
    private func sendSoon(_ bytes: [UInt8]) {
        Self.sendSoon(bytes, to: socket, guardedBy: writeLock)
    }

    /// Writes `bytes` to `socket` under `lock` without blocking: now, when
    /// no other write holds the lock and the socket takes them whole;
    /// otherwise (or what is left of them) from a thread of the global
    /// queue, which may wait for a busy peer and then releases the lock.
    /// Returns whether the bytes went now.
    @discardableResult
    static func sendSoon(_ bytes: [UInt8], to socket: Int32, guardedBy lock: DispatchSemaphore) -> Bool {
        guard lock.wait(timeout: .now()) == .success else {
            DispatchQueue.global().async {
                lock.wait()
                sendRest(bytes[...], to: socket, releasing: lock)
            }
            return false
        }
        let sent = bytes.withUnsafeBytes { Foundation.send(socket, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL | MSG_DONTWAIT)) }
        if sent == bytes.count || (sent < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
            lock.signal()  // sent, or the peer is gone (its reader sees it)
            return sent == bytes.count
        }
        let rest = bytes[max(sent, 0)...]
        DispatchQueue.global().async { sendRest(rest, to: socket, releasing: lock) }
        return false
    }

    /// The blocking end of `sendSoon` (its lock held; released after).
    private static func sendRest(_ rest: ArraySlice<UInt8>, to socket: Int32, releasing lock: DispatchSemaphore) {
        rest.withUnsafeBytes { raw in
            _ = send([iovec(iov_base: UnsafeMutableRawPointer(mutating: raw.baseAddress), iov_len: raw.count)], to: socket)
        }
        lock.signal()
    }

    /// Ends the URL requests whose deadline has passed (the watchdog's
    /// tick), or all of them when the process exited (`reap`).
    func expireRequests(exited: Bool = false) {
        let now = Self.monotonicNow()
        let (expired, description) = condition.withLock { () -> ([@Sendable (Result<Answer, NoAnswer>) -> Void], String?) in
            let due = state.callbacks.filter { exited || $0.value.deadline <= now }
            for request in due.keys { state.callbacks[request] = nil }
            return (due.values.map(\.finish), state.exitDescription)
        }
        for finish in expired { finish(.failure(exited ? .exited(description ?? "exited") : .timedOut)) }
    }

    /// Sends the frame `make` builds for a fresh request number and waits for its ANSWER.
    private func request(_ timeout: Duration, _ make: (UInt64) -> WireFrame) -> (result: Int32, text: [UInt8]?)? {
        var request: UInt64 = 0
        update {
            $0.nextRequest += 1
            request = $0.nextRequest
            $0.answers[request] = .some(nil)
        }
        owner.requestSent()
        send(make(request).finished)
        let answer: (result: Int32, text: [UInt8]?)? = wait(timeout) { state in
            guard case .some(.some(let answer)) = state.answers[request] else { return nil }
            return answer
        }
        update { $0.answers[request] = nil }
        return answer
    }

    /// Writes whole frames; a failure means the process is gone (the reader sees it).
    func send(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { raw in
            send([iovec(iov_base: UnsafeMutableRawPointer(mutating: raw.baseAddress), iov_len: raw.count)])
        }
    }

    /// IOV_MAX on Linux: the most pieces one `sendmsg` takes.
    static let maxPieces = 1024

    /// Writes the bytes of `pieces`, in order, as one stream; a failure
    /// means the process is gone (the reader sees it).
    func send(_ pieces: [iovec]) {
        writeLock.wait()
        defer { writeLock.signal() }
        _ = Self.send(pieces, to: socket)
    }

    /// Writes every byte of `pieces` to `socket` (`sendmsg`, at most
    /// `maxPieces` a call, again from where a short send stopped); false
    /// when the socket failed.
    static func send(_ pieces: [iovec], to socket: Int32) -> Bool {
        var vectors = pieces
        var first = 0
        while first < vectors.count {
            let sent = vectors.withUnsafeMutableBufferPointer { vectors -> Int in
                var message = msghdr()
                message.msg_iov = vectors.baseAddress! + first
                message.msg_iovlen = min(vectors.count - first, maxPieces)
                return sendmsg(socket, &message, Int32(MSG_NOSIGNAL))
            }
            if sent < 0 && errno == EINTR { continue }
            if sent <= 0 { return false }
            // Past the pieces sent whole; the first one left starts where the send stopped.
            var left = sent
            while first < vectors.count, left >= vectors[first].iov_len {
                left -= vectors[first].iov_len
                first += 1
            }
            if left > 0 {
                vectors[first].iov_base = vectors[first].iov_base.map { $0 + left }
                vectors[first].iov_len -= left
            }
        }
        return true
    }

    // MARK: The reader thread

    private func readFrames() {
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        var length = 0
        var garbage: String?
        reading: while true {
            if length == buffer.count { buffer.append(contentsOf: [UInt8](repeating: 0, count: buffer.count)) }
            let n = buffer.withUnsafeMutableBytes { read(socket, $0.baseAddress! + length, $0.count - length) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { break }
            length += n
            var at = 0
            while length - at >= 5 {
                let size = buffer.withUnsafeBytes { UInt32(littleEndian: $0.loadUnaligned(fromByteOffset: at, as: UInt32.self)) }
                guard size > 0, size <= ROOMKIT_WIRE_MAX_FRAME else {
                    garbage = "an unparsable frame (length \(size))"
                    break reading
                }
                guard length - at >= 4 + Int(size) else {
                    if 4 + Int(size) > buffer.count { buffer.append(contentsOf: [UInt8](repeating: 0, count: 4 + Int(size))) }
                    break
                }
                let type = buffer[at + 4]
                let ok = buffer.withUnsafeBytes { raw in
                    handle(type, WireReader(UnsafeRawBufferPointer(rebasing: raw[(at + 5)..<(at + 4 + Int(size))])))
                }
                guard ok else {
                    garbage = "an unparsable frame (type \(type))"
                    break reading
                }
                at += 4 + Int(size)
            }
            if at > 0 {
                buffer.withUnsafeMutableBytes { raw in
                    if length > at { memmove(raw.baseAddress!, raw.baseAddress! + at, length - at) }
                }
                length -= at
            }
        }
        if let garbage { kill(because: garbage) }
        close(socket)
        reap()
        owner.childExited(self)
    }

    /// Handles one frame; false when it does not parse.
    private func handle(_ type: UInt8, _ body: WireReader) -> Bool {
        var r = body
        switch UInt32(type) {
        case ROOMKIT_WIRE_HELLO.rawValue:
            let hello = Hello(version: r.u32(), flags: r.u32(), hooks: r.u32(), abiMajor: r.u16(), abiMinor: r.u16(),
                              stage: r.i32(), message: r.string() ?? "")
            guard r.complete else { return false }
            update { if $0.hello == nil { $0.hello = hello } }
        case ROOMKIT_WIRE_LOADED.rawValue:
            let result = r.i32()
            guard r.complete else { return false }
            progressed { $0.loaded = result }
        case ROOMKIT_WIRE_ANSWER.rawValue:
            let request = r.u64()
            let result = r.i32()
            let text = r.raw()
            guard r.complete else { return false }
            var callback: (@Sendable (Result<Answer, NoAnswer>) -> Void)?
            progressed(.answer) {
                if $0.answers[request] != nil { $0.answers[request] = .some((result, text)) }
                callback = $0.callbacks.removeValue(forKey: request)?.finish
            }
            callback?(.success((result, text)))
        case ROOMKIT_WIRE_DONE.rawValue:
            let seq = r.u64()
            guard r.complete else { return false }
            progressed(.done(through: seq)) { $0.done = max($0.done, seq) }
            owner.childProgressed(done: seq)
        case ROOMKIT_WIRE_FAILED.rawValue:
            let seq = r.u64()
            let reason = r.raw()
            guard r.complete else { return false }
            progressed { _ in }
            owner.childFailed(seq: seq, reason: reason.map { String(decoding: $0, as: UTF8.self) } ?? "")
        case ROOMKIT_WIRE_PONG.rawValue:
            let nonce = r.u64()
            guard r.complete else { return false }
            progressed(.pong) { $0.pong = max($0.pong, nonce) }
        case ROOMKIT_WIRE_LOG.rawValue:
            let level = r.i32()
            let message = r.raw()
            guard r.complete else { return false }
            owner.log(level: level, message.map { String(decoding: $0, as: UTF8.self) } ?? "")
        case ROOMKIT_WIRE_CALL.rawValue:
            let request = r.u64()
            let function = r.i32()
            let argument = r.i32()
            let count = r.u32()
            guard count <= 8 else { return false }
            let arguments = (0..<count).map { _ in r.raw() }
            guard r.complete else { return false }
            let (result, text) = owner.perform(function, argument: argument, arguments)
            guard request != 0 else {  // fire-and-forget: a failure is only logged
                if result == -1 { owner.noteFailedCall(function) }
                break
            }
            var reply = WireFrame(UInt8(ROOMKIT_WIRE_REPLY.rawValue), capacity: 24 + (text?.utf8.count ?? 0))
            reply.u64(request)
            reply.i32(result)
            reply.string(text)
            send(reply.finished)
        case ROOMKIT_WIRE_UNLOADED.rawValue:
            guard r.complete else { return false }
            update { $0.unloaded = true }
        default:
            return false
        }
        return true
    }

    /// Waits for the process to end (SIGKILL after 1 s: it closed the socket but lives on).
    private func reap() {
        var signal: Int32 = 0, code: Int32 = 0
        var reaped = false
        for _ in 0..<50 where !reaped {
            reaped = roomkit_wire_reap(pid, 0, &signal, &code) == 1
            if !reaped { usleep(20_000) }
        }
        if !reaped {
            kill(because: "it closed its socket but did not exit")
            reaped = roomkit_wire_reap(pid, 1, &signal, &code) == 1
        }
        let description = signal != 0 ? "was killed by signal \(signal) (\(Self.signalName(signal)))"
            : "exited with code \(code)"
        update {
            $0.exited = true
            $0.exitSignal = signal
            $0.exitDescription = description
        }
        expireRequests(exited: true)
    }

    /// CLOCK_MONOTONIC in nanoseconds (the progress page's clock).
    static func monotonicNow() -> UInt64 {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return UInt64(now.tv_sec) * 1_000_000_000 + UInt64(now.tv_nsec)
    }

    static func signalName(_ signal: Int32) -> String {
        switch signal {
        case SIGSEGV: return "SIGSEGV"
        case SIGABRT: return "SIGABRT"
        case SIGBUS: return "SIGBUS"
        case SIGFPE: return "SIGFPE"
        case SIGILL: return "SIGILL"
        case SIGKILL: return "SIGKILL"
        case SIGTERM: return "SIGTERM"
        case SIGXCPU: return "SIGXCPU"
        default: return "signal \(signal)"
        }
    }

    // MARK: stdout and stderr

    /// Logs the process's output one line at a time (at most 4 KiB a line,
    /// control characters escaped), tagged with the plugin's name.
    private func forwardOutput(stdout: Int32, stderr: Int32) {
        var fds = [pollfd(fd: stdout, events: Int16(POLLIN), revents: 0), pollfd(fd: stderr, events: Int16(POLLIN), revents: 0)]
        var pending: [[UInt8]] = [[], []]
        var chunk = [UInt8](repeating: 0, count: 4096)
        while fds.contains(where: { $0.fd >= 0 }) {
            if poll(&fds, nfds_t(fds.count), -1) < 0 { if errno == EINTR { continue } else { break } }
            for index in 0..<2 where fds[index].fd >= 0 && fds[index].revents != 0 {
                let n = chunk.withUnsafeMutableBytes { read(fds[index].fd, $0.baseAddress!, $0.count) }
                if n < 0 && errno == EINTR { continue }
                if n <= 0 {
                    if !pending[index].isEmpty { emit(pending[index], stream: index) }
                    close(fds[index].fd)
                    fds[index].fd = -1
                    continue
                }
                pending[index].append(contentsOf: chunk[0..<n])
                while let newline = pending[index].firstIndex(of: 10) {
                    emit(Array(pending[index][..<newline]), stream: index)
                    pending[index].removeSubrange(...newline)
                }
                if pending[index].count >= 4096 {
                    emit(pending[index], stream: index)
                    pending[index].removeAll()
                }
            }
        }
    }

    private func emit(_ line: [UInt8], stream: Int) {
        let text = oneLine(String(decoding: line, as: UTF8.self))
        let metadata: Logger.Metadata = ["plugin": "\(owner.spec.name)", "stream": "\(stream == 0 ? "stdout" : "stderr")"]
        if stream == 0 { owner.logger.info("\(text)", metadata: metadata) } else { owner.logger.warning("\(text)", metadata: metadata) }
    }
}
