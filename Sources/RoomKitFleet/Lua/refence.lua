-- RoomKit fleet script "refence" (docs/FLEET.md); loaded by FleetScripts.swift.
-- Bump the fence counter past `ARGV[1]` (roomd's current fence after a
-- 1009008), then give `ARGV[3]`'s shard a new fence if `ARGV[2]` still
-- owns it as `ARGV[2]|ARGV[4]`. KEYS: fence, owner. Returns the new fence or -1.

local floor = tonumber(ARGV[1])
if tonumber(redis.call('GET', KEYS[1]) or '0') < floor then redis.call('SET', KEYS[1], floor) end
if redis.call('HGET', KEYS[2], ARGV[3]) ~= ARGV[2] .. '|' .. ARGV[4] then return -1 end
local fence = redis.call('INCR', KEYS[1])
redis.call('HSET', KEYS[2], ARGV[3], ARGV[2] .. '|' .. fence)
return fence
