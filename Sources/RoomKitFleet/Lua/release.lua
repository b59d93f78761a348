-- RoomKit fleet script "release" (docs/FLEET.md); loaded by FleetScripts.swift.
-- Release. KEYS: lease, owner. ARGV: host, keep (0/1), then shard,
-- fence pairs. Gives up shards this host still owns (the lease becomes
-- expired at once). Unless `keep`, deletes their rooms' cursors (their
-- sessions were logged out); a drain keeps them for the next owner to
-- resume. Returns the number released.

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
