-- retire.lua: drop an ended, drained sale's keys in one atomic step.
--
-- KEYS: Keys.All() — meta, stock, buyers, intents, idem, version, released,
-- line, started, admitted
-- Returns 1 when the keys were dropped (or were gone already), 0 when the
-- sale has not ended by Redis's clock or its intent stream still holds
-- entries: orders whose workflow has not started, which retiring would
-- lose.
local ends = redis.call('HGET', KEYS[1], 'ends_ms')
if ends then
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  if now < tonumber(ends) then
    return 0
  end
end
-- The relay deletes an entry only after acknowledging it, so an empty
-- stream has nothing left to start.
if redis.call('XLEN', KEYS[4]) > 0 then
  return 0
end
redis.call('DEL', unpack(KEYS))
return 1
