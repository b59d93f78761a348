import Dispatch
import ServiceLifecycle

extension PluginManager: Service {
    /// Runs until graceful shutdown (or cancellation), then unloads every
    /// plugin (`on_unload` after each one's queued calls; `unloadAll`). List
    /// it before its host in a `ServiceGroup`: the host stops first, and its
    /// plugins hear every room's `LOGOUT`.
    public func run() async throws {
        try? await gracefulShutdown()
        // unloadAll waits for each plugin's queue: not on the cooperative pool.
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            DispatchQueue.global().async { [self] in
                unloadAll()
                continuation.resume()
            }
        }
    }
}

extension PluginManager {
    /// Whether every process plugin has finished every event sent to it
    /// (`roombot simulate` waits for this between steps).
    public var processPluginsIdle: Bool {
        runtimes.withLock { $0 }.allSatisfy { runtime in
            runtime.isIdleOnItsQueue && (runtime.process?.idle ?? true)
        }
    }
}
