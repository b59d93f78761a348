import CLibUV

/// Calls a handler at the end of every turn of the event loop: once right
/// after the loop has run the I/O callbacks of one poll (a `uv_check_t`), and
/// once right before it polls again (a `uv_prepare_t`, for work that timers
/// or idle callbacks did in between). So everything a turn's callbacks did is
/// seen by the handler before the loop can block.
///
/// roomd uses it for group commit: the events of one turn are written in one
/// SQLite transaction, committed here, and only then sent.
///
/// Loop thread only. The handles are unreferenced (they never keep the loop
/// running on their own); the loop keeps the hook alive until `cancel()` or
/// shutdown. The handler must not block.
public final class LoopTurnHook: LoopOwnedHandle, @unchecked Sendable {
    // @unchecked Sendable: fields are touched on the loop thread only.
    private unowned let loop: EventLoop
    private var check: UnsafeMutablePointer<uv_check_t>?
    private var prepare: UnsafeMutablePointer<uv_prepare_t>?
    private var handler: (() -> Void)?

    /// Starts calling `handler` at the end of each loop turn. Loop thread only.
    public init(loop: EventLoop, handler: @escaping () -> Void) throws(LoopError) {
        loop.preconditionInEventLoop()
        self.loop = loop
        self.handler = handler
        let check = UnsafeMutablePointer<uv_check_t>.allocate(capacity: 1)
        var rc = uv_check_init(loop.uv, check)
        guard rc >= 0 else {
            check.deallocate()
            throw LoopError(code: .uv, function: "uv_check_init", errno: rc, detail: String(cString: uv_strerror(rc)))
        }
        check.pointee.data = Unmanaged.passUnretained(self).toOpaque()
        self.check = check
        let prepare = UnsafeMutablePointer<uv_prepare_t>.allocate(capacity: 1)
        rc = uv_prepare_init(loop.uv, prepare)
        guard rc >= 0 else {
            prepare.deallocate()
            close()
            throw LoopError(code: .uv, function: "uv_prepare_init", errno: rc, detail: String(cString: uv_strerror(rc)))
        }
        prepare.pointee.data = Unmanaged.passUnretained(self).toOpaque()
        self.prepare = prepare
        uv_check_start(check) { raw in
            guard let raw, let data = raw.pointee.data else { return }
            Unmanaged<LoopTurnHook>.fromOpaque(data).takeUnretainedValue().handler?()
        }
        uv_prepare_start(prepare) { raw in
            guard let raw, let data = raw.pointee.data else { return }
            Unmanaged<LoopTurnHook>.fromOpaque(data).takeUnretainedValue().handler?()
        }
        uv_unref(UnsafeMutableRawPointer(check).assumingMemoryBound(to: uv_handle_t.self))
        uv_unref(UnsafeMutableRawPointer(prepare).assumingMemoryBound(to: uv_handle_t.self))
        loop.register(self)
    }

    /// Stops calling the handler. Idempotent. Loop thread only.
    public func cancel() {
        close()
    }

    func close() {
        handler = nil
        if let check {
            uv_check_stop(check)
            closeAndFree(check)
            self.check = nil
        }
        if let prepare {
            uv_prepare_stop(prepare)
            closeAndFree(prepare)
            self.prepare = nil
        }
        loop.unregister(self)
    }
}
