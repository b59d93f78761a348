import ArgumentParser
import Foundation
import Logging
import RoomKitCLI
import RoomKitLoop
import RoomKitProtocol
import RoomKitTokens
import RoomKitServer
import ServiceLifecycle

/// `roomd`: the reference room server (serve) and a development token minter (token).
struct Roomd: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "roomd",
        abstract: "The RoomKit reference room server (protocol room.v1).",
        version: "roomd \(BuildInfo.versionText)",
        subcommands: [Serve.self, Token.self])
}

/// A `--flag` value error: printed as one line naming the flag, exit 2.
struct FlagError: UsageFailure, CustomStringConvertible {
    let flag: String
    let problem: String
    var description: String { "\(flag): \(problem)" }
    var lines: [String] { [description] }
}

/// The HS256 secret from `--secret`, `--secret-file` or `ROOMD_SECRET` (docs/CLI.md).
func resolveSecret(value: String?, file: String?) throws -> String {
    do {
        return try SecretOption(flag: "--secret", fileFlag: "--secret-file", environment: "ROOMD_SECRET")
            .require(value: value, file: file)
    } catch {
        throw FlagError(flag: error.flag, problem: error.problem)
    }
}

/// Seconds with decimals (`0.5`) as a Duration, checked against `range`
/// (ExternalNumber: NaN, infinities and out-of-range values are refused).
func seconds(_ value: Double, flag: String, in range: ClosedRange<Double>) throws -> Duration {
    do {
        return try ExternalNumber.seconds(value, field: flag, in: range)
    } catch {
        throw FlagError(flag: flag, problem: error.problem)
    }
}

/// Resolves HOST (a name such as `localhost`, or a short form such as
/// `127.1`) to the numeric address the server listens on, and fails with a
/// `flag` error unless HOST:PORT can be bound right now (in use, not a local
/// address). Checked before the server starts because a bind that
/// libwebsockets refuses leaves the process unable to shut down cleanly.
func bindableAddress(host: String, port: Int, flag: String) throws -> String {
    if let problem = BindCheck.problem(host: host, port: port) { throw FlagError(flag: flag, problem: problem) }
    guard let address = BindCheck.numericAddress(host: host) else {
        throw FlagError(flag: flag, problem: "cannot resolve host '\(host)'")
    }
    return address
}

struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Serve rooms until SIGINT or SIGTERM.")

    @Option(help: "HOST:PORT to listen on (port 0 picks a free port).")
    var listen = "127.0.0.1:7700"
    @Option(help: "HS256 secret shared with the token issuer (shown by ps: prefer --secret-file or ROOMD_SECRET).")
    var secret: String?
    @Option(name: .customLong("secret-file"), help: "A file holding the HS256 secret (trailing newline ignored).")
    var secretFile: String?
    @Option(name: .customLong("admin-listen"),
            help: "HOST:PORT of a separate plain-HTTP listener for /metrics, /healthz and the admin API (then not on --listen).")
    var adminListen: String?
    @Option(help: "Directory for the durable room log (created if missing).")
    var data: String
    @Option(name: .customLong("heartbeat-interval"), parsing: .unconditional,
            help: "Seconds between client pings (0.001 to 86400; not above --heartbeat-timeout; default 10, or half the timeout when that is shorter than 20).")
    var heartbeatIntervalFlag: Double?
    @Option(name: .customLong("heartbeat-timeout"), parsing: .unconditional, help: "Seconds of silence after which a connection is dead (0.001 to 86400).")
    var heartbeatTimeout = 90.0
    @Option(name: .customLong("session-retention"), parsing: .unconditional, help: "Seconds a lost session stays resumable (0.001 to 31536000, 365 days).")
    var sessionRetention = 1200.0
    @Option(name: .customLong("tls-cert"), help: "PEM certificate (with --tls-key): serve wss://.")
    var tlsCert: String?
    @Option(name: .customLong("tls-key"), help: "PEM private key for --tls-cert.")
    var tlsKey: String?
    @Option(help: "SQLite synchronous mode: normal (survives process crashes) or full (also power loss).")
    var synchronous = "normal"
    @Option(name: .customLong("commit-deadline"), parsing: .unconditional,
            help: "Seconds a group commit may stay open before it commits mid-turn (0 to 1; 0: every request that writes commits at once).")
    var commitDeadline = 0.01
    @Option(name: .customLong("log-level"), help: "trace, debug, info, notice, warning, error or critical.")
    var logLevel = "info"
    @Option(name: .customLong("log-format"), help: "Logs on stderr: text, or json (one object per line).")
    var logFormat = "text"
    @Option(name: .customLong("rate-limit"), parsing: .unconditional, help: "Requests per second per connection (token bucket refill).")
    var rateLimit = 200.0
    @Option(name: .customLong("rate-limit-burst"), parsing: .unconditional, help: "Requests a connection may send at once (token bucket size).")
    var rateLimitBurst = 200.0
    @Option(name: .customLong("service-rate-limit"), parsing: .unconditional,
            help: "Requests per second of a service connection (hello with a service token).")
    var serviceRateLimit = 100_000.0
    @Option(name: .customLong("service-rate-limit-burst"), parsing: .unconditional, help: "Requests a service connection may send at once.")
    var serviceRateLimitBurst = 100_000.0
    @Option(name: .customLong("max-outbound-bytes"), parsing: .unconditional, help: "Bytes queued per connection before it is closed 1013.")
    var maxOutboundBytes = 8 << 20
    @Option(name: .customLong("max-message-bytes"), parsing: .unconditional, help: "Largest message accepted; larger closes the connection 1009.")
    var maxMessageBytes = 1 << 20
    @Option(name: .customLong("max-connections"), parsing: .unconditional, help: "WebSocket connections open at once; more are refused with HTTP 503.")
    var maxConnections = 10_000
    @Option(name: .customLong("max-connections-per-ip"), parsing: .unconditional, help: "WebSocket connections open at once from one address (HTTP 503 beyond).")
    var maxConnectionsPerIP = 1_000
    @OptionGroup var limits: LimitOptions

    func makeConfiguration() throws -> ServerConfiguration {
        let parts = listen.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count >= 2, let port = Int(parts.last!), (0...65535).contains(port) else {
            throw FlagError(flag: "--listen", problem: "expected HOST:PORT, got '\(listen)'")
        }
        let host = parts.dropLast().joined(separator: ":")
        guard !host.isEmpty else { throw FlagError(flag: "--listen", problem: "missing host in '\(listen)'") }
        let address = try bindableAddress(host: host, port: port, flag: "--listen")
        var admin: (host: String, port: Int)?
        if let adminListen {
            let adminParts = adminListen.split(separator: ":", omittingEmptySubsequences: false)
            guard adminParts.count >= 2, let adminPort = Int(adminParts.last!), (0...65535).contains(adminPort),
                  !adminParts.dropLast().joined(separator: ":").isEmpty else {
                throw FlagError(flag: "--admin-listen", problem: "expected HOST:PORT, got '\(adminListen)'")
            }
            if adminPort != 0 && adminPort == port {
                throw FlagError(flag: "--admin-listen", problem: "must differ from --listen")
            }
            let adminHost = adminParts.dropLast().joined(separator: ":")
            admin = (try bindableAddress(host: adminHost, port: adminPort, flag: "--admin-listen"), adminPort)
        }
        let secret = try resolveSecret(value: self.secret, file: secretFile)
        var configuration = ServerConfiguration(secret: secret, dataDirectory: data)
        configuration.adminHost = admin?.host
        configuration.adminPort = admin?.port ?? 0
        configuration.buildVersion = BuildInfo.version
        configuration.buildRevision = BuildInfo.revision
        configuration.host = address
        configuration.port = port
        configuration.heartbeatTimeout = try seconds(heartbeatTimeout, flag: "--heartbeat-timeout",
                                                     in: ExternalNumber.shortSeconds)
        configuration.heartbeatInterval = try seconds(heartbeatInterval, flag: "--heartbeat-interval",
                                                      in: ExternalNumber.shortSeconds)
        guard configuration.heartbeatInterval <= configuration.heartbeatTimeout else {
            throw FlagError(flag: "--heartbeat-interval",
                            problem: "\(heartbeatInterval) s is longer than --heartbeat-timeout \(heartbeatTimeout) s: every connection would time out")
        }
        configuration.sessionRetention = try seconds(sessionRetention, flag: "--session-retention", in: ExternalNumber.longSeconds)
        for (flag, value) in [("--rate-limit", rateLimit), ("--rate-limit-burst", rateLimitBurst),
                              ("--service-rate-limit", serviceRateLimit),
                              ("--service-rate-limit-burst", serviceRateLimitBurst)] where !(value.isFinite && value >= 1) {
            throw FlagError(flag: flag, problem: "must be a number of requests >= 1")
        }
        configuration.rateLimitPerSecond = rateLimit
        configuration.rateLimitBurst = rateLimitBurst
        configuration.serviceRateLimitPerSecond = serviceRateLimit
        configuration.serviceRateLimitBurst = serviceRateLimitBurst
        guard maxOutboundBytes >= 65536 else { throw FlagError(flag: "--max-outbound-bytes", problem: "must be at least 65536") }
        configuration.maxOutboundBytes = maxOutboundBytes
        guard maxMessageBytes >= 16384 else {
            throw FlagError(flag: "--max-message-bytes", problem: "must be at least 16384 (a login with a long token)")
        }
        configuration.maxMessageBytes = maxMessageBytes
        for (flag, value) in [("--max-connections", maxConnections), ("--max-connections-per-ip", maxConnectionsPerIP)]
        where value < 1 {
            throw FlagError(flag: flag, problem: "must be a number of connections >= 1")
        }
        configuration.maxConnections = maxConnections
        configuration.maxConnectionsPerAddress = maxConnectionsPerIP
        try limits.apply(to: &configuration)
        switch (tlsCert, tlsKey) {
        case (nil, nil): break
        case (let cert?, let key?):
            for (flag, file) in [("--tls-cert", cert), ("--tls-key", key)] where !FileManager.default.isReadableFile(atPath: file) {
                throw FlagError(flag: flag, problem: "cannot read \(file)")
            }
            configuration.tlsCertificateFile = cert
            configuration.tlsKeyFile = key
        default:
            throw FlagError(flag: tlsCert == nil ? "--tls-cert" : "--tls-key", problem: "--tls-cert and --tls-key go together")
        }
        guard commitDeadline >= 0, commitDeadline <= 1 else {
            throw FlagError(flag: "--commit-deadline", problem: "must be a number of seconds from 0 to 1, got \(commitDeadline)")
        }
        configuration.commitDeadline = .nanoseconds(Int64((commitDeadline * 1e9).rounded()))
        switch synchronous {
        case "normal": configuration.synchronousFull = false
        case "full": configuration.synchronousFull = true
        default: throw FlagError(flag: "--synchronous", problem: "expected normal or full, got '\(synchronous)'")
        }
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: data, isDirectory: &isDirectory) {
            guard isDirectory.boolValue else { throw FlagError(flag: "--data", problem: "\(data) is not a directory") }
            guard FileManager.default.isWritableFile(atPath: data) else {
                throw FlagError(flag: "--data", problem: "\(data) is not writable")
            }
        } else {
            do {
                try FileManager.default.createDirectory(atPath: data, withIntermediateDirectories: true)
            } catch {
                throw FlagError(flag: "--data", problem: "cannot create \(data): \(error.localizedDescription)")
            }
        }
        return configuration
    }

    /// `--heartbeat-interval`, or its default: 10 s, but never more than half
    /// of `--heartbeat-timeout` when only the timeout is given (a shrunk
    /// timeout alone keeps a sane pair; both given, interval > timeout is
    /// refused).
    var heartbeatInterval: Double {
        heartbeatIntervalFlag ?? max(0.001, min(10, heartbeatTimeout / 2))
    }

    /// Flags that work but are risky: a heartbeat timeout shorter than two
    /// intervals (one late ping drops the connection), and a secret on the
    /// command line (visible to every user in `ps`). Logged once, when the
    /// server is listening.
    func startWarnings() -> [String] {
        var warnings: [String] = []
        if heartbeatTimeout < 2 * heartbeatInterval {
            warnings.append("--heartbeat-timeout \(heartbeatTimeout) s is shorter than two --heartbeat-interval (\(heartbeatInterval) s): one late ping drops a connection")
        }
        if secret != nil {
            warnings.append("--secret is visible to every user in ps and /proc; prefer --secret-file or ROOMD_SECRET")
        }
        return warnings
    }

    func run() async throws {
        let configuration = try makeConfiguration()
        guard let level = Logger.Level(rawValue: logLevel) else {
            throw FlagError(flag: "--log-level", problem: "unknown level '\(logLevel)'")
        }
        let format: LogFormat
        do { format = try LogFormat(flag: logFormat) } catch { throw FlagError(flag: error.flag, problem: error.problem) }
        format.bootstrap(level: level)
        let logger = Logger(label: "roomd")
        let loop = try EventLoop(name: "roomd", logger: logger)
        let server: RoomServer
        do {
            server = try await loop.submit { try RoomServer(loop: loop, configuration: configuration, logger: logger) }
        } catch {
            try? loop.shutdown()
            if error is StorageError { throw FlagError(flag: "--data", problem: "\(error)") }
            throw FlagError(flag: "--listen", problem: "cannot serve on \(listen): \(error)")
        }
        let (port, adminPort) = try await loop.submit { (server.port, server.adminPort) }
        let notifier = SystemdNotifier()  // systemd Type=notify; nothing without $NOTIFY_SOCKET
        let host = configuration.host, adminHost = configuration.adminHost
        let warnings = startWarnings()
        let announcer = StopAnnouncer(logger: logger, notifier: notifier) {
            // Once the group traps SIGTERM/SIGINT: a signal from whoever read this line stops us gracefully.
            FileHandle.standardOutput.write(Data("listening on \(host):\(port)\n".utf8))
            if let adminPort, let adminHost {
                FileHandle.standardOutput.write(Data("admin listening on \(adminHost):\(adminPort)\n".utf8))
            }
            notifier.ready(status: "listening on \(host):\(port)")
            // Once serving: a run that fails to start keeps its one-line error.
            for warning in warnings { logger.warning("\(warning)") }
        }
        // On SIGTERM/SIGINT: "stopping", then the server closes its
        // connections and flushes storage, then the loop shuts down.
        try await ProgramServices.group([
            .init(service: loop, serviceName: "loop"),
            .init(service: server, serviceName: "server"),
            .init(service: announcer, serviceName: "announcer"),
        ], logger: logger).run()
    }
}

struct Token: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Print a signed room token (JWT HS256) and nothing else.")

    @Option(help: "HS256 secret (shown by ps: prefer --secret-file or ROOMD_SECRET).")
    var secret: String?
    @Option(name: .customLong("secret-file"), help: "A file holding the HS256 secret (trailing newline ignored).")
    var secretFile: String?
    @Option(help: "User ID (the token's sub).")
    var user: String
    @Option(help: "Room ID, or * for any room.")
    var room = "*"
    @Option(help: "reader, writer, admin, or service (a bot's serviceToken: hello gets the service request bucket).")
    var role = "writer"
    @Option(parsing: .unconditional, help: "Seconds until the token expires (up to 100 years).")
    var ttl = 3600.0

    func run() throws {
        guard let role = TokenRole(rawValue: role) else {
            throw FlagError(flag: "--role", problem: "expected reader, writer, admin or service, got '\(self.role)'")
        }
        guard room == "*" || RoomID.isValid(room) else {
            throw FlagError(flag: "--room", problem: "invalid room ID '\(room)'")
        }
        guard !user.isEmpty else { throw FlagError(flag: "--user", problem: "must not be empty") }
        let secret = try resolveSecret(value: self.secret, file: secretFile)
        let lifetime: Int64
        do {
            lifetime = try ExternalNumber.wholeSeconds(ttl, field: "--ttl", in: ExternalNumber.tokenLifetimeSeconds)
        } catch {
            throw FlagError(flag: "--ttl", problem: error.problem)
        }
        let now = Int64(Date().timeIntervalSince1970)
        let claims = TokenClaims(sub: user, room: room, role: role, exp: now + lifetime, iat: now)
        print(TokenSigner(secret: secret).sign(claims))
    }
}

@main
enum Main {
    static func main() async {
        await CommandMain.run(Roomd.self)
    }
}
