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
}

/// One Lua script per operation; each runs atomically, once per host per
/// tick, whatever the number of rooms. Times come from Redis `TIME` (one
/// clock for the whole fleet). Owner values are "host|fence".
enum FleetScripts {
    /// Milliseconds of Redis `TIME`, as a Lua prelude.
    private static let now = """
        local t = redis.call('TIME')
        local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
        """

    /// Renew. KEYS: lease, owner, hosts, host:<id>, fence, draining.
    /// ARGV: host, ttlMs, load, rooms, draining (0/1), then shard, fence pairs.
    /// Extends the leases this host still owns; re-asserts a shard that has
    /// no owner at all (Redis lost its data: nobody else can have claimed
    /// it, a claim sets the owner), keeping the fence counter past that
    /// fence. A released shard is never renewed, so never re-asserted. Returns {now, lost shards, re-asserted shards}.
    static let renew = FleetScriptSource(name: "renew", source: now + """

        local host, ttl = ARGV[1], tonumber(ARGV[2])
        redis.call('ZADD', KEYS[3], now + ttl, host)
        redis.call('HSET', KEYS[4], 'load', ARGV[3], 'rooms', ARGV[4], 'shards', tostring((#ARGV - 5) / 2),
                   'draining', ARGV[5])
        redis.call('PEXPIRE', KEYS[4], ttl * 3)
        if ARGV[5] == '1' then redis.call('SADD', KEYS[6], host) else redis.call('SREM', KEYS[6], host) end
        local counter = tonumber(redis.call('GET', KEYS[5]) or '0')
        local lost, reasserted = {}, {}
        for i = 6, #ARGV, 2 do
          local shard, fence = ARGV[i], ARGV[i + 1]
          local mine = host .. '|' .. fence
          local owner = redis.call('HGET', KEYS[2], shard)
          if owner == mine then
            redis.call('ZADD', KEYS[1], now + ttl, shard)
          elseif owner == false then
            redis.call('HSET', KEYS[2], shard, mine)
            redis.call('ZADD', KEYS[1], now + ttl, shard)
            if tonumber(fence) > counter then
              counter = tonumber(fence)
              redis.call('SET', KEYS[5], fence)
            end
            reasserted[#reasserted + 1] = shard
          else
            lost[#lost + 1] = shard
          end
        end
        return {now, lost, reasserted}
        """)

    /// Claim. KEYS: lease, owner, hosts, fence, draining.
    /// ARGV: host, ttlMs, shards, owned, maxClaim, mayClaim (0/1).
    /// Drops dead hosts; target = ceil(S / live non-draining hosts). A shard
    /// with no lease record yet is entered as leased for one TTL (after a
    /// Redis restart its owner may be alive and re-assert it). Takes up to
    /// min(target - owned, maxClaim) expired shards, each with a new fence.
    /// Returns {now, target, live, {shard, fence, ...}, {shard, {room, cursor fields...}...}, serving, unhomed}:
    /// `live` is at least 1 (for the target), `serving` the true number of
    /// live non-draining hosts (0 when the caller drains and nobody else is up),
    /// `unhomed` the rooms in shards whose lease has expired.
    static let claim = FleetScriptSource(name: "claim", source: now + """

        local host, ttl, S = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
        local prefix = string.sub(KEYS[1], 1, #KEYS[1] - #'lease')
        local dead = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now)
        for _, h in ipairs(dead) do redis.call('SREM', KEYS[5], h) end
        redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now)
        local live = redis.call('ZCARD', KEYS[3]) - redis.call('SCARD', KEYS[5])
        local serving = live
        if live < 1 then live = 1 end
        local target = math.ceil(S / live)
        if redis.call('ZCARD', KEYS[1]) < S then
          for base = 0, S - 1, 1000 do
            local args = {}
            for s = base, math.min(base + 999, S - 1) do
              args[#args + 1] = now + ttl
              args[#args + 1] = s
            end
            redis.call('ZADD', KEYS[1], 'NX', unpack(args))
          end
        end
        local claimed, rooms = {}, {}
        local want = math.min(target - tonumber(ARGV[4]), tonumber(ARGV[5]))
        if ARGV[6] == '1' and want > 0 then
          local expired = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, want)
          for _, shard in ipairs(expired) do
            local fence = redis.call('INCR', KEYS[4])
            redis.call('HSET', KEYS[2], shard, host .. '|' .. fence)
            redis.call('ZADD', KEYS[1], now + ttl, shard)
            claimed[#claimed + 1] = shard
            claimed[#claimed + 1] = tostring(fence)
            local members = redis.call('SMEMBERS', prefix .. 'rooms:' .. shard)
            for _, room in ipairs(members) do
              rooms[#rooms + 1] = room
              rooms[#rooms + 1] = redis.call('HGETALL', prefix .. 'cursor:' .. room)
            end
          end
        end
        -- Rooms whose shard no live host holds: only expired shards are
        -- read (none in a healthy fleet), once per claim round, not per scrape.
        local unhomed = 0
        for _, shard in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now)) do
          unhomed = unhomed + redis.call('SCARD', prefix .. 'rooms:' .. shard)
        end
        return {now, target, live, claimed, rooms, serving, unhomed}
        """)

    /// Release. KEYS: lease, owner. ARGV: host, keep (0/1), then shard,
    /// fence pairs. Gives up shards this host still owns (the lease becomes
    /// expired at once). Unless `keep`, deletes their rooms' cursors (their
    /// sessions were logged out); a drain keeps them for the next owner to
    /// resume. Returns the number released.
    static let release = FleetScriptSource(name: "release", source: """
        local host, keep = ARGV[1], ARGV[2] == '1'
        local prefix = string.sub(KEYS[1], 1, #KEYS[1] - #'lease')
        local released = 0
        for i = 3, #ARGV, 2 do
          local shard, fence = ARGV[i], ARGV[i + 1]
          if redis.call('HGET', KEYS[2], shard) == host .. '|' .. fence then
            redis.call('HDEL', KEYS[2], shard)
            redis.call('ZADD', KEYS[1], 0, shard)
            if not keep then
              for _, room in ipairs(redis.call('SMEMBERS', prefix .. 'rooms:' .. shard)) do
                redis.call('DEL', prefix .. 'cursor:' .. room)
              end
            end
            released = released + 1
          end
        end
        return released
        """)

    /// Cursors. KEYS: owner, then cursor:<room> per room.
    /// ARGV: host, then per room: shard, fence, op (set/del), session,
    /// memberId, seq, user, writable, snapshot. Writes only for shards this
    /// host still owns with that fence, so a stale host never overwrites its
    /// successor's cursor; each cursor records its writer as `owner`
    /// ("host|fence"). Returns the number written.
    static let cursors = FleetScriptSource(name: "cursors", source: """
        local host = ARGV[1]
        local written = 0
        for i = 2, #KEYS do
          local b = 2 + (i - 2) * 9
          if redis.call('HGET', KEYS[1], ARGV[b]) == host .. '|' .. ARGV[b + 1] then
            if ARGV[b + 2] == 'del' then
              redis.call('DEL', KEYS[i])
            else
              redis.call('HSET', KEYS[i], 'session', ARGV[b + 3], 'memberId', ARGV[b + 4], 'seq', ARGV[b + 5],
                         'user', ARGV[b + 6], 'writable', ARGV[b + 7], 'snapshot', ARGV[b + 8],
                         'owner', host .. '|' .. ARGV[b + 1])
            end
            written = written + 1
          end
        end
        return written
        """)

    /// Rooms. KEYS: changes, then rooms:<shard> per room. ARGV: op (add/remove),
    /// then the room IDs. Adds to (removes from) the room set; each real
    /// change goes to the changes stream. Returns the number changed.
    static let rooms = FleetScriptSource(name: "rooms", source: """
        local op = ARGV[1]
        local prefix = string.sub(KEYS[1], 1, #KEYS[1] - #'changes')
        local changed = 0
        for i = 2, #KEYS do
          local room = ARGV[i]
          local n
          if op == 'add' then n = redis.call('SADD', KEYS[i], room) else n = redis.call('SREM', KEYS[i], room) end
          if op == 'remove' then redis.call('DEL', prefix .. 'cursor:' .. room) end
          if n == 1 then
            redis.call('XADD', KEYS[1], 'MAXLEN', '~', '100000', '*', 'op', op, 'room', room)
            changed = changed + 1
          end
        end
        return changed
        """)

    /// Status. KEYS: lease, owner, hosts, draining. ARGV: shards.
    /// Returns {now, {host, expiry, {hash fields}}..., rooms, unhomed}.
    static let status = FleetScriptSource(name: "status", source: now + """

        local S = tonumber(ARGV[1])
        local prefix = string.sub(KEYS[1], 1, #KEYS[1] - #'lease')
        local hosts = {}
        local list = redis.call('ZRANGEBYSCORE', KEYS[3], now, '+inf', 'WITHSCORES')
        for i = 1, #list, 2 do
          hosts[#hosts + 1] = {list[i], list[i + 1], redis.call('HGETALL', prefix .. 'host:' .. list[i])}
        end
        local rooms, unhomed = 0, 0
        for s = 0, S - 1 do
          local n = redis.call('SCARD', prefix .. 'rooms:' .. s)
          if n > 0 then
            rooms = rooms + n
            local expiry = tonumber(redis.call('ZSCORE', KEYS[1], s) or '0')
            if expiry <= now or redis.call('HEXISTS', KEYS[2], s) == 0 then unhomed = unhomed + n end
          end
        end
        return {now, hosts, rooms, unhomed}
        """)

    /// Owners. KEYS: cursor:<room> per room. Returns each cursor's `owner`
    /// (nil when there is none): a draining host sees which of the rooms it
    /// handed over the next owner has taken.
    static let owners = FleetScriptSource(name: "owners", source: """
        local owners = {}
        for i = 1, #KEYS do owners[i] = redis.call('HGET', KEYS[i], 'owner') or '' end
        return owners
        """)

    /// Bump the fence counter past `ARGV[1]` (roomd's current fence after a
    /// 1009008), then give `ARGV[3]`'s shard a new fence if `ARGV[2]` still
    /// owns it as `ARGV[2]|ARGV[4]`. KEYS: fence, owner. Returns the new fence or -1.
    static let refence = FleetScriptSource(name: "refence", source: """
        local floor = tonumber(ARGV[1])
        if tonumber(redis.call('GET', KEYS[1]) or '0') < floor then redis.call('SET', KEYS[1], floor) end
        if redis.call('HGET', KEYS[2], ARGV[3]) ~= ARGV[2] .. '|' .. ARGV[4] then return -1 end
        local fence = redis.call('INCR', KEYS[1])
        redis.call('HSET', KEYS[2], ARGV[3], ARGV[2] .. '|' .. fence)
        return fence
        """)
}
