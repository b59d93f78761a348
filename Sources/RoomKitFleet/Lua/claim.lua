-- RoomKit fleet script "claim" (docs/FLEET.md); loaded by FleetScripts.swift.
-- Claim. KEYS: lease, owner, hosts, fence, draining.
-- ARGV: host, ttlMs, shards, owned, maxClaim, mayClaim (0/1).
-- Drops dead hosts; target = ceil(S / live non-draining hosts). A shard
-- with no lease record yet is entered as leased for one TTL (after a
-- Redis restart its owner may be alive and re-assert it). Takes up to
-- min(target - owned, maxClaim) expired shards, each with a new fence.
-- Returns {now, target, live, {shard, fence, ...}, {shard, {room, cursor fields...}...}, serving, unhomed}:
-- `live` is at least 1 (for the target), `serving` the true number of
-- live non-draining hosts (0 when the caller drains and nobody else is up),
-- `unhomed` the rooms in shards whose lease has expired.

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

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
