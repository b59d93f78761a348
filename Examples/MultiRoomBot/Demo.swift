import Foundation
import Logging
import RoomKit
import RoomKitLoop
import RoomKitPluginHost
import RoomKitProtocol
import RoomKitServer
import Synchronization

/// Everything the example runs, wired the way an app embeds RoomKit: a
/// `RoomHost` on an `EventLoop`, a `PluginManager` on the host, and the
/// host's event stream feeding the app's own bookkeeping.
struct World: Sendable {
    /// The main server (embedded or `--server`).
    let serverURL: String
    let embedded: EmbeddedServer?
    /// A second, in-process roomd for the canary (stopped by the tour).
    let canaryServer: EmbeddedServer
    /// The bot's loop: its hosts, their timers and sockets run here.
    let loop: EventLoop
    let bot: RoomHost
    /// A second host of the bot, on the canary server, with a short reconnect window.
    let canary: RoomHost
    let plugins: PluginManager
    let crowd: Crowd
    let user: LoginUser
    let stats: Stats
    let outage: Outage
    /// Temporary files of this run (the resolved manifest).
    let workDirectory: String

    /// The handle of a room of either bot host.
    func room(_ id: String) -> Room? { bot.room(id) ?? canary.room(id) }
}

/// Runs the example: starts the world, shows it, plays the tour, prints the
/// summary, and takes everything down again in order.
final class Demo: Sendable {
    enum Outcome { case completed, interrupted, failed }

    let options: DemoOptions
    let console: Console
    /// The tour step being played (shown by the live view).
    let step = LockedValue("starting")
    /// A note under the room table (the replay hint in `--forever`).
    let note = LockedValue<String?>(nil)

    init(options: DemoOptions, console: Console) {
        self.options = options
        self.console = console
    }

    func run() async -> Outcome {
        let world: World
        do {
            world = try await start()
        } catch {
            for line in "\(error)".split(separator: "\n") { console.log("error: \(line)") }
            if console.live { Console.write(console.transcript.joined(separator: "\n") + "\n") }
            return .failed
        }
        let view = TerminalView(console: console)
        let ticker = console.live
            ? view.start { [self] in dashboard(world) }
            : plainTicker(world)
        let stopper = Stopper { view.stop() }
        await watchSignals(on: world.loop, stopper: stopper)

        let tour = Task {
            var tour = Tour(world: world, demo: self)
            return await tour.play()
        }
        stopper.onFire { tour.cancel() }
        let report = await tour.value
        var outcome: Outcome = report.failure == nil ? .completed : (stopper.fired ? .interrupted : .failed)
        if options.forever && outcome == .completed {
            await keepRunning(world, stopper: stopper)
        }

        // Leave every room (nothing left after a full tour; an interrupted one may), so the summary is final.
        await world.bot.logoutRoom()
        await world.canary.logoutRoom()
        ticker.cancel()
        view.stop()
        let summary = Summary(world: world, report: report, elapsed: console.elapsed, options: options)
        await stop(world)
        if console.live { Console.write(console.transcript.joined(separator: "\n") + "\n") }
        Console.write(summary.lines.joined(separator: "\n") + "\n")
        if outcome == .completed && stopper.fired && !options.forever { outcome = .interrupted }
        return outcome
    }

    /// Starts the servers, the crowd and the bot; the bot joins every room.
    private func start() async throws -> World {
        let workDirectory = FileManager.default.temporaryDirectory
            .appendingPathComponent("multiroom-bot-\(UUID().uuidString.prefix(8))").path
        try FileManager.default.createDirectory(atPath: workDirectory, withIntermediateDirectories: true)
        var cleanup: [@Sendable () async -> Void] = [{ try? FileManager.default.removeItem(atPath: workDirectory) }]
        do {
            // 1. The plugins first: a missing library should fail before anything starts.
            let manifest = try ExampleManifest.resolve(template: try ExampleManifest.template(options.manifestTemplate),
                                                       into: workDirectory)

            // 2. The servers: the main one (embedded unless --server) and the canary's.
            let serverLogger = Logger(label: "roomd")
            let embedded: EmbeddedServer?
            let serverURL: String
            let minter: TokenMinter
            if let external = options.server {
                embedded = nil
                serverURL = external.url
                minter = TokenMinter(secret: external.secret)
                console.log("using roomd at \(serverURL)")
            } else {
                let server = try await EmbeddedServer(name: "roomd", secret: Summary.devSecret, logger: serverLogger)
                cleanup.append { await server.stop() }
                embedded = server
                serverURL = server.url
                minter = TokenMinter(secret: Summary.devSecret)
                console.log("embedded roomd listening on \(serverURL) (data in \(server.dataDirectory))")
            }
            let canarySecret = UUID().uuidString
            let canaryServer = try await EmbeddedServer(name: "roomd-canary", secret: canarySecret, logger: serverLogger)
            cleanup.append { await canaryServer.stop() }
            console.log("second roomd for the canary on \(canaryServer.url)")

            // 3. The bot: one loop, one host per server, plugins on the main host.
            unblockStopSignals()  // the loop thread inherits this thread's signal mask
            let loop = try EventLoop(name: "bot", logger: Logger(label: "bot"))
            cleanup.append { try? loop.shutdown() }
            var configuration = RoomHostConfiguration(serverURL: serverURL)
            configuration.loginTimeout = .seconds(10)
            configuration.reconnectWindow = .seconds(60)
            configuration.backoffFirst = options.pace.backoff
            configuration.backoffCap = .seconds(5)
            let bot = try RoomHost(loop: loop, configuration: configuration, logger: Logger(label: "bot"),
                                   tokenProvider: minter.provider)
            cleanup.append { await bot.shutdown() }
            var canaryConfiguration = RoomHostConfiguration(serverURL: canaryServer.url)
            canaryConfiguration.reconnectWindow = options.pace.canaryWindow
            canaryConfiguration.backoffFirst = .milliseconds(200)
            canaryConfiguration.backoffCap = .milliseconds(500)
            let canary = try RoomHost(loop: loop, configuration: canaryConfiguration, logger: Logger(label: "canary"),
                                      tokenProvider: TokenMinter(secret: canarySecret).provider)
            cleanup.append { await canary.shutdown() }
            let stats = Stats()
            let outage = Outage()
            follow(bot, server: "main", stats: stats, outage: outage)
            follow(canary, server: "canary", stats: stats, outage: outage)

            let console = self.console
            let plugins = PluginManager(host: bot, logger: Logger(label: "plugins")) { name, status, message in
                console.log("plugin \(name) \(status.rawValue)\(message.map { ": \($0)" } ?? "")")
            }
            cleanup.append { plugins.unloadAll() }
            let failures = plugins.load(manifest)
            guard failures.isEmpty else { throw TourError(failures.map(\.description).joined(separator: "\n")) }

            // 4. The people, then the bot joins every room (all on one connection).
            let crowd = try Crowd(serverURL: serverURL, minter: minter, pace: options.pace.action, outage: outage,
                                  logger: Logger(label: "participants"))
            cleanup.append { await crowd.leave() }
            try await crowd.enter()
            console.log("\(crowd.people.count) participants are chatting in \(Crowd.rooms.count) rooms")
            let user = LoginUser(id: "bot", name: "Multi-room bot")
            try await withThrowingTaskGroup(of: Void.self) { group in
                for room in Crowd.rooms {
                    group.addTask { try await bot.loginRoom(room, user: user) }
                }
                try await group.waitForAll()
            }
            try await canary.loginRoom("canary", user: user)
            return World(serverURL: serverURL, embedded: embedded, canaryServer: canaryServer, loop: loop, bot: bot,
                         canary: canary, plugins: plugins, crowd: crowd, user: user, stats: stats, outage: outage,
                         workDirectory: workDirectory)
        } catch {
            for undo in cleanup.reversed() { await undo() }
            throw error
        }
    }

    /// Counts the host's events and narrates its reasons.
    private func follow(_ host: RoomHost, server: String, stats: Stats, outage: Outage) {
        let events = host.events()  // subscribe now, before the first login
        let console = self.console
        Task {
            for await event in events {
                stats.record(event, server: server)
                switch event {
                case .roomStateChanged(let room, let reason, let code, _):
                    outage.bot(reason, in: room)
                    let detail = code == .success ? "" : " (\(code.rawValue))"
                    console.log("  \(room.padding(toLength: 8, withPad: " ", startingAt: 0)) \(reason)\(detail)")
                case .throwError(let domain, let code, let message):
                    console.log("  throwError \(domain) \(code.rawValue): \(message)")
                default:
                    break
                }
            }
        }
    }

    /// `--forever`: back into every room until SIGINT or SIGTERM.
    private func keepRunning(_ world: World, stopper: Stopper) async {
        step.withLock { $0 = "running (--forever): Ctrl-C to stop" }
        console.log("── --forever: the bot rejoins every room and keeps running; SIGINT or SIGTERM stops it")
        let hint = "replay a room meanwhile: \(Summary.replayHint(world: world, options: options))"
        note.withLock { $0 = hint }
        console.log("   " + hint)
        for room in world.crowd.currentRooms {
            do {
                try await world.bot.loginRoom(room, user: world.user)
            } catch {
                console.log("   \(room): \(error)")
            }
        }
        await stopper.wait()
        step.withLock { $0 = "stopping" }
        console.log("── stopping: logoutRoom() of every room")
        await world.bot.logoutRoom()
    }

    /// Takes everything down: people first, then the bot, then the servers.
    private func stop(_ world: World) async {
        await world.crowd.leave()
        world.plugins.unloadAll()
        await world.bot.shutdown()
        await world.canary.shutdown()
        try? world.loop.shutdown()
        await world.embedded?.stop()
        await world.canaryServer.stop()
        try? FileManager.default.removeItem(atPath: world.workDirectory)
    }

    /// Without a TTY: a totals line every few seconds.
    private func plainTicker(_ world: World) -> Task<Void, Never> {
        let every: Duration = options.pace.step < .seconds(1) ? .seconds(2) : .seconds(4)
        let console = self.console
        return Task {
            while !Task.isCancelled {
                try? await Task.sleep(for: every)
                if Task.isCancelled { break }
                let rooms = world.stats.rooms.map { "\($0.id) \($0.count.events)" }.joined(separator: " · ")
                console.log(String(format: "events %d (%.0f/s) · ", world.stats.total, world.stats.rate) + rooms)
            }
        }
    }

    /// SIGINT/SIGTERM: the first stops gracefully, a second one at once.
    private func watchSignals(on loop: EventLoop, stopper: Stopper) async {
        let console = self.console
        _ = try? await loop.submit {
            try SignalWatcher(loop: loop, signals: [SIGINT, SIGTERM]) { signal in
                console.log("signal \(signal): stopping")
                if stopper.fire() > 1 { exit(130) }
            }
        }
    }

    /// Lets SIGINT/SIGTERM reach the loop's signal watcher: threads of the
    /// Swift concurrency pool may run with them blocked, and a new loop
    /// thread inherits its creator's mask.
    private func unblockStopSignals() {
        var signals = sigset_t()
        sigemptyset(&signals)
        sigaddset(&signals, SIGINT)
        sigaddset(&signals, SIGTERM)
        pthread_sigmask(SIG_UNBLOCK, &signals, nil)
    }
}

/// A one-shot stop request (signals), with waiters and actions.
final class Stopper: Sendable {
    private struct State {
        var count = 0
        var waiters: [CheckedContinuation<Void, Never>] = []
        var actions: [@Sendable () -> Void] = []
    }
    private let state = LockedValue(State())
    private let last: @Sendable () -> Void

    /// `last` runs before a forced exit (a second signal): restore the terminal.
    init(last: @escaping @Sendable () -> Void) {
        self.last = last
    }

    var fired: Bool { state.withLock { $0.count > 0 } }

    /// Returns how many times it fired (including this one).
    @discardableResult
    func fire() -> Int {
        let (count, waiters, actions) = state.withLock { state in
            state.count += 1
            defer { state.waiters.removeAll(); state.actions.removeAll() }
            return (state.count, state.waiters, state.actions)
        }
        if count > 1 { last() }
        for action in actions { action() }
        for waiter in waiters { waiter.resume() }
        return count
    }

    func onFire(_ action: @escaping @Sendable () -> Void) {
        let now = state.withLock { state -> Bool in
            if state.count > 0 { return true }
            state.actions.append(action)
            return false
        }
        if now { action() }
    }

    func wait() async {
        await withCheckedContinuation { continuation in
            let now = state.withLock { state -> Bool in
                if state.count > 0 { return true }
                state.waiters.append(continuation)
                return false
            }
            if now { continuation.resume() }
        }
    }
}

/// A tour or setup failure, said plainly.
struct TourError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
