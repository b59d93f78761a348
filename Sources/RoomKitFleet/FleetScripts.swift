import Foundation
import RoomKitRedis

/// The fleet's keys (docs/FLEET.md). Every key carries the fleet name as a
/// hash tag, `{F}`, so all of them live in one Redis Cluster slot and the
/// scripts below may touch any of them.
public struct FleetKeys: Sendable {
    /// `roomkit:{F}:`.
    public let prefix: String

    /// The keys of the fleet named `fleet`.
    public init(fleet: String) {
        prefix = "roomkit:{\(fleet)}:"
    }

    /// ZSET shard → lease expiry (ms of Redis `TIME`).
    public var lease: String { prefix + "lease" }
    /// HASH shard → "host|fence".
    public var owner: String { prefix + "owner" }
    /// The one global fence counter (`INCR`).
    public var fence: String { prefix + "fence" }
    /// ZSET host ID → heartbeat expiry.
    public var hosts: String { prefix + "hosts" }
    /// SET of draining host IDs.
    public var draining: String { prefix + "draining" }
    /// HASH load, rooms, shards, draining of one host.
    public func host(_ id: String) -> String { prefix + "host:" + id }
    /// SET of the room IDs of one shard.
    public func rooms(_ shard: Int) -> String { prefix + "rooms:\(shard)" }
    /// HASH the owning session's cursor of one room.
    public func cursor(_ room: String) -> String { prefix + "cursor:" + room }
    /// STREAM of rooms added or removed.
    public var changes: String { prefix + "changes" }
}

/// A script's name and Lua source; each coordinator makes its own
/// `RedisScript` from it (the cached SHA is loop-thread state).
public struct FleetScriptSource: Sendable {
    /// The file's name without `.lua`.
    public let name: String
    /// The Lua text.
    public let source: String
    /// A fresh script object (its SHA cache is the caller's loop state).
    public var script: RedisScript { RedisScript(name: name, source: source) }

    /// The script in `Lua/<name>.lua`, a resource of this module. A missing
    /// file is a broken build or install (the `RoomKit_RoomKitFleet.resources`
    /// directory belongs beside the binary): it stops the process, naming
    /// the file.
    init(resource name: String) {
        self.name = name
        guard let url = Bundle.module.url(forResource: name, withExtension: "lua", subdirectory: "Lua"),
              let source = try? String(contentsOf: url, encoding: .utf8) else {
            fatalError("fleet script Lua/\(name).lua is missing from RoomKitFleet's resources (\(Bundle.module.bundlePath))")
        }
        self.source = source
    }
}

/// One Lua script per operation, each in its own file under `Lua/` (a
/// SwiftPM resource of RoomKitFleet: `<name>.lua`, its KEYS, ARGV and reply
/// documented at its top); each runs atomically, once per host per tick,
/// whatever the number of rooms. Times come from Redis `TIME` (one clock
/// for the whole fleet). Owner values are "host|fence".
public enum FleetScripts {
    /// Extends this host's leases; re-asserts a shard that has no owner at all. (`Lua/renew.lua`)
    public static let renew = FleetScriptSource(resource: "renew")
    /// Takes expired shards up to this host's share, each with a new fence. (`Lua/claim.lua`)
    public static let claim = FleetScriptSource(resource: "claim")
    /// Hands shards back (a drain), keeping their lease or not. (`Lua/release.lua`)
    public static let release = FleetScriptSource(resource: "release")
    /// Writes the session cursors of rooms this host still owns. (`Lua/cursors.lua`)
    public static let cursors = FleetScriptSource(resource: "cursors")
    /// Adds rooms to, or removes them from, their shards. (`Lua/rooms.lua`)
    public static let rooms = FleetScriptSource(resource: "rooms")
    /// The fleet's shards, owners and hosts (`GET /v1/fleet`). (`Lua/status.lua`)
    public static let status = FleetScriptSource(resource: "status")
    /// Each room cursor's `owner`. (`Lua/owners.lua`)
    public static let owners = FleetScriptSource(resource: "owners")
    /// Bumps the fence counter past roomd's current fence. (`Lua/refence.lua`)
    public static let refence = FleetScriptSource(resource: "refence")

    /// The directory of the script files (nil: not installed).
    public static var directory: URL? { Bundle.module.url(forResource: "Lua", withExtension: nil) }

    /// Every script, for tests that load each file into a real Redis.
    public static let all = [renew, claim, release, cursors, rooms, status, owners, refence]
}
