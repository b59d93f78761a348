extension WebSocketClient: LoopSharedClient {
    convenience init(loop: EventLoop, configuration: WebSocketClientConfiguration) throws(LoopError) {
        try self.init(loop: loop, configuration: configuration, logger: nil)
    }

    /// The loop's shared client for `configuration`: made on first use and
    /// kept until the loop shuts down (its `shutdown()` does nothing).
    /// For users that come and go, such as room hosts: they close their
    /// connections instead of the client (see `LoopShared`). Loop thread only.
    public static func shared(on loop: EventLoop, configuration: WebSocketClientConfiguration = .init()) throws(LoopError) -> WebSocketClient {
        try sharedClient(on: loop, configuration: configuration)
    }
}
