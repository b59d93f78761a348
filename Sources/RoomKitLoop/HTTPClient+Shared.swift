extension HTTPClient {
    /// The loop's shared client for `configuration`: made on first use and
    /// kept until the loop shuts down (its `shutdown()` does nothing).
    /// For users that come and go, such as recording players: they cancel
    /// their requests instead of shutting the client down (see `LoopShared`).
    /// Loop thread only.
    public static func shared(on loop: EventLoop, configuration: HTTPClientConfiguration = .init()) throws(LoopError) -> HTTPClient {
        try LoopShared.instance(on: loop, configuration: configuration) { () throws(LoopError) in
            let client = try HTTPClient(loop: loop, configuration: configuration)
            client.isShared = true
            return client
        }
    }
}
