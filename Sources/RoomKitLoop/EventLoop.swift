import CLibUV
import CRoomKitShims
import Foundation
import Logging
import Synchronization

/// One libuv loop running on its own thread: the single place where all of
/// RoomKit's I/O, timers and room sessions run.
///
/// Threading: `execute`, `schedule(after:_:)` and `shutdown()` may be called
/// from any thread. Everything else (timers, signal watchers, transports) is
/// loop-thread-only and asserts it. Work reaches the loop through exactly one
/// door: `execute` enqueues under a lock and wakes the loop with
/// `uv_async_send`; the loop drains the whole queue on each wakeup.
///
/// Lifetime: the loop runs until `shutdown()`; it must be shut down before
/// the process exits. Shutdown runs the registered shutdown hooks (which
/// close transports), closes every handle this module created, lets libuv
/// finish their close callbacks, and returns only after `uv_loop_close`
/// returned 0 and the loop thread has exited (its thread-local state, such
/// as OpenSSL's, is freed by then).
public final class EventLoop: @unchecked Sendable {
    // @unchecked Sendable: the mutable fields are either protected by
    // `door` (a LockedValue) or touched on the loop thread only (marked below).

    /// The loop's name, also its thread's name.
    public let name: String
    /// The logger handed to everything built on this loop.
    public let logger: Logger

    /// The libuv loop. Loop thread only (after init).
    let uv: UnsafeMutablePointer<uv_loop_t>
    /// The cross-thread door's wakeup handle; freed in its close callback.
    private let wakeup: UnsafeMutablePointer<uv_async_t>

    /// The loop's lifecycle as other threads see it (NIO's `ExternalState`),
    /// kept with the task queue under one lock so a state change and the
    /// queue can never disagree.
    private enum ExternalState {
        /// Accepting work.
        case open
        /// `shutdown()` was called: still accepting work until the loop
        /// thread closes the door.
        case shutdownRequested
        /// The door is closed: `execute` refuses work.
        case closed
    }

    /// The loop's lifecycle on its own thread (NIO's `InternalState`).
    enum InternalState {
        case running
        /// Shutdown hooks have run and handles are closing.
        case shuttingDown
    }

    private struct Door {
        var tasks: [@Sendable () -> Void] = []
        var state = ExternalState.open
    }
    private let door = LockedValue(Door())

    /// The loop thread, joined by the first `shutdown()`. Written once, in init.
    private var thread = pthread_t()
    private let finished = DispatchSemaphore(value: 0)
    /// Whether the first `shutdown()` has joined the thread, and how many
    /// other `shutdown()` calls wait for it on `joinedSignal`.
    private let joinState = LockedValue((joined: false, waiters: 0))
    private let joinedSignal = DispatchSemaphore(value: 0)
    /// Result of `uv_loop_close`, written by the loop thread before it exits.
    private let closeResult = LockedValue<Int32>(0)

    /// Shutdown hooks, run in reverse order of registration. Loop thread only.
    private var shutdownHooks: [(id: Int, hook: () -> Void)] = []
    private var nextHookID = 0
    /// Handles this module created and that are not yet closed, so shutdown
    /// can close them. Loop thread only.
    private var liveHandles: [ObjectIdentifier: any LoopOwnedHandle] = [:]
    /// Run after the loop has closed every handle, before `uv_loop_close`.
    /// Loop thread only.
    private var finalizers: [() -> Void] = []
    /// Loop thread only.
    private(set) var internalState = InternalState.running

    /// Whether shutdown has begun. Loop thread only.
    var isShuttingDown: Bool {
        switch internalState {
        case .running: return false
        case .shuttingDown: return true
        }
    }

    /// Creates the loop and starts its thread.
    public init(name: String = "roomkit-loop", logger: Logger = Logger(label: "roomkit.loop")) throws(LoopError) {
        self.name = name
        self.logger = logger
        uv = .allocate(capacity: 1)
        wakeup = .allocate(capacity: 1)
        do {
            try uvCheck(uv_loop_init(uv), "uv_loop_init")
        } catch {
            uv.deallocate()
            wakeup.deallocate()
            throw error
        }
        if let error = Self.initWakeup(uv, wakeup) {
            uv_loop_close(uv)
            uv.deallocate()
            wakeup.deallocate()
            throw error
        }
        wakeup.pointee.data = Unmanaged.passUnretained(self).toOpaque()
        uv.pointee.data = Unmanaged.passUnretained(self).toOpaque()

        let started = DispatchSemaphore(value: 0)
        // A joinable pthread rather than a Foundation Thread, so shutdown()
        // can wait until the thread is gone, thread-local destructors included.
        let body = ThreadBody { [self, name] in
            roomkit_set_thread_name(name)
            roomkit_set_current_loop(Unmanaged.passUnretained(self).toOpaque())
            started.signal()
            run()
        }
        let argument = Unmanaged.passRetained(body).toOpaque()
        var attributes = pthread_attr_t()
        pthread_attr_init(&attributes)
        defer { pthread_attr_destroy(&attributes) }
        pthread_attr_setstacksize(&attributes, 8 << 20)
        var created = pthread_t()
        let rc = pthread_create(&created, &attributes, { argument in
            Unmanaged<ThreadBody>.fromOpaque(argument!).takeRetainedValue().run()
            return nil
        }, argument)
        if rc != 0 {
            Unmanaged<ThreadBody>.fromOpaque(argument).release()
            wakeup.pointee.data = nil
            uv_close(UnsafeMutableRawPointer(wakeup).assumingMemoryBound(to: uv_handle_t.self)) { handle in
                handle?.deallocate()
            }
            uv_run(uv, UV_RUN_DEFAULT)
            uv_loop_close(uv)
            uv.deallocate()
            throw LoopError(code: .uv, function: "pthread_create", errno: rc,
                            detail: String(cString: strerror(rc)))
        }
        thread = created
        started.wait()
    }

    /// The loop thread's entry point, retained until the thread runs it.
    private final class ThreadBody {
        let run: () -> Void
        init(_ run: @escaping () -> Void) { self.run = run }
    }

    private static func initWakeup(_ uv: UnsafeMutablePointer<uv_loop_t>,
                                   _ wakeup: UnsafeMutablePointer<uv_async_t>) -> LoopError? {
        let rc = uv_async_init(uv, wakeup) { handle in
            guard let handle, let data = handle.pointee.data else { return }
            Unmanaged<EventLoop>.fromOpaque(data).takeUnretainedValue().drain()
        }
        do {
            try uvCheck(rc, "uv_async_init")
            return nil
        } catch {
            return error
        }
    }

    /// The loop thread's body: run until every handle is closed, then close the loop.
    private func run() {
        uv_run(uv, UV_RUN_DEFAULT)
        while let finalizer = finalizers.popLast() {
            finalizer()
        }
        var rc = uv_loop_close(uv)
        if rc == UV_EBUSY.rawValue {
            // A handle outlived everything that owns one. Our own wrappers close
            // theirs at shutdown; the one case seen is libwebsockets 4.1 leaving
            // the uv_poll handle of a socket the peer reset mid-connect (its
            // wsi is freed, the handle never closed). Every lws context is
            // destroyed by now, so nothing will use it: name it, close it, and
            // free what lws abandoned (see `closeStragglers`), then finish.
            logOpenHandles()
            closeStragglers()
            uv_run(uv, UV_RUN_DEFAULT)
            rc = uv_loop_close(uv)
        }
        closeResult.withLock { $0 = rc }
        finished.signal()
    }

    private func closeStragglers() {
        uv_walk(uv, { handle, _ in
            guard let handle, uv_is_closing(handle) == 0 else { return }
            if handle.pointee.type == UV_POLL {
                // We make no uv_poll handles; lws allocates one per socket with
                // malloc (lws_malloc) and would free it in its close callback.
                // Its wsi is gone, so free it here once libuv is done with it.
                uv_close(handle) { closed in free(closed) }
            } else {
                uv_close(handle, nil)
            }
        }, nil)
    }

    private func logOpenHandles() {
        uv_walk(uv, { handle, arg in
            guard let handle, let arg else { return }
            let loop = Unmanaged<EventLoop>.fromOpaque(arg).takeUnretainedValue()
            let type = String(cString: uv_handle_type_name(handle.pointee.type))
            loop.logger.warning("closing a handle left open at loop close", metadata: [
                "type": "\(type)", "active": "\(uv_is_active(handle))",
                "closing": "\(uv_is_closing(handle))",
            ])
        }, Unmanaged.passUnretained(self).toOpaque())
    }

    // MARK: The cross-thread door

    /// Runs `task` on the loop thread, after the tasks enqueued before it
    /// by the same thread. Safe from any thread, including the loop's own
    /// (the task then runs on the next wakeup, never re-entrantly).
    ///
    /// Returns `false` (and drops the task) once shutdown has begun.
    @discardableResult
    public func execute(_ task: @escaping @Sendable () -> Void) -> Bool {
        door.withLock { door -> Bool in
            switch door.state {
            case .open, .shutdownRequested: break
            case .closed: return false
            }
            door.tasks.append(task)
            if door.tasks.count == 1 {
                // Under the lock, so the handle cannot be closed under us.
                uv_async_send(wakeup)
            }
            return true
        }
    }

    /// Drains the whole queue. Loop thread only.
    private func drain() {
        let tasks = door.withLock { door -> [@Sendable () -> Void] in
            var taken: [@Sendable () -> Void] = []
            swap(&taken, &door.tasks)
            return taken
        }
        for task in tasks { task() }
    }

    // MARK: Thread identity

    /// Whether the caller is running on this loop's thread: one thread-local
    /// read, cheap enough for `LoopBound`'s check on every access.
    public var inEventLoop: Bool { Self.isCurrent(identity) }

    /// This loop's identity for `isCurrent(_:)`: a hot path that checks its
    /// thread per call keeps this instead of the loop, so the check touches
    /// no reference count (the loop's is shared with every thread that
    /// posts work to it). Valid while the loop lives.
    public var identity: UnsafeMutableRawPointer { Unmanaged.passUnretained(self).toOpaque() }

    /// Whether the caller runs on the loop whose `identity` this is.
    public static func isCurrent(_ identity: UnsafeMutableRawPointer) -> Bool {
        roomkit_get_current_loop() == identity
    }

    /// Traps (in debug builds) when not called on the loop thread.
    @inlinable
    public func assertInEventLoop(file: StaticString = #fileID, line: UInt = #line) {
        assert(inEventLoop, "must be called on the event loop thread", file: file, line: line)
    }

    /// Traps (always) when not called on the loop thread.
    public func preconditionInEventLoop(file: StaticString = #fileID, line: UInt = #line) {
        precondition(inEventLoop, "must be called on the event loop thread", file: file, line: line)
    }

    // MARK: Handles and shutdown hooks (loop thread only)

    func register(_ handle: any LoopOwnedHandle) {
        liveHandles[ObjectIdentifier(handle)] = handle
    }

    func unregister(_ handle: any LoopOwnedHandle) {
        liveHandles.removeValue(forKey: ObjectIdentifier(handle))
    }

    /// Registers `hook` to run on the loop thread when shutdown begins, in
    /// reverse order of registration. Transports use this to close their
    /// connections and lws contexts. Returns an ID for `removeShutdownHook`.
    /// Loop thread only.
    @discardableResult
    public func addShutdownHook(_ hook: @escaping () -> Void) -> Int {
        preconditionInEventLoop()
        nextHookID += 1
        shutdownHooks.append((nextHookID, hook))
        return nextHookID
    }

    /// Registers `body` to run once the loop has stopped and every handle has
    /// finished closing (just before `uv_loop_close`). Used to free memory
    /// that C libraries may read until their last close callback. Loop thread only.
    public func addFinalizer(_ body: @escaping () -> Void) {
        preconditionInEventLoop()
        finalizers.append(body)
    }

    /// Removes a hook registered with `addShutdownHook`. Loop thread only.
    public func removeShutdownHook(_ id: Int) {
        preconditionInEventLoop()
        shutdownHooks.removeAll { $0.id == id }
    }

    /// Begins shutdown on the loop thread: hooks, then our handles, then the door.
    private func beginShutdown() {
        switch internalState {
        case .running: internalState = .shuttingDown
        case .shuttingDown: return
        }
        while let last = shutdownHooks.popLast() {
            last.hook()
        }
        for handle in Array(liveHandles.values) {
            handle.close()
        }
        // Close the door: run whatever is still queued, then refuse new work.
        drain()
        door.withLock { door in
            door.state = .closed
        }
        drain()
        wakeup.pointee.data = nil
        uv_close(UnsafeMutableRawPointer(wakeup).assumingMemoryBound(to: uv_handle_t.self)) { handle in
            handle?.deallocate()
        }
    }

    /// Shuts the loop down and waits for its thread to finish.
    ///
    /// Must not be called on the loop thread. Calling it again, or from
    /// several threads at once, is harmless: every call returns once the
    /// thread has exited.
    /// Throws when `uv_loop_close` did not return 0 (a handle was leaked).
    public func shutdown() throws(LoopError) {
        precondition(!inEventLoop, "shutdown() must not be called on the loop thread")
        let first = door.withLock { door -> Bool in
            switch door.state {
            case .open:
                door.state = .shutdownRequested
                door.tasks.append { [self] in beginShutdown() }
                if door.tasks.count == 1 { uv_async_send(wakeup) }
                return true
            case .shutdownRequested, .closed:
                return false
            }
        }
        if first {
            finished.wait()
            pthread_join(thread, nil)
            uv.deallocate()
            let waiters = joinState.withLock { state -> Int in
                state.joined = true
                return state.waiters
            }
            for _ in 0..<waiters { joinedSignal.signal() }
        } else {
            let wait = joinState.withLock { state -> Bool in
                if !state.joined { state.waiters += 1 }
                return !state.joined
            }
            if wait { joinedSignal.wait() }
        }
        try uvCheck(closeResult.withLock { $0 }, "uv_loop_close")
    }

    /// Milliseconds of the loop's cached clock (`uv_now`). Loop thread only.
    public var nowMilliseconds: UInt64 {
        assertInEventLoop()
        return uv_now(uv)
    }
}

/// A libuv handle wrapper owned by the loop: shutdown closes it.
protocol LoopOwnedHandle: AnyObject {
    /// Stops and closes the handle; idempotent. Loop thread only.
    func close()
}

/// Closes a libuv handle and frees its memory in the close callback, as
/// libuv requires (design.rst: memory may be released only after close).
func closeAndFree<Handle>(_ handle: UnsafeMutablePointer<Handle>) {
    let raw = UnsafeMutableRawPointer(handle)
    let base = raw.assumingMemoryBound(to: uv_handle_t.self)
    base.pointee.data = nil
    uv_close(base) { closed in
        guard let closed else { return }
        UnsafeMutableRawPointer(closed).deallocate()
    }
}
