import ArgumentParser
import Foundation
import Logging
import RoomKit
import RoomKitBot
import RoomKitCLI
import RoomKitLoop
import RoomKitPluginHost
import RoomKitProtocol

/// `roombot replay`: plays a recorded room, writing the player events in
/// CLI.md's event-log format. Exit 0 at `ended`; 1 with a clear message for
/// an unknown room, a bad token or an unreachable server.
struct Replay: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Play a recorded room and log the player's events.")

    @Option(help: "Server URL (ws:// or wss://, the recording is fetched over the same host).")
    var server: String
    @Option(help: "The room to replay.")
    var room: String
    @Option(help: "A token for that room, any role (shown by ps: prefer --token-file or ROOMBOT_TOKEN).")
    var token: String?
    @Option(name: .customLong("token-file"), help: "A file holding the token (trailing newline ignored).")
    var tokenFile: String?
    @Option(parsing: .unconditional, help: "Start, ms since the epoch (default: the room's creation).")
    var from: Int64?
    @Option(parsing: .unconditional, help: "End, ms since the epoch (default: now).")
    var to: Int64?
    @Option(parsing: .unconditional, help: "Playback speed, 0.5 to 16.")
    var speed = 1.0
    @Option(help: "Event log: a file path, or - for stdout.")
    var events = "-"
    @Option(name: .customLong("progress-interval"), parsing: .unconditional,
            help: "Seconds between progress lines on stderr when it is not a terminal (0 to 86400); 0: none (a terminal gets one line in place).")
    var progressInterval = 5.0
    @Option(help: "Plugin manifest: plugins declaring the player hook receive the player events.")
    var manifest: String?
    @Option(name: .customLong("log-level"), help: "trace, debug, info, notice, warning, error or critical.")
    var logLevel = "warning"
    @Option(name: .customLong("log-format"), help: "Logs on stderr: text, or json (one object per line).")
    var logFormat = "text"

    func validate() throws {
        do {
            _ = try ExternalNumber.seconds(progressInterval, field: "--progress-interval", in: ExternalNumber.progressSeconds)
            for (flag, value) in [("--from", from), ("--to", to)] {
                if let value { _ = try ExternalNumber.integer(String(value), field: flag, in: ExternalNumber.epochMilliseconds) }
            }
        } catch {
            throw ValidationError(error.description)
        }
        guard (0.5...16).contains(speed) else { throw ValidationError("--speed: must be between 0.5 and 16") }
        guard RoomID.isValid(room) else { throw ValidationError("--room: invalid room ID '\(room)'") }
        if let from, let to, from > to { throw ValidationError("--from: is after --to") }
        // The same check and words as `run`: an unknown level is an error, not "warning".
        guard Logger.Level(rawValue: logLevel) != nil else { throw ValidationError("--log-level: unknown level '\(logLevel)'") }
    }

    func run() async throws {
        let token: String
        do {
            token = try SecretOption(flag: "--token", fileFlag: "--token-file", environment: "ROOMBOT_TOKEN")
                .require(value: self.token, file: tokenFile)
        } catch {
            throw UsageProblems(lines: [error.description])
        }
        let level = Logger.Level(rawValue: logLevel) ?? .warning
        let format: LogFormat
        do { format = try LogFormat(flag: logFormat) } catch { throw UsageProblems(lines: [error.description]) }
        format.bootstrap(level: level)
        let logger = Logger(label: "roombot.replay")
        var parsedManifest: PluginManifest?
        if let manifest {
            do {
                parsedManifest = try PluginManifest(path: manifest)
            } catch {
                throw UsageProblems(lines: error.errors.map(\.description))
            }
        }
        let log: EventLog
        do {
            log = try EventLog(destination: events)
        } catch {
            throw UsageProblems(lines: ["--events: \(error)"])
        }
        SignalWatcher.unblock([SIGINT, SIGTERM])
        let loop = try EventLoop(name: "roombot-replay", logger: logger)
        var plugins: PluginManager?
        if let parsedManifest {
            // Plugins live in a host even though replay joins no room.
            let host = try RoomHost(loop: loop, configuration: RoomHostConfiguration(serverURL: server), logger: logger)
            let manager = PluginManager(host: host, logger: logger) { name, status, message in
                var fields: [String: JSON] = ["plugin": .string(name), "status": .string(status.rawValue)]
                if let message { fields["message"] = .string(message) }
                log.write("plugin", fields)
            }
            for error in manager.load(parsedManifest) { logger.error("plugin not loaded", metadata: ["error": "\(error)"]) }
            plugins = manager
        }
        var configuration = PlayerConfiguration(serverURL: server, room: room, token: token, from: from, to: to)
        configuration.retries = 1
        let player: Player
        do {
            player = try Player(loop: loop, configuration: configuration, logger: logger)
        } catch {
            throw UsageProblems(lines: ["--server: \(error)"])
        }
        let outcome = AsyncStream<Result<Void, PlayerError>>.makeStream()
        let room = self.room
        let pluginManager = plugins
        player.addEncodedObserver { event, encoding in
            // One encoding per event, for the log and the plugins alike.
            log.write(encoding)
            if let pluginManager, let kind = Self.pluginKind(event) {
                pluginManager.dispatchPlayerEvent(kind: kind, room: room, encoding: encoding)
            }
            switch event {
            case .phaseChanged(.ended): outcome.continuation.yield(.success(()))
            case .stoppedWithError(let error): outcome.continuation.yield(.failure(error))
            default: break
            }
        }
        player.playbackSpeed = speed
        let progress = ReplayProgress(player: player, room: room, format: format, logger: logger,
                                      interval: progressInterval > 0 ? progressDuration(progressInterval) : nil)
        player.play()
        var result: Result<Void, PlayerError> = .success(())
        for await first in outcome.stream {
            result = first
            break
        }
        progress.finish(ended: (try? result.get()) != nil)
        player.stop()
        plugins?.unloadAll()
        log.close()
        try? loop.shutdown()
        if case .failure(let error) = result {
            if format == .json {
                logger.error("replay failed", metadata: ["room": "\(room)", "reason": "\(Self.explain(error))"])
            } else {
                FileHandle.standardError.write(Data("roombot: replay of \(room) failed: \(Self.explain(error))\n".utf8))
            }
            throw ExitCode(1)
        }
    }

    /// The ABI's player event kind for a player event (nil: not forwarded).
    static func pluginKind(_ event: PlayerEvent) -> Int32? {
        switch event {
        case .phaseChanged: return 1
        case .loadFirstFrame: return 2
        case .scheduleTimeChanged: return 3
        case .playerStateChanged: return 4
        case .stoppedWithError: return 5
        case .errorWhenAppendFrame: return 6
        case .magix: return 7
        case .sliceChanged: return nil
        }
    }

    static func explain(_ error: PlayerError) -> String {
        switch error.kind {
        case .tokenInvalid: return "the token was refused (\(error.message))"
        case .roomNotFound: return "no such room on the server (\(error.message))"
        case .network, .timedOut: return "the server is unreachable (\(error.message))"
        default: return error.description
        }
    }
}
