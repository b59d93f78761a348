import Foundation
import RoomKitProtocol
import RoomKitRedis

/// `bot.json`'s `"fleet"` object (docs/FLEET.md): several roombot hosts
/// share one room set through Redis; every room has one bot at a time.
public struct FleetConfig: Sendable, Hashable {
    /// Where Redis is (`redis://[[USER]:PASSWORD@]HOST[:PORT][/DB]`); its
    /// password may come from `passwordFile` or `ROOMBOT_REDIS_PASSWORD` instead.
    public var redis: RedisEndpoint
    /// The file the Redis password was read from (`fleet.passwordFile`), if any.
    public var passwordFile: String?
    /// Where the Redis password came from: `fleet.redis`, `fleet.passwordFile`
    /// or `ROOMBOT_REDIS_PASSWORD` (nil: no password).
    public var passwordSource: String?
    /// The fleet's name: every key carries it as a hash tag, `{name}`.
    public var name: String
    /// Fixed number of shards (never change it for a running fleet). Default 4096.
    public var shards: Int = 4096
    /// Lease time to live. Default 10 s; renewed every TTL/5.
    public var leaseTTL: Duration = .seconds(10)
    /// A host whose load (process CPU share over the last claim interval)
    /// is at or above this does not claim more shards (unless it holds none).
    public var loadThreshold: Double = 0.75
    /// Mean time between claim rounds (each is jittered by ±25 %). Default 1 s.
    public var claimInterval: Duration = .seconds(1)
    /// How long a draining host hands shards over before it exits anyway. Default 30 s.
    public var drainTimeout: Duration = .seconds(30)
    /// Shards a host releases per round when rebalancing or draining.
    public var releaseBatch: Int = 256

    /// A fleet on `redis` named `name`, with the defaults above.
    public init(redis: RedisEndpoint, name: String) {
        self.redis = redis
        self.name = name
    }

    /// Parses the `fleet` object; problems go to `fail(field, problem)`.
    public static func parse(_ value: JSON, environment: [String: String] = ProcessInfo.processInfo.environment,
                      fail: (String, String) -> Void) -> FleetConfig? {
        guard let object = value.objectValue else {
            fail("fleet", "must be an object {redis, name, shards?, leaseTTL?, loadThreshold?}")
            return nil
        }
        let known: Set<String> = ["redis", "name", "shards", "leaseTTL", "loadThreshold", "claimInterval",
                                  "drainTimeout", "releaseBatch", "passwordFile"]
        for key in object.keys.sorted() where !known.contains(key) { fail("fleet.\(key)", "unknown field") }
        var endpoint: RedisEndpoint?
        if let text = object["redis"]?.stringValue, let parsed = RedisEndpoint(url: text) { endpoint = parsed }
        else { fail("fleet.redis", "must be a redis://[[USER]:PASSWORD@]HOST[:PORT][/DB] URL") }
        var name = ""
        if let text = object["name"]?.stringValue, !text.isEmpty, text.utf8.count <= 64,
           !text.contains(where: { "{}".contains($0) || $0.isWhitespace }) {
            name = text
        } else {
            fail("fleet.name", "must be 1-64 characters without braces or spaces")
        }
        guard let endpoint, !name.isEmpty else { return nil }
        var config = FleetConfig(redis: endpoint, name: name)
        resolvePassword(&config, object["passwordFile"], environment: environment, fail: fail)
        if let value = object["shards"] {
            if let shards = value.int64Value, (1...65536).contains(shards) { config.shards = Int(shards) }
            else { fail("fleet.shards", "must be an integer 1-65536") }
        }
        func seconds(_ key: String, _ apply: (Duration) -> Void) {
            guard let value = object[key] else { return }
            do {
                apply(try ExternalNumber.seconds(value, field: "fleet.\(key)", in: ExternalNumber.shortSeconds))
            } catch {
                fail("fleet.\(key)", error.problem)
            }
        }
        seconds("leaseTTL") { config.leaseTTL = $0 }
        seconds("claimInterval") { config.claimInterval = $0 }
        seconds("drainTimeout") { config.drainTimeout = $0 }
        if config.leaseTTL < .milliseconds(500) { fail("fleet.leaseTTL", "must be at least 0.5 s") }
        if let value = object["loadThreshold"] {
            if let number = value.doubleValue, number > 0, number <= 1 { config.loadThreshold = number }
            else { fail("fleet.loadThreshold", "must be a number in (0, 1]") }
        }
        if let value = object["releaseBatch"] {
            if let count = value.int64Value, count >= 1 { config.releaseBatch = Int(count) }
            else { fail("fleet.releaseBatch", "must be a positive integer") }
        }
        return config
    }

    /// The environment variable holding the Redis password when neither
    /// `fleet.redis` nor `fleet.passwordFile` gives one.
    public static let passwordEnvironment = "ROOMBOT_REDIS_PASSWORD"

    /// The password, in this order: in the URL, from `passwordFile` (trailing
    /// line breaks dropped, as for every secret file), from
    /// `ROOMBOT_REDIS_PASSWORD`. Problems name the field or variable.
    private static func resolvePassword(_ config: inout FleetConfig, _ file: JSON?, environment: [String: String],
                                        fail: (String, String) -> Void) {
        if config.redis.password != nil { config.passwordSource = "fleet.redis" }
        if let file {
            guard let path = file.stringValue, !path.isEmpty else { return fail("fleet.passwordFile", "must be a file path") }
            guard config.redis.password == nil else {
                return fail("fleet.passwordFile", "fleet.redis already has a password: give it in one place")
            }
            guard let data = FileManager.default.contents(atPath: path), var text = String(data: data, encoding: .utf8) else {
                return fail("fleet.passwordFile", "cannot read \(path)")
            }
            while let last = text.last, last == "\n" || last == "\r" || last == "\r\n" { text.removeLast() }
            guard !text.isEmpty else { return fail("fleet.passwordFile", "\(path) is empty") }
            config.redis.password = text
            config.passwordFile = path
            config.passwordSource = "fleet.passwordFile"
        } else if config.redis.password == nil, let text = environment[passwordEnvironment] {
            guard !text.isEmpty else { return fail(passwordEnvironment, "is set but empty") }
            config.redis.password = text
            config.passwordSource = passwordEnvironment
        }
    }
}
