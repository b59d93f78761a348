-- RoomKit fleet script "renew" (docs/FLEET.md); loaded by FleetScripts.swift.
-- Renew. KEYS: lease, owner, hosts, host:<id>, fence, draining.
-- ARGV: host, ttlMs, load, rooms, draining (0/1), then shard, fence pairs.
-- Extends the leases this host still owns; re-asserts a shard that has
-- no owner at all (Redis lost its data: nobody else can have claimed
-- it, a claim sets the owner), keeping the fence counter past that
-- fence. A released shard is never renewed, so never re-asserted. Returns {now, lost shards, re-asserted shards}.

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

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
