extension WebSocketClient {
    /// The loop's shared client for `configuration`: made on first use and
    /// kept until the loop shuts down (its `shutdown()` does nothing).
    /// For users that come and go, such as room hosts: they close their
    /// connections instead of the client (see `LoopShared`). Loop thread only.
    public static func shared(on loop: EventLoop, configuration: WebSocketClientConfiguration = .init()) throws(LoopError) -> WebSocketClient {
        try LoopShared.instance(on: loop, configuration: configuration) { () throws(LoopError) in
            let client = try WebSocketClient(loop: loop, configuration: configuration)
            client.isShared = true
            return client
        }
    }
}
