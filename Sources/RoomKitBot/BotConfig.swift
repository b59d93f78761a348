import Foundation
import RoomKitPluginHost
import RoomKit
import RoomKitLoop
import RoomKitProtocol

/// One problem in the bot's configuration: `bot.json: auth.secret: must be
/// a non-empty string`. The same type as a manifest's problems, so a
/// manifest named by the config reports through it unchanged.
public typealias ConfigError = ManifestError

/// Every problem found (at least one); printed one per line, exit 2.
public typealias ConfigErrors = ManifestErrors

/// Where the bot's tokens come from.
public enum BotAuth: Sendable, Hashable {
    /// Mint tokens with the shared secret (development).
    case secret(String)
    /// Fixed tokens per room (`*` for any room).
    case tokens([String: String])
    /// A JSON file `{room: token}` re-read whenever a token is needed (renewal).
    case tokenFile(String)
}

/// `bot.json`'s `tls`: how to trust a `wss://` server with a private CA.
public struct BotTLS: Sendable, Hashable {
    /// PEM file of CAs trusted besides the system's (absolute after loading).
    public var caFile: String?
    /// The name the server's certificate must carry, when it differs from the URL's host.
    public var serverName: String?
}

/// `bot.json` (CLI.md), validated. Relative paths are resolved against the config file.
public struct BotConfig: Sendable {
    public var path: String
    public var server: String
    public var user: LoginUser
    public var auth: BotAuth
    public var rooms: [String]
    public var manifest: String?
    public var control: String?
    /// Bearer secret the control API requires (`Authorization: Bearer …`).
    /// Mandatory when `control` binds to anything but loopback.
    public var controlToken: String?
    /// A token with role `service`, sent in `hello` (docs/PROTOCOL.md
    /// "Service connections"): roomd then gives the bot's one connection its
    /// larger request bucket, so thousands of rooms log in and resume in
    /// seconds. nil: an ordinary connection, paced at 190 requests/s.
    public var serviceToken: String?
    public var events: String?
    public var loginTimeout: Duration
    public var reconnectWindow: Duration
    /// How often the first logins' failures are logged, one line per cause
    /// with a count (`logInterval`, default 5 s; `BotRunner.joinAll`).
    public var logInterval: Duration
    /// Fleet mode (docs/FLEET.md): the hosts share the room set through Redis.
    public var fleet: FleetConfig?
    /// The bot's store (SQLite, `BotStore`): the room set, every session's
    /// cursor. Default: `<config name>.state.sqlite` beside the config.
    public var stateFile: String
    /// Trust settings for a `wss://` server (nil: the system's CAs, the URL's host).
    public var tls: BotTLS?
    /// The JSON state file of earlier versions, imported once into the store.
    public var legacyStateFile: String?

    /// Reads and validates `path`; throws `ConfigErrors` listing every problem.
    public init(path: String) throws(ConfigErrors) {
        let file = (path as NSString).lastPathComponent
        guard let data = FileManager.default.contents(atPath: path) else {
            throw ConfigErrors(errors: [ConfigError(file: file, field: "", problem: "cannot read \(path)")])
        }
        let json: JSON
        do {
            json = try JSON.parse(Array(data))
        } catch {
            throw ConfigErrors(errors: [ConfigError(file: file, field: "", problem: "not valid JSON: \(error)")])
        }
        try self.init(json: json, path: path)
    }

    public init(json: JSON, path: String) throws(ConfigErrors) {
        let file = (path as NSString).lastPathComponent
        let directory = (path as NSString).deletingLastPathComponent
        var errors: [ConfigError] = []
        func fail(_ field: String, _ problem: String) { errors.append(ConfigError(file: file, field: field, problem: problem)) }
        func resolve(_ relative: String) -> String {
            relative.hasPrefix("/") ? relative : ((directory.isEmpty ? "." : directory) as NSString).appendingPathComponent(relative)
        }
        guard let root = json.objectValue else {
            throw ConfigErrors(errors: [ConfigError(file: file, field: "", problem: "must be a JSON object")])
        }
        let known: Set<String> = ["server", "user", "auth", "rooms", "manifest", "control", "controlToken", "serviceToken", "events",
                                  "loginTimeout", "reconnectWindow", "logInterval", "state", "tls", "fleet"]
        for key in root.keys.sorted() where !known.contains(key) { fail(key, "unknown field") }

        let server = root["server"]?.stringValue ?? ""
        if root["server"] == nil { fail("server", "missing") }
        else if (try? WebSocketURL(server)) == nil { fail("server", "must be a ws:// or wss:// URL, got '\(server)'") }

        var user = LoginUser(id: "")
        if let object = root["user"]?.objectValue {
            if let id = object["id"]?.stringValue, UserID.isValid(id) { user.id = id }
            else { fail("user.id", "must be a user ID (1-128 bytes, no control characters)") }
            if let name = object["name"] {
                if let text = name.stringValue { user.name = text } else { fail("user.name", "must be a string") }
            }
            user.payload = object["payload"]
        } else {
            fail("user", root["user"] == nil ? "missing" : "must be an object {id, name?}")
        }

        var auth = BotAuth.tokens([:])
        if let object = root["auth"]?.objectValue {
            let kinds = ["secret", "tokens", "tokenFile"].filter { object[$0] != nil }
            if kinds.count != 1 {
                fail("auth", "needs exactly one of secret, tokens, tokenFile")
            } else if let secret = object["secret"] {
                if let text = secret.stringValue, !text.isEmpty { auth = .secret(text) } else { fail("auth.secret", "must be a non-empty string") }
            } else if let tokens = object["tokens"] {
                if let map = tokens.objectValue, map.values.allSatisfy({ $0.stringValue != nil }) {
                    auth = .tokens(map.compactMapValues(\.stringValue))
                } else {
                    fail("auth.tokens", "must be an object {room: token}")
                }
            } else if let tokenFile = object["tokenFile"] {
                if let text = tokenFile.stringValue, !text.isEmpty {
                    let resolved = resolve(text)
                    if FileManager.default.isReadableFile(atPath: resolved) { auth = .tokenFile(resolved) }
                    else { fail("auth.tokenFile", "no such file: \(resolved)") }
                } else {
                    fail("auth.tokenFile", "must be a path")
                }
            }
        } else {
            fail("auth", root["auth"] == nil ? "missing" : "must be an object")
        }

        var rooms: [String] = []
        if let list = root["rooms"] {
            if let array = list.arrayValue {
                var seen: [String: Int] = [:]
                for (index, value) in array.enumerated() {
                    guard let room = value.stringValue, RoomID.isValid(room) else {
                        fail("rooms[\(index)]", "must be a room ID (1-128 of [A-Za-z0-9_.:-])")
                        continue
                    }
                    // A room listed twice would be joined twice: the second
                    // login fails with a misleading "already logged in".
                    if let first = seen[room] { fail("rooms[\(index)]", "duplicate room '\(room)' (also rooms[\(first)])") }
                    else { seen[room] = index; rooms.append(room) }
                }
            } else {
                fail("rooms", "must be an array of room IDs")
            }
        }

        var manifest: String?
        if let value = root["manifest"] {
            if let text = value.stringValue, !text.isEmpty {
                manifest = resolve(text)
                if !FileManager.default.isReadableFile(atPath: manifest!) { fail("manifest", "no such file: \(manifest!)") }
            } else {
                fail("manifest", "must be a path")
            }
        }
        var control: String?
        if let value = root["control"] {
            if let text = value.stringValue, Self.hostPort(text) != nil { control = text } else { fail("control", "must be HOST:PORT") }
        }
        var controlToken: String?
        if let value = root["controlToken"] {
            if let text = value.stringValue, text.utf8.count >= 16 { controlToken = text }
            else { fail("controlToken", "must be a string of at least 16 characters") }
        }
        var serviceToken: String?
        if let value = root["serviceToken"] {
            if let text = value.stringValue, Self.looksLikeJWT(text) { serviceToken = text }
            else { fail("serviceToken", "must be a JWT (header.claims.signature) with role service") }
        }
        if let control, let (host, _) = Self.hostPort(control), !Self.isLoopback(host), controlToken == nil {
            fail("control", "binds to \(host), which is not loopback: set controlToken to require authentication")
        }
        var events: String?
        if let value = root["events"] {
            if let text = value.stringValue, !text.isEmpty { events = text == "-" ? "-" : resolve(text) } else { fail("events", "must be a path or -") }
        }
        // Checked once against its documented range (ExternalNumber).
        func seconds(_ key: String, _ fallback: Duration) -> Duration {
            guard let value = root[key] else { return fallback }
            do {
                return try ExternalNumber.seconds(value, field: key, in: ExternalNumber.longSeconds)
            } catch {
                fail(key, error.problem)
                return fallback
            }
        }
        let loginTimeout = seconds("loginTimeout", .seconds(30))
        let reconnectWindow = seconds("reconnectWindow", .seconds(1200))
        let logInterval = seconds("logInterval", .seconds(5))
        var (stateFile, legacyStateFile) = Self.storePaths(resolve(((file as NSString).deletingPathExtension) + ".state.json"))
        if let value = root["state"] {
            if let text = value.stringValue, !text.isEmpty { (stateFile, legacyStateFile) = Self.storePaths(resolve(text)) }
            else { fail("state", "must be a path") }
        }
        let tls = Self.parseTLS(root["tls"], server: server, resolve: resolve, fail: fail)
        let fleet = root["fleet"].flatMap { FleetConfig.parse($0, fail: fail) }
        if !errors.isEmpty { throw ConfigErrors(errors: errors) }
        self.tls = tls
        self.fleet = fleet
        self.path = path
        self.server = server
        self.user = user
        self.auth = auth
        self.rooms = rooms
        self.manifest = manifest
        self.control = control
        self.controlToken = controlToken
        self.serviceToken = serviceToken
        self.events = events
        self.loginTimeout = loginTimeout
        self.reconnectWindow = reconnectWindow
        self.logInterval = logInterval
        self.stateFile = stateFile
        self.legacyStateFile = legacyStateFile
    }

    /// Three non-empty dot-separated parts: the shape of a signed JWT (its
    /// signature and role are roomd's to check, at `hello`).
    public static func looksLikeJWT(_ text: String) -> Bool {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        return parts.count == 3 && parts.allSatisfy { !$0.isEmpty } && !text.contains(where: \.isWhitespace)
    }

    /// The store's path for a `state` path: a `.json` path (the state file
    /// of earlier versions) becomes the same name with `.sqlite`, and the
    /// JSON file is imported once; any other path is the store itself.
    public static func storePaths(_ path: String) -> (store: String, legacy: String?) {
        guard path.hasSuffix(".json") else { return (path, nil) }
        return (String(path.dropLast(5)) + ".sqlite", path)
    }

    /// `tls: {"caFile"?, "serverName"?}`: only for a `wss://` server.
    private static func parseTLS(_ value: JSON?, server: String, resolve: (String) -> String,
                                 fail: (String, String) -> Void) -> BotTLS? {
        guard let value else { return nil }
        guard let object = value.objectValue else {
            fail("tls", "must be an object {caFile?, serverName?}")
            return nil
        }
        var tls = BotTLS()
        for key in object.keys.sorted() where key != "caFile" && key != "serverName" { fail("tls.\(key)", "unknown field") }
        if let caFile = object["caFile"] {
            if let text = caFile.stringValue, !text.isEmpty {
                let resolved = resolve(text)
                if FileManager.default.isReadableFile(atPath: resolved) { tls.caFile = resolved }
                else { fail("tls.caFile", "cannot read \(resolved)") }
            } else {
                fail("tls.caFile", "must be a path to a PEM file")
            }
        }
        if let serverName = object["serverName"] {
            if let text = serverName.stringValue, !text.isEmpty, !text.contains(where: { $0 == "/" || $0 == ":" || $0.isWhitespace }) {
                tls.serverName = text
            } else {
                fail("tls.serverName", "must be a host name")
            }
        }
        if !server.hasPrefix("wss://") { fail("tls", "applies to a wss:// server only, got '\(server)'") }
        return tls
    }

    /// Whether `host` names the loopback interface.
    public static func isLoopback(_ host: String) -> Bool {
        host == "localhost" || host == "::1" || host == "[::1]" || host.hasPrefix("127.")
    }

    /// Splits `HOST:PORT` (port 0..65535).
    public static func hostPort(_ text: String) -> (host: String, port: Int)? {
        guard let colon = text.lastIndex(of: ":") else { return nil }
        let host = String(text[..<colon])
        guard !host.isEmpty, let port = Int(text[text.index(after: colon)...]), (0...65535).contains(port) else { return nil }
        return (host, port)
    }
}
