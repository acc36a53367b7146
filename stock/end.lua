-- end.lua: close a sale's window early (an operator ended or cancelled it).
--
-- KEYS[1] meta
-- ARGV[1] ends_ms, ARGV[2] starts_ms: the window the database now holds
--
-- The sale ends at ARGV[1] or now by Redis's own clock, whichever is
-- earlier: admit.lua judges the window by that clock, so every purchase
-- that reaches Redis after this script answers ENDED, however far the
-- caller's clock is off. Orders already admitted are not touched. Each
-- bound only ever moves earlier, so a late or repeated call never reopens
-- a sale, and starts_ms stays before ends_ms, so a sale ended before it
-- opened answers ENDED, not NOT_STARTED. Returns 1, or 0 when the sale is
-- not loaded (its next load reads the window from the database).
if redis.call('EXISTS', KEYS[1]) == 0 then
  return 0
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ends = math.min(tonumber(ARGV[1]), now)
local held = tonumber(redis.call('HGET', KEYS[1], 'ends_ms') or ends)
if ends < held then
  redis.call('HSET', KEYS[1], 'ends_ms', string.format('%d', ends))
else
  ends = held
end
local starts = math.min(tonumber(ARGV[2]), ends - 1)
if starts < tonumber(redis.call('HGET', KEYS[1], 'starts_ms') or starts) then
  redis.call('HSET', KEYS[1], 'starts_ms', string.format('%d', starts))
end
return 1
