import ArgumentParser
import Dispatch
import Foundation
import Logging
import RoomKit
import RoomKitBot
import RoomKitCLI
import RoomKitLoop
import RoomKitPluginHost
import RoomKitProtocol
import ServiceLifecycle

/// `roombot`: the RoomKit bot host (CLI.md).
struct Roombot: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "roombot",
        abstract: "Keeps a bot in many rooms, with plugins, a control API and an event log.",
        version: "roombot \(BuildInfo.versionText)",
        subcommands: [Run.self, Replay.self, Check.self, Simulate.self, NewPlugin.self])
}

/// A `--progress-interval` that `validate()` accepted, as a Duration.
func progressDuration(_ seconds: Double) -> Duration {
    (try? ExternalNumber.seconds(seconds, field: "--progress-interval", in: ExternalNumber.progressSeconds)) ?? .zero
}

struct Run: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Join the configured rooms and serve until SIGINT/SIGTERM.")

    @Option(help: "The bot's configuration file (bot.json).")
    var config: String
    @Option(help: "Server URL (overrides the config's server).")
    var server: String?
    @Option(help: "HOST:PORT for the control API (loopback recommended).")
    var control: String?
    @Option(help: "Event log: a file path, or - for stdout.")
    var events: String?
    @Option(name: .customLong("room"), help: "A room to join in addition to the config's (repeatable).")
    var rooms: [String] = []
    @Option(help: "Plugin manifest (overrides the config's manifest).")
    var manifest: String?
    @Option(help: "The bot's store (SQLite: rooms joined at run time, session cursors; default <config>.state.sqlite beside the config). A .json path names the old state file: imported once, the store beside it.")
    var state: String?
    @Option(name: .customLong("service-token"),
            help: "A token with role service for the connection's hello (shown by ps: prefer --service-token-file or ROOMBOT_SERVICE_TOKEN); overrides the config's serviceToken.")
    var serviceToken: String?
    @Option(name: .customLong("service-token-file"), help: "A file holding the service token (trailing newline ignored).")
    var serviceTokenFile: String?
    @Option(name: .customLong("log-level"), help: "trace, debug, info, notice, warning, error or critical.")
    var logLevel = "info"
    @Option(name: .customLong("log-format"), help: "Logs on stderr: text, or json (one object per line).")
    var logFormat = "text"
    @Option(name: .customLong("progress-interval"), parsing: .unconditional,
            help: "Seconds between login progress lines on stderr while joining more than 100 rooms (0 to 86400); 0: only the last.")
    var progressInterval = 1.0

    func validate() throws {
        do {
            _ = try ExternalNumber.seconds(progressInterval, field: "--progress-interval", in: ExternalNumber.progressSeconds)
        } catch {
            throw ValidationError(error.description)
        }
    }

    func run() async throws {
        guard let level = Logger.Level(rawValue: logLevel) else {
            throw UsageProblems(lines: ["--log-level: unknown level '\(logLevel)'"])
        }
        let format: LogFormat
        do { format = try LogFormat(flag: logFormat) } catch { throw UsageProblems(lines: [error.description]) }
        format.bootstrap(level: level)
        let logger = Logger(label: "roombot")
        let botConfig: BotConfig
        do {
            botConfig = try BotConfig(path: config)
        } catch {
            throw UsageProblems(lines: error.errors.map(\.description))
        }
        var overrides = BotOverrides()
        overrides.server = server
        overrides.control = control
        overrides.events = events
        overrides.rooms = rooms
        overrides.manifest = manifest.map { ($0 as NSString).expandingTildeInPath }
        overrides.stateFile = state
        do {
            overrides.serviceToken = try SecretOption(flag: "--service-token", fileFlag: "--service-token-file",
                                                      environment: "ROOMBOT_SERVICE_TOKEN")
                .resolve(value: serviceToken, file: serviceTokenFile)
        } catch {
            throw UsageProblems(lines: [error.description])
        }
        let runner: BotRunner
        do {
            runner = try BotRunner(config: botConfig, overrides: overrides, logger: logger,
                                   build: (BuildInfo.version, BuildInfo.revision))
        } catch let errors as ConfigErrors {
            throw UsageProblems(lines: errors.errors.map(\.description))
        }
        // The control API is up before the first login: an operator can
        // look while the rooms join, and SIGTERM stops the bot at any point.
        let logins = LoginProgress(progress: { runner.joinProgress.withLock { $0 } },
                                   interval: progressDuration(progressInterval), format: format, logger: logger)
        do {
            try runner.startServices()
        } catch {
            await runner.stop()
            throw UsageProblems(lines: ["--control: cannot serve the control API: \(error)"])
        }
        let notifier = SystemdNotifier()
        let announcer = StopAnnouncer(logger: logger, notifier: notifier) {
            // Once the group traps SIGTERM/SIGINT: whoever reads these may signal at once.
            if let port = runner.controlPort {
                logger.info("control API listening", metadata: ["address": "\(botConfig.control.map { BotConfig.hostPort($0)?.host ?? "" } ?? ""):\(port)"])
                // In json mode stderr carries JSON lines only; the log line above has the port.
                if format == .text { FileHandle.standardError.write(Data("control on \(port)\n".utf8)) }
            }
            // systemd (Type=notify): ready once the control API serves; the rooms
            // join in the background (GET /readyz says when they all have).
            notifier.ready(status: "control API up; joining \(runner.config.rooms.count) configured rooms")
            let joining = runner.startJoining()
            Task {
                await joining.value
                logins.finish()
                let loggedIn = runner.host.allRooms.filter { $0.reason == .logined }.count
                notifier.send("STATUS=\(loggedIn) of \(runner.host.allRooms.count) rooms logged in")
            }
        }
        // Until SIGTERM/SIGINT: "stopping", then the parts stop in reverse
        // (BotRunner.services): logins or fleet, host, plugins, control API,
        // event log, loop, store.
        let group = ProgramServices.group(runner.services + [.init(service: announcer, serviceName: "announcer")],
                                          logger: logger)
        try await group.run()
    }
}

struct Check: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Validate a plugin manifest and each plugin's library and ABI.")

    @Option(help: "The plugin manifest (plugins.json).")
    var manifest: String

    func run() throws {
        let parsed: PluginManifest
        do {
            parsed = try PluginManifest(path: manifest)
        } catch {
            throw UsageProblems(lines: error.errors.map(\.description))
        }
        let file = (manifest as NSString).lastPathComponent
        let results = PluginChecker.inspect(parsed)
        let problems = results.compactMap { $0.problem.map { "\(file): \($0)" } }
        if !problems.isEmpty { throw UsageProblems(lines: problems) }
        // The path dlopen gets (always absolute), the ABI the library
        // declares, and how the plugin runs (isolation and its limits).
        for result in results {
            let mode = PluginChecker.describe(result.spec).dropFirst(result.spec.name.count + 2)
            print("\(file): plugins[\(result.spec.index)] (\(result.spec.name)): \(result.library), ABI \(result.abi ?? "?"), \(mode)")
        }
        print("\(file): \(parsed.plugins.count) plugin(s) OK")
    }
}

@main
enum Main {
    static func main() async {
        await CommandMain.run(Roombot.self)
    }
}
