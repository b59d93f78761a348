extension PluginManager {
    /// Each active plugin's posted calls not yet finished (its queue depth),
    /// by plugin name; read at each `/metrics` scrape. Any thread.
    public var queueDepths: [String: Int] {
        var depths: [String: Int] = [:]
        for runtime in runtimes.withLock({ $0 }) where runtime.isActive {
            depths[runtime.spec.name] = runtime.outstanding.withLock { $0.depth }
        }
        return depths
    }
}
