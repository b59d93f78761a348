/// One instance per loop, type and key, made on first use and kept until the
/// loop shuts down: the registry behind `WebSocketClient.shared(on:)` and
/// `HTTPClient.shared(on:)`.
///
/// Why: a destroyed lws 4.1 context closes its event fd twice, which can close
/// a descriptor another part of the process opened in between, so users that
/// come and go (room hosts, recording players) share a long-lived client
/// instead of creating and destroying their own. Loop thread only.
enum LoopShared {
    private struct Key: Hashable, @unchecked Sendable {
        // @unchecked Sendable: AnyHashable of a Sendable, Hashable configuration.
        let loop: ObjectIdentifier
        let type: ObjectIdentifier
        let configuration: AnyHashable
    }

    private static let instances = LockedValue<[Key: AnyObject]>([:])

    /// The loop's instance of `Instance` for `configuration`, made by `make` once.
    static func instance<Instance: AnyObject, Configuration: Hashable & Sendable>(
        on loop: EventLoop, configuration: Configuration, make: () throws(LoopError) -> Instance
    ) throws(LoopError) -> Instance {
        loop.preconditionInEventLoop()
        let key = Key(loop: ObjectIdentifier(loop), type: ObjectIdentifier(Instance.self),
                      configuration: AnyHashable(configuration))
        if let existing = instances.withLock({ $0[key] }) as? Instance { return existing }
        let made = try make()
        instances.withLock { $0[key] = made }
        // Runs before the instance's own hooks (reverse order): forget it, then it closes.
        loop.addShutdownHook { instances.withLock { _ = $0.removeValue(forKey: key) } }
        return made
    }
}

/// A client that users who come and go share per loop and configuration
/// (`LoopShared`): the WebSocket and the HTTP client.
protocol LoopSharedClient: AnyObject {
    associatedtype Configuration: Hashable & Sendable
    init(loop: EventLoop, configuration: Configuration) throws(LoopError)
    /// Set on the shared instance: its `shutdown()` then does nothing.
    var isShared: Bool { get set }
}

extension LoopSharedClient {
    /// The loop's shared client for `configuration`: made on first use and
    /// kept until the loop shuts down (its `shutdown()` does nothing).
    /// Loop thread only.
    static func sharedClient(on loop: EventLoop, configuration: Configuration) throws(LoopError) -> Self {
        try LoopShared.instance(on: loop, configuration: configuration) { () throws(LoopError) in
            let client = try Self(loop: loop, configuration: configuration)
            client.isShared = true
            return client
        }
    }
}
