import Dispatch
/// The loop as a Swift concurrency executor: an actor whose
/// `unownedExecutor` is the loop's runs its methods on the loop thread, so
/// it may call loop-thread-only APIs directly.
extension EventLoop: SerialExecutor {
    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let executor = asUnownedSerialExecutor()
        let accepted = execute {
            job.runSynchronously(on: executor)
        }
        precondition(accepted, "a job was enqueued on a shut-down EventLoop")
    }

    public func asUnownedSerialExecutor() -> UnownedSerialExecutor {
        UnownedSerialExecutor(ordinary: self)
    }

    public func isSameExclusiveExecutionContext(other: EventLoop) -> Bool {
        self === other
    }

    public func checkIsolated() {
        preconditionInEventLoop()
    }
}

extension EventLoop {
    /// Runs `body` on the loop thread and returns its result to the caller.
    /// Throws `LoopError.shutdown` if the loop no longer accepts work.
    public func submit<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            let accepted = execute {
                continuation.resume(with: Result { try body() })
            }
            if !accepted {
                continuation.resume(throwing: LoopError(code: .shutdown, function: "EventLoop.submit",
                                                        detail: "the loop is shut down"))
            }
        }
    }
}

extension EventLoop {
    /// Runs `body` on the loop thread and blocks the caller until it returns,
    /// passing back its result or error. For start-up code and tests; must not
    /// be called on the loop thread (it would wait for itself).
    public func runAndWait<T>(_ body: @escaping () throws -> T) throws -> T {
        precondition(!inEventLoop, "runAndWait would deadlock on the loop thread")
        let handoff = Handoff<T>(body)
        let done = DispatchSemaphore(value: 0)
        let accepted = execute {
            handoff.result = Result { try handoff.body() }
            done.signal()
        }
        guard accepted else {
            throw LoopError(code: .shutdown, function: "EventLoop.runAndWait", detail: "the loop is shut down")
        }
        done.wait()
        return try handoff.result!.get()
    }
}

/// Carries a closure to the loop and its result back.
private final class Handoff<T>: @unchecked Sendable {
    // @unchecked Sendable: `body` runs only on the loop thread; `result` is
    // written there and read by the caller after the semaphore handoff.
    let body: () throws -> T
    var result: Result<T, any Error>?
    init(_ body: @escaping () throws -> T) { self.body = body }
}
