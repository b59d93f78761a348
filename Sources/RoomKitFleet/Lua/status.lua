-- RoomKit fleet script "status" (docs/FLEET.md); loaded by FleetScripts.swift.
-- Status. KEYS: lease, owner, hosts, draining. ARGV: shards.
-- Returns {now, {host, expiry, {hash fields}}..., rooms, unhomed}.

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

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
