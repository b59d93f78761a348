extension HTTPClient: LoopSharedClient {
    convenience init(loop: EventLoop, configuration: HTTPClientConfiguration) throws(LoopError) {
        try self.init(loop: loop, configuration: configuration, logger: nil)
    }

    /// The loop's shared client for `configuration`: made on first use and
    /// kept until the loop shuts down (its `shutdown()` does nothing).
    /// For users that come and go, such as recording players: they cancel
    /// their requests instead of shutting the client down (see `LoopShared`).
    /// Loop thread only.
    public static func shared(on loop: EventLoop, configuration: HTTPClientConfiguration = .init()) throws(LoopError) -> HTTPClient {
        try sharedClient(on: loop, configuration: configuration)
    }
}
