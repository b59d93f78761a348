import ArgumentParser
import Foundation
import Logging
import RoomKitCLI

/// `multiroom-bot`: an example of embedding RoomKit directly (not a wrapper
/// of `roombot`). It starts an in-process roomd (or uses `--server`), fills
/// rooms with simulated participants, joins every room as a bot with the
/// shipped plugins, shows a live view, and plays a tour through every room
/// state reason. See `Demo.swift` for the wiring and `Tour.swift` for the tour.
@main
struct MultiRoomBot: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "multiroom-bot",
        abstract: "The RoomKit example: one bot in many rooms, with plugins, a live view and a guided tour.",
        discussion: """
            With no arguments it starts an embedded roomd on 127.0.0.1 (a free port, a temporary \
            data directory), simulated participants in five rooms, and a bot that joins every room \
            and loads the shipped plugins. Then it plays a tour and exits 0.
            """,
        version: "multiroom-bot \(BuildInfo.versionText)")

    @Flag(help: "Shorter pauses (for tests): the tour takes a few seconds.")
    var quick = false

    @Flag(help: "After the tour, rejoin every room and keep running until SIGINT or SIGTERM.")
    var forever = false

    @Option(help: "Use an existing roomd (its ws:// or wss:// /v1/rooms URL) instead of an embedded one.")
    var server: String?

    @Option(help: "The HS256 secret of --server, to mint the bot's and participants' tokens (shown by ps: prefer --secret-file or ROOMD_SECRET).")
    var secret: String?

    @Option(name: .customLong("secret-file"), help: "A file holding the HS256 secret of --server.")
    var secretFile: String?

    @Option(help: "The plugin manifest template (default: plugins.json of the example).")
    var manifest: String?

    @Flag(help: "Plain lines even on a terminal (no live view).")
    var plain = false

    @Option(name: .customLong("log-level"), help: "Library log level shown in the output: trace … critical.")
    var logLevel = "warning"

    /// The secret from `--secret`, `--secret-file`, or (with `--server`) `ROOMD_SECRET`.
    func resolvedSecret() throws -> String? {
        let option = SecretOption(flag: "--secret", fileFlag: "--secret-file", environment: "ROOMD_SECRET")
        do {
            return try option.resolve(value: secret, file: secretFile,
                                      environment: server == nil ? [:] : ProcessInfo.processInfo.environment)
        } catch {
            throw ValidationError(error.description)
        }
    }

    func validate() throws {
        switch (server, try resolvedSecret()) {
        case (nil, nil): break
        case (let url?, _?):
            guard url.hasPrefix("ws://") || url.hasPrefix("wss://") else {
                throw ValidationError("--server: expected a ws:// or wss:// URL, got '\(url)'")
            }
        default:
            throw ValidationError("--server and --secret go together")
        }
        guard Logger.Level(rawValue: logLevel) != nil else {
            throw ValidationError("--log-level: unknown level '\(logLevel)'")
        }
    }

    func run() async throws {
        let isTTY = !plain && isatty(STDOUT_FILENO) == 1 && ProcessInfo.processInfo.environment["TERM"] != "dumb"
        let console = Console(live: isTTY)
        let level = Logger.Level(rawValue: logLevel) ?? .warning
        LoggingSystem.bootstrap { label in ConsoleLogHandler(label: label, console: console, level: level) }

        let secret = try resolvedSecret()
        let options = DemoOptions(pace: quick ? .quick : .normal, forever: forever,
                                  server: server.flatMap { url in secret.map { (url, $0) } },
                                  manifestTemplate: manifest)
        let demo = Demo(options: options, console: console)
        let outcome = await demo.run()
        switch outcome {
        case .completed: return
        case .interrupted: throw ExitCode(130)
        case .failed: throw ExitCode.failure
        }
    }
}

/// How long things take: the normal tour (~30 s) or the quick one (tests).
struct Pace: Sendable {
    /// Pause between tour steps, so the live view can be watched.
    var step: Duration
    /// The participants' mean time between actions in one room.
    var action: Duration
    /// Time the rooms chat before the tour starts.
    var warmup: Duration
    /// The canary host's reconnect window (RECONNECT_FAILED after it).
    var canaryWindow: Duration
    /// The bot's first reconnect backoff (full jitter up to it).
    var backoff: Duration

    static let normal = Pace(step: .milliseconds(2500), action: .milliseconds(450), warmup: .seconds(4),
                             canaryWindow: .seconds(3), backoff: .milliseconds(1500))
    static let quick = Pace(step: .milliseconds(500), action: .milliseconds(300), warmup: .milliseconds(1200),
                            canaryWindow: .milliseconds(1200), backoff: .milliseconds(800))
}

struct DemoOptions: Sendable {
    var pace: Pace
    var forever: Bool
    /// An existing roomd: URL and secret (nil: embedded).
    var server: (url: String, secret: String)?
    var manifestTemplate: String?
}
