import Synchronization

extension HTTPClient {
    /// The loop's shared client for `configuration`: made on first use and
    /// kept until the loop shuts down (its `shutdown()` does nothing).
    ///
    /// For users that come and go, such as recording players: each of them
    /// having its own client would create and destroy an lws context every
    /// time, and a destroyed lws 4.1 context closes its event fd twice (see
    /// `shutdown()`). Such users cancel their requests instead. Loop thread only.
    public static func shared(on loop: EventLoop, configuration: HTTPClientConfiguration = .init()) throws(LoopError) -> HTTPClient {
        loop.preconditionInEventLoop()
        let key = SharedKey(loop: ObjectIdentifier(loop), configuration: configuration)
        if let client = sharedClients.withLock({ $0[key] }) { return client }
        let client = try HTTPClient(loop: loop, configuration: configuration)
        client.isShared = true
        sharedClients.withLock { $0[key] = client }
        // Runs before the client's own hooks (reverse order): forget it, then it closes.
        loop.addShutdownHook { sharedClients.withLock { _ = $0.removeValue(forKey: key) } }
        return client
    }

    private struct SharedKey: Hashable, Sendable {
        let loop: ObjectIdentifier
        let configuration: HTTPClientConfiguration
    }

    /// Shared clients by loop and configuration; an entry leaves when its loop shuts down.
    private static let sharedClients = LockedValue<[SharedKey: HTTPClient]>([:])
}
