import Foundation
import Logging
import RoomKit
import RoomKitLoop
import RoomKitPluginHost
import RoomKitProtocol
import RoomKitCLI
import RoomKitServer
import ServiceLifecycle
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

/// Runs the example: builds the world, runs its parts as one
/// `ServiceGroup` (the servers, the loop, the plugins, the hosts, the crowd
/// and the tour, in that order), prints the summary. The tour ending (or
/// SIGINT/SIGTERM) stops the parts in reverse: the crowd leaves, the hosts
/// log out and close, the plugins unload, the loop closes, the servers stop.
final class Demo: Sendable {
    enum Outcome { case completed, interrupted, failed }

    let options: DemoOptions
    let console: Console
    /// The tour step being played (shown by the live view).
    let step = LockedValue("starting")
    /// A note under the room table (the replay hint in `--forever`).
    let note = LockedValue<String?>(nil)
    /// What the tour service found: the summary and the outcome.
    private let result = LockedValue<(summary: Summary?, outcome: Outcome)>((nil, .failed))

    init(options: DemoOptions, console: Console) {
        self.options = options
        self.console = console
    }

    func run() async -> Outcome {
        var parts: [ServiceGroupConfiguration.ServiceConfiguration] = []
        let world: World
        do {
            world = try await build(into: &parts)
        } catch {
            // What was built stops in reverse, the same way as after a tour.
            let group = ServiceGroup(configuration: ServiceGroupConfiguration(services: parts, logger: Logger(label: "bot")))
            await group.triggerGracefulShutdown()
            try? await group.run()
            for line in "\(error)".split(separator: "\n") { console.log("error: \(line)") }
            if console.live { Console.write(console.transcript.joined(separator: "\n") + "\n") }
            return .failed
        }
        parts.append(.init(service: ClosureService { [self] in await tour(world) }, successTerminationBehavior: .gracefullyShutdownGroup,
                           failureTerminationBehavior: .gracefullyShutdownGroup, serviceName: "tour"))
        do {
            try await ProgramServices.group(parts, logger: Logger(label: "bot")).run()
        } catch {
            console.log("error: \(error)")
        }
        let (summary, outcome) = result.withLock { $0 }
        if console.live { Console.write(console.transcript.joined(separator: "\n") + "\n") }
        if let summary { Console.write(summary.lines.joined(separator: "\n") + "\n") }
        return outcome
    }

    /// The bot's own work, as the group's last service: the bot joins every
    /// room, the tour plays (cut short by SIGINT/SIGTERM), `--forever` keeps
    /// running until a signal, then the bot leaves every room and the
    /// summary is taken. Returning stops the group.
    private func tour(_ world: World) async {
        let interrupted = LockedValue(false)
        let tour = Task {
            do {
                try await join(world)
            } catch {
                return TourReport(stepsDone: [], failure: "\(error)")
            }
            var tour = Tour(world: world, demo: self)
            return await tour.play()
        }
        let view = TerminalView(console: console)
        let ticker = console.live
            ? view.start { [self] in dashboard(world) }
            : plainTicker(world)
        let report = await withGracefulShutdownHandler {
            await tour.value
        } onGracefulShutdown: { [console] in
            console.log("SIGINT or SIGTERM: stopping")
            interrupted.withLock { $0 = true }
            tour.cancel()
        }
        var outcome: Outcome = report.failure == nil ? .completed : (interrupted.withLock { $0 } ? .interrupted : .failed)
        if options.forever && outcome == .completed {
            await keepRunning(world)
        }

        // Leave every room (nothing left after a full tour; an interrupted one may), so the summary is final.
        await world.bot.logoutRoom()
        await world.canary.logoutRoom()
        ticker.cancel()
        view.stop()
        if outcome == .completed && interrupted.withLock({ $0 }) && !options.forever { outcome = .interrupted }
        let summary = Summary(world: world, report: report, elapsed: console.elapsed, options: options)
        result.withLock { $0 = (summary, outcome) }
    }

    /// Builds the servers, the loop, the hosts, the plugins and the crowd;
    /// each long-lived part is appended to `parts` as soon as it exists.
    private func build(into parts: inout [ServiceGroupConfiguration.ServiceConfiguration]) async throws -> World {
        let workDirectory = FileManager.default.temporaryDirectory
            .appendingPathComponent("multiroom-bot-\(UUID().uuidString.prefix(8))").path
        try FileManager.default.createDirectory(atPath: workDirectory, withIntermediateDirectories: true)
        parts.append(.init(service: ClosureService {
            try? await gracefulShutdown()
            try? FileManager.default.removeItem(atPath: workDirectory)
        }, serviceName: "work-directory"))

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
            parts.append(.init(service: server, serviceName: "roomd"))
            embedded = server
            serverURL = server.url
            minter = TokenMinter(secret: Summary.devSecret)
            console.log("embedded roomd listening on \(serverURL) (data in \(server.dataDirectory))")
        }
        let canarySecret = UUID().uuidString
        let canaryServer = try await EmbeddedServer(name: "roomd-canary", secret: canarySecret, logger: serverLogger)
        parts.append(.init(service: canaryServer, serviceName: "roomd-canary"))
        console.log("second roomd for the canary on \(canaryServer.url)")

        // 3. The bot: one loop, plugins on the main host, one host per server.
        let loop = try EventLoop(name: "bot", logger: Logger(label: "bot"))
        parts.append(.init(service: loop, serviceName: "loop"))
        var configuration = RoomHostConfiguration(serverURL: serverURL)
        configuration.loginTimeout = .seconds(10)
        configuration.reconnectWindow = .seconds(60)
        configuration.backoffFirst = options.pace.backoff
        configuration.backoffCap = .seconds(5)
        let bot = try RoomHost(loop: loop, configuration: configuration, logger: Logger(label: "bot"),
                               tokenProvider: minter.provider)
        let console = self.console
        let plugins = PluginManager(host: bot, logger: Logger(label: "plugins")) { name, status, message in
            console.log("plugin \(name) \(status.rawValue)\(message.map { ": \($0)" } ?? "")")
        }
        // The plugins outlive the host: they hear every room's LOGOUT.
        parts.append(.init(service: plugins, serviceName: "plugins"))
        parts.append(.init(service: bot, serviceName: "bot"))
        var canaryConfiguration = RoomHostConfiguration(serverURL: canaryServer.url)
        canaryConfiguration.reconnectWindow = options.pace.canaryWindow
        canaryConfiguration.backoffFirst = .milliseconds(200)
        canaryConfiguration.backoffCap = .milliseconds(500)
        let canary = try RoomHost(loop: loop, configuration: canaryConfiguration, logger: Logger(label: "canary"),
                                  tokenProvider: TokenMinter(secret: canarySecret).provider)
        parts.append(.init(service: canary, serviceName: "canary"))
        let stats = Stats()
        let outage = Outage()
        follow(bot, server: "main", stats: stats, outage: outage)
        follow(canary, server: "canary", stats: stats, outage: outage)
        let failures = plugins.load(manifest)
        guard failures.isEmpty else { throw TourError(failures.map(\.description).joined(separator: "\n")) }

        // 4. The people (they enter once the group runs: `join`).
        let crowd = try Crowd(serverURL: serverURL, minter: minter, pace: options.pace.action, outage: outage,
                              logger: Logger(label: "participants"))
        parts.append(.init(service: ClosureService {
            try? await gracefulShutdown()
            await crowd.leave()
        }, serviceName: "crowd"))
        let user = LoginUser(id: "bot", name: "Multi-room bot")
        return World(serverURL: serverURL, embedded: embedded, canaryServer: canaryServer, loop: loop, bot: bot,
                     canary: canary, plugins: plugins, crowd: crowd, user: user, stats: stats, outage: outage,
                     workDirectory: workDirectory)
    }

    /// The people enter, then the bot joins every room (all on one connection).
    private func join(_ world: World) async throws {
        try await world.crowd.enter()
        console.log("\(world.crowd.people.count) participants are chatting in \(Crowd.rooms.count) rooms")
        let (bot, user) = (world.bot, world.user)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for room in Crowd.rooms {
                group.addTask { try await bot.loginRoom(room, user: user) }
            }
            try await group.waitForAll()
        }
        try await world.canary.loginRoom("canary", user: user)
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
    private func keepRunning(_ world: World) async {
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
        try? await gracefulShutdown()
        step.withLock { $0 = "stopping" }
        console.log("── stopping: logoutRoom() of every room")
        await world.bot.logoutRoom()
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
}

/// A tour or setup failure, said plainly.
struct TourError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
