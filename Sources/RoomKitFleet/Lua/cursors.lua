-- RoomKit fleet script "cursors" (docs/FLEET.md); loaded by FleetScripts.swift.
-- Cursors. KEYS: owner, then cursor:<room> per room.
-- ARGV: host, then per room: shard, fence, op (set/del), session,
-- memberId, seq, user, writable, snapshot. Writes only for shards this
-- host still owns with that fence, so a stale host never overwrites its
-- successor's cursor; each cursor records its writer as `owner`
-- ("host|fence"). Returns the number written.

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
