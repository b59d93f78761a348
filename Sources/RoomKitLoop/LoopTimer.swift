import CLibUV

/// A one-shot or repeating timer on the event loop (one `uv_timer_t`).
///
/// Loop thread only: create, start and cancel it on the loop. While it is
/// scheduled the loop keeps it alive, so a caller may drop its reference
/// to a fire-and-forget timer. Timers with equal deadlines fire in the
/// order they were started (libuv's rule); a cancelled timer never fires.
public final class LoopTimer: LoopOwnedHandle, @unchecked Sendable {
    // @unchecked Sendable: every mutable field is touched on the loop thread
    // only (asserted); the type is Sendable so it can be captured by tasks
    // that hop back to the loop.

    private unowned let loop: EventLoop
    /// Heap-allocated handle; freed only in its close callback. Loop thread only.
    private var handle: UnsafeMutablePointer<uv_timer_t>?
    private var handler: ((LoopTimer) -> Void)?
    private var repeats = false

    /// Creates an idle timer. Loop thread only.
    public init(loop: EventLoop, handler: @escaping (LoopTimer) -> Void) throws(LoopError) {
        loop.preconditionInEventLoop()
        self.loop = loop
        self.handler = handler
        let handle = UnsafeMutablePointer<uv_timer_t>.allocate(capacity: 1)
        try uvCheck(uv_timer_init(loop.uv, handle), "uv_timer_init") { handle.deallocate() }
        handle.pointee.data = Unmanaged.passUnretained(self).toOpaque()
        self.handle = handle
    }

    /// Whether the timer is scheduled to fire.
    public var isScheduled: Bool {
        loop.assertInEventLoop()
        guard let handle else { return false }
        return uv_is_active(UnsafeMutableRawPointer(handle).assumingMemoryBound(to: uv_handle_t.self)) != 0
    }

    /// Schedules the timer `delay` from now, then every `interval` if given.
    /// Restarting a scheduled timer replaces its deadline.
    public func start(after delay: Duration, repeating interval: Duration? = nil) throws(LoopError) {
        loop.preconditionInEventLoop()
        guard let handle else {
            throw LoopError(code: .shutdown, function: "LoopTimer.start", detail: "timer is closed")
        }
        repeats = interval != nil
        loop.register(self)
        try uvCheck(uv_timer_start(handle, { raw in
            guard let raw, let data = raw.pointee.data else { return }
            Unmanaged<LoopTimer>.fromOpaque(data).takeUnretainedValue().fire()
        }, Self.milliseconds(delay), interval.map(Self.milliseconds) ?? 0), "uv_timer_start")
    }

    /// Stops the timer without closing it; it may be started again.
    public func stop() {
        loop.assertInEventLoop()
        guard let handle else { return }
        uv_timer_stop(handle)
        loop.unregister(self)
    }

    /// Stops the timer for good and releases its handle. Idempotent.
    public func cancel() {
        close()
    }

    func close() {
        guard let handle else { return }
        self.handle = nil
        handler = nil
        uv_timer_stop(handle)
        closeAndFree(handle)
        loop.unregister(self)
    }

    private func fire() {
        guard let handler else { return }
        if !repeats {
            // One-shot: no longer scheduled, so the loop stops holding it.
            loop.unregister(self)
        }
        handler(self)
    }

    deinit {
        if let handle {
            // Unreachable in correct use (the loop holds scheduled timers), but
            // an idle timer dropped without cancel must still be closed.
            let loop = self.loop
            let address = UInt(bitPattern: handle)
            loop.execute {
                let handle = UnsafeMutablePointer<uv_timer_t>(bitPattern: address)!
                uv_timer_stop(handle)
                closeAndFree(handle)
            }
        }
    }

    /// Rounds a duration up to whole milliseconds (libuv's timer resolution).
    static func milliseconds(_ duration: Duration) -> UInt64 {
        let (seconds, attoseconds) = duration.components
        if seconds < 0 { return 0 }
        let ms = UInt64(seconds) &* 1000 &+ UInt64((attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000)
        return ms
    }
}

extension EventLoop {
    /// Starts a timer that calls `handler` on the loop after `delay` (and then
    /// every `interval`, if given). Loop thread only.
    @discardableResult
    public func scheduleTimer(after delay: Duration, repeating interval: Duration? = nil,
                              _ handler: @escaping (LoopTimer) -> Void) throws(LoopError) -> LoopTimer {
        let timer = try LoopTimer(loop: self, handler: handler)
        try timer.start(after: delay, repeating: interval)
        return timer
    }

    /// Runs `task` on the loop after `delay`. Safe from any thread. The
    /// returned handle cancels it from any thread; a cancelled task never runs.
    @discardableResult
    public func schedule(after delay: Duration, _ task: @escaping @Sendable () -> Void) -> ScheduledTask {
        let scheduled = ScheduledTask(loop: self)
        execute { [self] in
            guard !scheduled.isCancelledOnLoop else { return }
            do {
                let timer = try scheduleTimer(after: delay) { _ in
                    scheduled.timer = nil
                    task()
                }
                scheduled.timer = timer
            } catch {
                logger.error("schedule(after:) could not start a timer", metadata: ["error": "\(error)"])
            }
        }
        return scheduled
    }
}

/// A task scheduled with `EventLoop.schedule(after:_:)`; cancellable from any thread.
public final class ScheduledTask: @unchecked Sendable {
    // @unchecked Sendable: `timer` and `isCancelledOnLoop` are loop thread only;
    // `cancel()` hops to the loop before touching them.
    private let loop: EventLoop
    fileprivate var timer: LoopTimer?
    fileprivate var isCancelledOnLoop = false

    fileprivate init(loop: EventLoop) {
        self.loop = loop
    }

    /// Cancels the task if it has not run yet. Safe from any thread; when
    /// called on the loop thread the cancellation takes effect at once.
    public func cancel() {
        if loop.inEventLoop {
            cancelOnLoop()
        } else {
            loop.execute { [self] in cancelOnLoop() }
        }
    }

    private func cancelOnLoop() {
        isCancelledOnLoop = true
        timer?.cancel()
        timer = nil
    }
}
