import Foundation
import CLibUV

/// Watches POSIX signals (SIGINT, SIGTERM, ...) on the event loop, one
/// `uv_signal_t` per signal, and calls a handler on the loop thread.
///
/// Loop thread only. Used by the executables for graceful shutdown. The
/// loop keeps the watcher alive until `cancel()` or shutdown.
public final class SignalWatcher: LoopOwnedHandle, @unchecked Sendable {
    // @unchecked Sendable: fields are touched on the loop thread only.
    private unowned let loop: EventLoop
    private var handles: [UnsafeMutablePointer<uv_signal_t>] = []
    private var handler: ((Int32) -> Void)?

    /// Starts watching `signals`; `handler` gets the signal number.
    public init(loop: EventLoop, signals: [Int32], handler: @escaping (Int32) -> Void) throws(LoopError) {
        loop.preconditionInEventLoop()
        self.loop = loop
        self.handler = handler
        for signum in signals {
            let handle = UnsafeMutablePointer<uv_signal_t>.allocate(capacity: 1)
            try uvCheck(uv_signal_init(loop.uv, handle), "uv_signal_init") {
                handle.deallocate()
                close()
            }
            handle.pointee.data = Unmanaged.passUnretained(self).toOpaque()
            handles.append(handle)
            let started = uv_signal_start(handle, { raw, signum in
                guard let raw, let data = raw.pointee.data else { return }
                let watcher = Unmanaged<SignalWatcher>.fromOpaque(data).takeUnretainedValue()
                watcher.handler?(signum)
            }, signum)
            try uvCheck(started, "uv_signal_start") { close() }
        }
        loop.register(self)
    }

    /// Stops watching. Idempotent.
    public func cancel() {
        close()
    }

    func close() {
        handler = nil
        for handle in handles {
            uv_signal_stop(handle)
            closeAndFree(handle)
        }
        handles.removeAll()
        loop.unregister(self)
    }
}

extension SignalWatcher {
    /// Unblocks `signals` for the calling thread (and the threads it starts,
    /// such as an `EventLoop` created afterwards). A process can be started
    /// with SIGINT/SIGTERM blocked (the mask is inherited, e.g. from a
    /// dispatch worker thread); call this before creating the loop.
    public static func unblock(_ signals: [Int32]) {
        var set = sigset_t()
        sigemptyset(&set)
        for signal in signals { sigaddset(&set, signal) }
        pthread_sigmask(SIG_UNBLOCK, &set, nil)
    }
}
