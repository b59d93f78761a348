import Foundation
import Logging
import RoomKit
import RoomKitLoop
import RoomKitPluginHost
import RoomKitProtocol
import ServiceLifecycle
import Synchronization

/// Command-line overrides of `bot.json` (CLI.md `roombot run`).
public struct BotOverrides: Sendable {
    public var server: String?
    public var control: String?
    public var events: String?
    public var rooms: [String] = []
    public var manifest: String?
    public var stateFile: String?
    /// `--service-token`/`--service-token-file`/`ROOMBOT_SERVICE_TOKEN`: wins over the config's `serviceToken`.
    public var serviceToken: String?
    public init() {}
}

/// The bot host: one loop, one `RoomHost`, the manifest's plugins, the event
/// log, the control API and the store, run as services of one
/// `ServiceGroup` (`services`): started in order, stopped in reverse.
public final class BotRunner: @unchecked Sendable {
    // @unchecked Sendable: the store, `phase` and `joining` have their own
    // locks; `control` and `manifest` are set in `startServices()` before any
    // concurrent use and read-only afterwards.

    public let config: BotConfig
    public let loop: EventLoop
    public let host: RoomHost
    public let plugins: PluginManager
    public let events: EventLog
    let logger: Logger
    let tokens: BotTokenProvider
    /// The room set and every session's cursor (`BotStore`).
    public let store: BotStore
    let metrics: BotMetrics
    /// The version and revision this binary reports (`GET /v1/bot`).
    let build: (version: String, revision: String)
    /// Where the bot is in its life; `stopping` freezes the room set (a
    /// shutdown's LOGOUTs must not erase the rooms a restart rejoins).
    let phase = LockedValue(BotLifecycle.initial)
    /// The first logins (and their retries), or the fleet's start; cancelled by a graceful stop.
    let joining = LockedValue<Task<Void, Never>?>(nil)
    /// The group running the bot's parts (`start()`), stopped by `stop()`.
    let running = LockedValue<(group: ServiceGroup, task: Task<Void, any Error>)?>(nil)
    /// Configured rooms an operator left through the control API, until
    /// joined again: the bot no longer means to be in them (`/readyz`).
    let leftByOperator = LockedValue<Set<String>>([])
    /// What the first logins have done, room by room (`joinAll`).
    public let joinProgress = LockedValue(JoinProgress())
    /// Fleet mode's coordinator (docs/FLEET.md); nil for a standalone bot.
    let fleet: FleetCoordinator?
    var control: ControlAPI?
    private var manifest: PluginManifest?

    /// Validates everything that can be checked before starting (manifest
    /// included); throws `ConfigErrors` naming file and field.
    /// `build`: the version and revision `roombot_build_info` reports.
    public init(config: BotConfig, overrides: BotOverrides = BotOverrides(), logger: Logger,
                build: (version: String, revision: String) = ("unknown", "unknown")) throws {
        // Warned once, when the bot is about to start (not for a config it refuses).
        let permissionWarning = config.permissionWarning
        var config = config
        if let server = overrides.server { config.server = server }
        if let control = overrides.control { config.control = control }
        if let events = overrides.events { config.events = events }
        if let manifest = overrides.manifest { config.manifest = manifest }
        if let serviceToken = overrides.serviceToken { config.serviceToken = serviceToken }
        if let stateFile = overrides.stateFile { (config.stateFile, config.legacyStateFile) = BotConfig.storePaths(stateFile) }
        for room in overrides.rooms where !config.rooms.contains(room) { config.rooms.append(room) }
        var problems: [ConfigError] = []
        if (try? WebSocketURL(config.server)) == nil {
            problems.append(ConfigError(file: "--server", field: "", problem: "must be a ws:// or wss:// URL"))
        }
        for room in overrides.rooms where !RoomID.isValid(room) {
            problems.append(ConfigError(file: "--room", field: "", problem: "invalid room ID '\(room)'"))
        }
        if let token = overrides.serviceToken, !BotConfig.looksLikeJWT(token) {
            problems.append(ConfigError(file: "--service-token", field: "", problem: "must be a JWT (header.claims.signature) with role service"))
        }
        if let control = config.control {
            if let (host, port) = BotConfig.hostPort(control) {
                if !BotConfig.isLoopback(host) && config.controlToken == nil {
                    problems.append(ConfigError(file: "--control", field: "", problem:
                        "binds to \(host), which is not loopback: set controlToken in the config to require authentication"))
                } else if let problem = BindCheck.problem(host: host, port: port) {
                    // Checked before libwebsockets tries: a bind it refuses
                    // leaves the loop with handles it cannot close (a crash).
                    let source = overrides.control != nil
                        ? ConfigError(file: "--control", field: "", problem: problem)
                        : ConfigError(file: (config.path as NSString).lastPathComponent, field: "control", problem: problem)
                    problems.append(source)
                }
            } else {
                problems.append(ConfigError(file: "--control", field: "", problem: "must be HOST:PORT"))
            }
        }
        if !problems.isEmpty { throw ConfigErrors(errors: problems) }
        if let path = config.manifest {
            do {
                manifest = try PluginManifest(path: path)
            } catch {
                throw ConfigErrors(errors: error.errors)
            }
        }
        self.config = config
        self.logger = logger
        tokens = BotTokenProvider(auth: config.auth)
        do {
            store = try BotStore(path: config.stateFile, logger: logger)
        } catch {
            throw ConfigErrors(errors: [ConfigError(file: config.stateFile, field: "", problem: "cannot open the bot's store: \(error.message)")])
        }
        if let legacy = config.legacyStateFile { store.migrate(legacyStateFile: legacy) }
        if let path = config.events, path != "-" { store.reconcile(eventLog: path) }
        events = try EventLog(destination: config.events)
        store.follow(eventLogSize: { [events] in events.writtenSize })
        loop = try EventLoop(name: "roombot", logger: logger)
        // One write(2) per loop turn, not per line; `close()` (a graceful stop) writes the rest.
        events.flushOnce(per: loop)
        var hostConfiguration = RoomHostConfiguration(serverURL: config.server)
        hostConfiguration.loginTimeout = config.loginTimeout
        hostConfiguration.reconnectWindow = config.reconnectWindow
        hostConfiguration.serviceToken = config.serviceToken
        hostConfiguration.transport.tlsCAFile = config.tls?.caFile
        hostConfiguration.transport.tlsServerName = config.tls?.serverName
        // A fleet host resumes from the cursors in Redis, not from its own file.
        let fleetStore = config.fleet.map { _ in FleetSessionStore() }
        hostConfiguration.sessionStore = fleetStore ?? store
        let metrics = BotMetrics(version: build.version, revision: build.revision)
        self.metrics = metrics
        self.build = build
        hostConfiguration.metricsFactory = metrics.factory
        host = try RoomHost(loop: loop, configuration: hostConfiguration, logger: logger,
                            tokenProvider: tokens.canRenew ? tokens : nil)
        let events = self.events
        plugins = PluginManager(host: host, logger: logger, metricsFactory: metrics.pluginFactory) { name, status, message in
            metrics.pluginStatus(name, status)
            var fields: [String: JSON] = ["plugin": .string(name), "status": .string(status.rawValue)]
            if let message { fields["message"] = .string(message) }
            events.write("plugin", fields)
        }
        if let fleetConfig = config.fleet, let fleetStore {
            fleet = FleetCoordinator(config: fleetConfig, server: config.server, loop: loop, host: host, user: config.user, tokens: tokens,
                                     store: fleetStore, metrics: FleetMetrics(factory: metrics.factory), logger: logger)
        } else {
            fleet = nil
        }
        configurePluginPlatform()
        // A config file holding a secret must be private.
        if let permissionWarning { logger.warning("\(permissionWarning)") }
        let saveCursors: @Sendable () -> Void = { [host] in host.saveSessionCursorsNow() }
        host.addEncodedObserver { [weak self, loop, store, events, metrics] event, encoding in
            // The event's one encoding (shared with the plugins); events that
            // happened while the bot was away (a resume's replay) say so in it.
            events.write(encoding)
            // The log's length is committed only with the cursors of every event in it.
            store.eventLogWritten(on: loop, saveCursors: saveCursors)
            metrics.count(event)
            if case .roomStateChanged(let room, let reason, _, _) = event,
               reason == .logout || reason == .kickOut || reason == .reconnectFailed {
                self?.left(room)
            }
        }
    }

    /// The control API's bound port, once started.
    public var controlPort: Int? { control?.port }

    /// Loads plugins and serves the control API, at once: it answers (and
    /// `/readyz` says which rooms are not in yet) while the logins run.
    public func startServices() throws {
        phase.withLock { $0 = .starting }
        if let manifest {
            for error in plugins.load(manifest) {
                logger.error("plugin not loaded", metadata: ["error": "\(error)"])
            }
        }
        if let address = config.control, let (hostName, port) = BotConfig.hostPort(address) {
            let api = ControlAPI(runner: self)
            try loop.runAndWait { try api.listen(host: hostName, port: port) }
            control = api
        }
        try metrics.startLagProbe(loop: loop)
    }

    /// Starts logging in to the configured rooms and those the store
    /// remembers, each retried after a transient failure (`joinAll(_:)`), or,
    /// in fleet mode, starts the fleet. The task ends when every room has an
    /// outcome; a graceful stop cancels it. Idempotent: a second call returns
    /// the same task.
    @discardableResult
    public func startJoining() -> Task<Void, Never> {
        joining.withLock { current in
            if let current { return current }
            let task = Task { [self] in
                if let fleet {
                    // The fleet decides which rooms this host joins (FleetCoordinator).
                    let rooms = config.rooms
                    do {
                        try loop.runAndWait { try fleet.start(configRooms: rooms) }
                    } catch {
                        logger.error("fleet mode did not start", metadata: ["error": "\(error)"])
                    }
                } else {
                    await joinAll(targetRooms)
                }
                phase.withLock { if $0 == .starting { $0 = .running } }
            }
            current = task
            return task
        }
    }

    /// The rooms the bot should be in: the configured ones, then those
    /// joined through the control API (kept in the store).
    var targetRooms: [String] {
        // Each room with a stored session resumes it (RoomHostConfiguration.sessionStore).
        store.rooms(configured: config.rooms)
    }

    /// Records a room joined (or left) through the control API.
    func remember(_ room: String, joined isJoined: Bool) {
        do {
            try store.setJoined(room, isJoined)
        } catch {
            logger.error("room set not written", metadata: ["store": "\(store.path)", "error": "\(error)"])
        }
    }

    /// A room's session ended (LOGOUT, KICK_OUT, RECONNECT_FAILED): the bot
    /// is no longer in it, so a restart must not rejoin it. Not while
    /// stopping: the shutdown's own LOGOUTs keep the rooms for the restart.
    private func left(_ room: String) {
        guard !isStopping else { return }
        remember(room, joined: false)
    }

    /// Whether `stop()` has begun (the room set is frozen from then on).
    var isStopping: Bool {
        phase.withLock { $0 == .stopping || $0 == .stopped }
    }
}

/// Where a `BotRunner` is in its life.
enum BotLifecycle: Sendable, Hashable {
    /// Created; nothing started.
    case initial
    /// Control API up; the first logins are running.
    case starting
    /// Every first login has an outcome.
    case running
    /// `stop()` is logging out and tearing down.
    case stopping
    /// Stopped.
    case stopped
}
