import Dispatch
import ServiceLifecycle

extension EventLoop: Service {
    /// Runs until graceful shutdown (or cancellation), then shuts the loop
    /// down and waits for its thread. Put the loop *first* in a
    /// `ServiceGroup`: services shut down in reverse order, so everything
    /// built on the loop has stopped before it goes.
    public func run() async throws {
        try? await gracefulShutdown()
        // shutdown() blocks until the loop thread has exited: not on the
        // cooperative pool.
        let result: Result<Void, LoopError> = await withCheckedContinuation { continuation in
            DispatchQueue.global().async { [self] in
                continuation.resume(returning: Result { () throws(LoopError) in try shutdown() })
            }
        }
        try result.get()
    }
}
