import Foundation
import RoomKitRedis

/// The fleet's keys (docs/FLEET.md). Every key carries the fleet name as a
/// hash tag, `{F}`, so all of them live in one Redis Cluster slot and the
/// scripts below may touch any of them.
struct FleetKeys: Sendable {
    let prefix: String

    init(fleet: String) {
        prefix = "roomkit:{\(fleet)}:"
    }

    /// ZSET shard → lease expiry (ms of Redis `TIME`).
    var lease: String { prefix + "lease" }
    /// HASH shard → "host|fence".
    var owner: String { prefix + "owner" }
    /// The one global fence counter (`INCR`).
    var fence: String { prefix + "fence" }
    /// ZSET host ID → heartbeat expiry.
    var hosts: String { prefix + "hosts" }
    /// SET of draining host IDs.
    var draining: String { prefix + "draining" }
    /// HASH load, rooms, shards, draining of one host.
    func host(_ id: String) -> String { prefix + "host:" + id }
    /// SET of the room IDs of one shard.
    func rooms(_ shard: Int) -> String { prefix + "rooms:\(shard)" }
    /// HASH the owning session's cursor of one room.
    func cursor(_ room: String) -> String { prefix + "cursor:" + room }
    /// STREAM of rooms added or removed.
    var changes: String { prefix + "changes" }
}

/// The shard of a room: FNV-1a (32 bit) of its UTF-8 bytes, mod `shards`.
/// Stable across hosts, processes and releases (documented in FLEET.md).
func fleetShard(of room: String, shards: Int) -> Int {
    var hash: UInt32 = 2_166_136_261
    for byte in room.utf8 {
        hash ^= UInt32(byte)
        hash = hash &* 16_777_619
    }
    return Int(hash % UInt32(shards))
}

/// A script's name and Lua source; each coordinator makes its own
/// `RedisScript` from it (the cached SHA is loop-thread state).
struct FleetScriptSource: Sendable {
    let name: String
    let source: String
    var script: RedisScript { RedisScript(name: name, source: source) }

    /// The script in `Lua/<name>.lua`, a resource of this module. A missing
    /// file is a broken build or install (the `RoomKit_RoomKitBot.resources`
    /// directory belongs beside the binary): it stops the process, naming
    /// the file.
    init(resource name: String) {
        self.name = name
        guard let url = Bundle.module.url(forResource: name, withExtension: "lua", subdirectory: "Lua"),
              let source = try? String(contentsOf: url, encoding: .utf8) else {
            fatalError("fleet script Lua/\(name).lua is missing from RoomKitBot's resources (\(Bundle.module.bundlePath))")
        }
        self.source = source
    }
}

/// One Lua script per operation, each in its own file under `Lua/` (a
/// SwiftPM resource of RoomKitBot: `<name>.lua`, its KEYS, ARGV and reply
/// documented at its top); each runs atomically, once per host per tick,
/// whatever the number of rooms. Times come from Redis `TIME` (one clock
/// for the whole fleet). Owner values are "host|fence".
enum FleetScripts {
    /// Extends this host's leases; re-asserts a shard that has no owner at all. (`Lua/renew.lua`)
    static let renew = FleetScriptSource(resource: "renew")
    /// Takes expired shards up to this host's share, each with a new fence. (`Lua/claim.lua`)
    static let claim = FleetScriptSource(resource: "claim")
    /// Hands shards back (a drain), keeping their lease or not. (`Lua/release.lua`)
    static let release = FleetScriptSource(resource: "release")
    /// Writes the session cursors of rooms this host still owns. (`Lua/cursors.lua`)
    static let cursors = FleetScriptSource(resource: "cursors")
    /// Adds rooms to, or removes them from, their shards. (`Lua/rooms.lua`)
    static let rooms = FleetScriptSource(resource: "rooms")
    /// The fleet's shards, owners and hosts (`GET /v1/fleet`). (`Lua/status.lua`)
    static let status = FleetScriptSource(resource: "status")
    /// Each room cursor's `owner`. (`Lua/owners.lua`)
    static let owners = FleetScriptSource(resource: "owners")
    /// Bumps the fence counter past roomd's current fence. (`Lua/refence.lua`)
    static let refence = FleetScriptSource(resource: "refence")

    /// The directory of the script files (nil: not installed).
    static var directory: URL? { Bundle.module.url(forResource: "Lua", withExtension: nil) }

    /// Every script, for tests that load each file into a real Redis.
    static let all = [renew, claim, release, cursors, rooms, status, owners, refence]
}
