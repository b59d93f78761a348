-- RoomKit fleet script "rooms" (docs/FLEET.md); loaded by FleetScripts.swift.
-- Rooms. KEYS: changes, then rooms:<shard> per room. ARGV: op (add/remove),
-- then the room IDs. Adds to (removes from) the room set; each real
-- change goes to the changes stream. Returns the number changed.

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
