-- RoomKit fleet script "owners" (docs/FLEET.md); loaded by FleetScripts.swift.
-- Owners. KEYS: cursor:<room> per room. Returns each cursor's `owner`
-- (nil when there is none): a draining host sees which of the rooms it
-- handed over the next owner has taken.

local owners = {}
for i = 1, #KEYS do owners[i] = redis.call('HGET', KEYS[i], 'owner') or '' end
return owners
