import ServiceLifecycle

extension RoomHost: Service {
    /// Runs until graceful shutdown (or cancellation), then logs out of every
    /// room (each reaches `LOGOUT`, so the others see the bot leave at once)
    /// and closes the connection (`shutdown()`). In a `ServiceGroup`, list
    /// the host after its loop and after a `PluginManager` of it, so the
    /// plugins hear the logouts before they unload.
    public func run() async throws {
        try? await gracefulShutdown()
        await shutdown()
    }
}
