import ArgumentParser
import Foundation
import Logging
import RoomKitCLI
import RoomKitLoop
import RoomKitProtocol
import RoomKitServer

/// `roomd`: the reference room server (serve) and a development token minter (token).
struct Roomd: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "roomd",
        abstract: "The RoomKit reference room server (protocol room.v1).",
        version: "roomd \(BuildInfo.versionText)",
        subcommands: [Serve.self, Token.self])
}

/// A `--flag` value error: printed as one line naming the flag, exit 2.
struct FlagError: Error, CustomStringConvertible {
    let flag: String
    let problem: String
    var description: String { "\(flag): \(problem)" }
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

/// Seconds with decimals (`0.5`) as a Duration, validated.
func seconds(_ value: Double, flag: String) throws -> Duration {
    guard value.isFinite, value > 0 else { throw FlagError(flag: flag, problem: "must be a positive number of seconds") }
    return .milliseconds(Int64((value * 1000).rounded()))
}

/// Fails with a `--listen` error unless HOST:PORT can be bound right now (in
/// use, not a local address). Checked before the server starts because a bind
/// that libwebsockets refuses leaves the process unable to shut down cleanly.
func checkBindable(host: String, port: Int) throws {
    var hints = addrinfo()
    hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV
    var found: UnsafeMutablePointer<addrinfo>?
    guard getaddrinfo(host, String(port), &hints, &found) == 0, let address = found else {
        throw FlagError(flag: "--listen", problem: "cannot resolve host '\(host)'")
    }
    defer { freeaddrinfo(found) }
    let fd = socket(address.pointee.ai_family, address.pointee.ai_socktype, address.pointee.ai_protocol)
    guard fd >= 0 else {
        throw FlagError(flag: "--listen", problem: "cannot open a socket: \(String(cString: strerror(errno)))")
    }
    defer { close(fd) }
    var yes: Int32 = 1
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
    guard bind(fd, address.pointee.ai_addr, address.pointee.ai_addrlen) == 0 else {
        throw FlagError(flag: "--listen", problem: "cannot listen on \(host):\(port): \(String(cString: strerror(errno)))")
    }
}

struct Serve: ParsableCommand {
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
    @Option(name: .customLong("heartbeat-interval"), help: "Seconds between client pings.")
    var heartbeatInterval = 10.0
    @Option(name: .customLong("heartbeat-timeout"), help: "Seconds of silence after which a connection is dead.")
    var heartbeatTimeout = 90.0
    @Option(name: .customLong("session-retention"), help: "Seconds a lost session stays resumable.")
    var sessionRetention = 1200.0
    @Option(name: .customLong("tls-cert"), help: "PEM certificate (with --tls-key): serve wss://.")
    var tlsCert: String?
    @Option(name: .customLong("tls-key"), help: "PEM private key for --tls-cert.")
    var tlsKey: String?
    @Option(help: "SQLite synchronous mode: normal (survives process crashes) or full (also power loss).")
    var synchronous = "normal"
    @Option(name: .customLong("log-level"), help: "trace, debug, info, notice, warning, error or critical.")
    var logLevel = "info"
    @Option(name: .customLong("log-format"), help: "Logs on stderr: text, or json (one object per line).")
    var logFormat = "text"
    @Option(name: .customLong("rate-limit"), help: "Requests per second per connection (token bucket refill).")
    var rateLimit = 200.0
    @Option(name: .customLong("rate-limit-burst"), help: "Requests a connection may send at once (token bucket size).")
    var rateLimitBurst = 200.0
    @Option(name: .customLong("service-rate-limit"),
            help: "Requests per second of a service connection (hello with a service token).")
    var serviceRateLimit = 100_000.0
    @Option(name: .customLong("service-rate-limit-burst"), help: "Requests a service connection may send at once.")
    var serviceRateLimitBurst = 100_000.0
    @Option(name: .customLong("max-outbound-bytes"), help: "Bytes queued per connection before it is closed 1013.")
    var maxOutboundBytes = 8 << 20
    @Option(name: .customLong("max-message-bytes"), help: "Largest message accepted; larger closes the connection 1009.")
    var maxMessageBytes = 1 << 20
    @Option(name: .customLong("max-connections"), help: "WebSocket connections open at once; more are refused with HTTP 503.")
    var maxConnections = 10_000
    @Option(name: .customLong("max-connections-per-ip"), help: "WebSocket connections open at once from one address (HTTP 503 beyond).")
    var maxConnectionsPerIP = 1_000
    @OptionGroup var limits: LimitOptions

    func makeConfiguration() throws -> ServerConfiguration {
        let parts = listen.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count >= 2, let port = Int(parts.last!), (0...65535).contains(port) else {
            throw FlagError(flag: "--listen", problem: "expected HOST:PORT, got '\(listen)'")
        }
        let host = parts.dropLast().joined(separator: ":")
        guard !host.isEmpty else { throw FlagError(flag: "--listen", problem: "missing host in '\(listen)'") }
        try checkBindable(host: host, port: port)
        var admin: (host: String, port: Int)?
        if let adminListen {
            let adminParts = adminListen.split(separator: ":", omittingEmptySubsequences: false)
            guard adminParts.count >= 2, let adminPort = Int(adminParts.last!), (0...65535).contains(adminPort),
                  !adminParts.dropLast().joined(separator: ":").isEmpty else {
                throw FlagError(flag: "--admin-listen", problem: "expected HOST:PORT, got '\(adminListen)'")
            }
            admin = (adminParts.dropLast().joined(separator: ":"), adminPort)
            if adminPort != 0 && adminPort == port {
                throw FlagError(flag: "--admin-listen", problem: "must differ from --listen")
            }
            do { try checkBindable(host: admin!.host, port: adminPort) } catch let error as FlagError {
                throw FlagError(flag: "--admin-listen", problem: error.problem)
            }
        }
        let secret = try resolveSecret(value: self.secret, file: secretFile)
        var configuration = ServerConfiguration(secret: secret, dataDirectory: data)
        configuration.adminHost = admin?.host
        configuration.adminPort = admin?.port ?? 0
        configuration.buildVersion = BuildInfo.version
        configuration.buildRevision = BuildInfo.revision
        configuration.host = host
        configuration.port = port
        configuration.heartbeatInterval = try seconds(heartbeatInterval, flag: "--heartbeat-interval")
        configuration.heartbeatTimeout = try seconds(heartbeatTimeout, flag: "--heartbeat-timeout")
        configuration.sessionRetention = try seconds(sessionRetention, flag: "--session-retention")
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

    func run() throws {
        let configuration = try makeConfiguration()
        guard let level = Logger.Level(rawValue: logLevel) else {
            throw FlagError(flag: "--log-level", problem: "unknown level '\(logLevel)'")
        }
        let format: LogFormat
        do { format = try LogFormat(flag: logFormat) } catch { throw FlagError(flag: error.flag, problem: error.problem) }
        format.bootstrap(level: level)
        let logger = Logger(label: "roomd")
        // We may be started with SIGINT/SIGTERM blocked (the mask is inherited,
        // e.g. from a dispatch worker thread); the loop thread inherits ours.
        SignalWatcher.unblock([SIGINT, SIGTERM])
        let loop = try EventLoop(name: "roomd", logger: logger)
        let stopped = DispatchSemaphore(value: 0)
        let notifier = SystemdNotifier()  // systemd Type=notify; nothing without $NOTIFY_SOCKET
        let started = Result<(Int, Int?), any Error> {
            try loop.runAndWait {
                let server = try RoomServer(loop: loop, configuration: configuration, logger: logger)
                _ = try SignalWatcher(loop: loop, signals: [SIGINT, SIGTERM]) { signal in
                    logger.info("stopping", metadata: ["signal": "\(signal)"])
                    notifier.stopping()
                    // Completes once the close frames are out and storage is closed.
                    server.stop { stopped.signal() }
                }
                return (server.port, server.adminPort)
            }
        }
        switch started {
        case .success(let (port, adminPort)):
            FileHandle.standardOutput.write(Data("listening on \(configuration.host):\(port)\n".utf8))
            if let adminPort, let adminHost = configuration.adminHost {
                FileHandle.standardOutput.write(Data("admin listening on \(adminHost):\(adminPort)\n".utf8))
            }
            notifier.ready(status: "listening on \(configuration.host):\(port)")
        case .failure(let error):
            try? loop.shutdown()
            if error is StorageError { throw FlagError(flag: "--data", problem: "\(error)") }
            throw FlagError(flag: "--listen", problem: "cannot serve on \(listen): \(error)")
        }
        stopped.wait()
        try loop.shutdown()
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
    @Option(help: "reader, writer or admin.")
    var role = "writer"
    @Option(help: "Seconds until the token expires.")
    var ttl = 3600.0

    func run() throws {
        guard let role = TokenRole(rawValue: role) else {
            throw FlagError(flag: "--role", problem: "expected reader, writer or admin, got '\(self.role)'")
        }
        guard room == "*" || RoomID.isValid(room) else {
            throw FlagError(flag: "--room", problem: "invalid room ID '\(room)'")
        }
        guard !user.isEmpty else { throw FlagError(flag: "--user", problem: "must not be empty") }
        let secret = try resolveSecret(value: self.secret, file: secretFile)
        guard ttl.isFinite, ttl > 0 else { throw FlagError(flag: "--ttl", problem: "must be a positive number of seconds") }
        let now = Int64(Date().timeIntervalSince1970)
        let claims = TokenClaims(sub: user, room: room, role: role, exp: now + Int64(ttl.rounded(.up)), iat: now)
        print(TokenSigner(secret: secret).sign(claims))
    }
}

@main
enum Main {
    static func main() {
        do {
            var command = try Roomd.parseAsRoot()
            try command.run()
        } catch let error as FlagError {
            FileHandle.standardError.write(Data("roomd: \(error)\n".utf8))
            exit(2)
        } catch {
            if Roomd.exitCode(for: error) == .success {
                print(Roomd.fullMessage(for: error))
                exit(0)
            }
            let message = Roomd.message(for: error).split(separator: "\n").first.map(String.init) ?? "\(error)"
            FileHandle.standardError.write(Data("roomd: \(message)\n".utf8))
            exit(2)
        }
    }
}
