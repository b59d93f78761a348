import ServiceLifecycle

extension RoomServer: Service {
    /// Runs until graceful shutdown (or cancellation), then stops the server
    /// (connections closed with 1001, sessions kept for resume, storage
    /// flushed; `stop()`) and returns once it has stopped. The server is
    /// listening from its `init`, on the loop; list it after its loop in a
    /// `ServiceGroup`.
    public func run() async throws {
        try? await gracefulShutdown()
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let accepted = loop.execute { [self] in
                stop { continuation.resume() }
            }
            if !accepted { continuation.resume() }  // the loop is gone, and the server with it
        }
    }
}
