import Logging
import RoomKit
import RoomKitLoop
import ServiceLifecycle

extension BotRunner: Service {
    /// Starts the bot (plugins, control API: `startServices()`) and runs its
    /// parts (`services`) as one `ServiceGroup` until graceful shutdown
    /// (SIGTERM, Ctrl-C, or an enclosing group ending). Then the group stops
    /// them in reverse: the first logins are cancelled (or the fleet
    /// drains) and every room reaches `LOGOUT`, the host closes, plugins
    /// unload, the control API closes, the event log is flushed, the loop
    /// shuts down, the store closes.
    public func run() async throws {
        try startServices()
        let running = launch()
        try await withTaskCancellationHandler {
            try await withGracefulShutdownHandler {
                try await running.task.value
            } onGracefulShutdown: {
                Task { await running.group.triggerGracefulShutdown() }
            }
        } onCancel: {
            running.task.cancel()
        }
    }
}

extension BotRunner {
    /// The bot's long-lived parts as services, in start order; a group stops
    /// them in reverse. The store outlives the loop (the loop's last
    /// callbacks save cursors); the loop outlives everything built on it;
    /// the plugins outlive the host (they hear every `LOGOUT`); the bot's
    /// own work (first logins, or the fleet) stops first.
    ///
    /// For a program's own `ServiceGroup` (`roombot run`), after
    /// `startServices()`, instead of `run()` or `start()`/`stop()` (which
    /// run these in a group of their own). Run them once.
    public var services: [ServiceGroupConfiguration.ServiceConfiguration] {
        [
            .init(service: ClosureService { [self] in
                try? await gracefulShutdown()
                store.close()
                phase.withLock { $0 = .stopped }
            }, serviceName: "store"),
            .init(service: loop, serviceName: "loop"),
            .init(service: ClosureService { [self] in
                try? await gracefulShutdown()
                metrics.stopLagProbe(loop: loop)
                events.close()
            }, serviceName: "event log"),
            .init(service: ClosureService { [self] in
                try? await gracefulShutdown()
                if let control { try? loop.runAndWait { control.stop() } }
            }, serviceName: "control API"),
            .init(service: plugins, serviceName: "plugins"),
            .init(service: host, serviceName: "host"),
            .init(service: ClosureService { [self] in await work() }, serviceName: fleet == nil ? "logins" : "fleet"),
        ]
    }

    /// `startServices()`, then the parts run in a group of their own (in
    /// the background); returns when every first login has an outcome
    /// (failures are in the event log; they do not stop the bot). `stop()`
    /// ends the group.
    public func start() async throws {
        try startServices()
        launch()
        await startJoining().value
    }

    /// Graceful stop, also in the middle of the first logins (those still
    /// pending are cancelled) and before `start()` (the parts start and stop
    /// at once): the group started by `start()` stops every part in reverse
    /// (`services`). Returns once the store is closed.
    public func stop() async {
        phase.withLock { if $0 == .initial { $0 = .stopping } }
        let group = launch()
        await group.group.triggerGracefulShutdown()
        _ = try? await group.task.value
    }

    /// Runs the parts in a group in a task, once; returns that group.
    @discardableResult
    private func launch() -> (group: ServiceGroup, task: Task<Void, any Error>) {
        running.withLock { running in
            if let running { return running }
            let group = ServiceGroup(configuration: ServiceGroupConfiguration(services: services, logger: logger))
            let launched = (group: group, task: Task { try await group.run() })
            running = launched
            return launched
        }
    }

    /// The bot's own work, as a service: starts the first logins (or the
    /// fleet) unless stopping already; on graceful shutdown freezes the room
    /// set (the shutdown's `LOGOUT`s must not erase what a restart rejoins),
    /// lets the fleet hand its shards back (docs/FLEET.md), then logs out of
    /// every room until the cancelled first logins have ended.
    func work() async {
        if !isStopping { startJoining() }
        try? await gracefulShutdown()
        phase.withLock { $0 = .stopping }
        if let fleet {
            await fleet.drain()
            try? loop.runAndWait { fleet.close() }
        }
        if let pending = joining.withLock({ $0 }) {
            pending.cancel()
            await drain(pending)
        } else {
            _ = await host.logoutRoom()
        }
    }

    /// Logs out of every room until the cancelled first logins have ended:
    /// a login that began in the instant of the cancel, after a logout pass
    /// looked, is ended by the next pass (each pass waits for its logouts).
    private func drain(_ pending: Task<Void, Never>) async {
        let ended = LockedValue(false)
        let watcher = Task {
            await pending.value
            ended.withLock { $0 = true }
        }
        repeat {
            _ = await host.logoutRoom()
            if ended.withLock({ $0 }) { break }
            try? await Task.sleep(for: .milliseconds(20))
        } while !ended.withLock({ $0 })
        await watcher.value
    }
}
