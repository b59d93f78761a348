import ServiceLifecycle

extension BotRunner: Service {
    /// Starts the bot (plugins, control API, logins), runs until graceful
    /// shutdown (SIGTERM, Ctrl-C, or the group ending), then stops it in
    /// order: every room reaches `LOGOUT`, plugins unload, the control API
    /// closes, the event log is flushed, the loop shuts down. A graceful
    /// shutdown during the start cancels what is left of it.
    public func run() async throws {
        try await cancelWhenGracefulShutdown { [self] in try await start() }
        try? await gracefulShutdown()
        await stop()
    }
}
