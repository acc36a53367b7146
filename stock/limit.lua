-- limit.lua: the per-buyer purchase limit, checked in the same script run as
-- the reservation it guards, so a purchase costs one round trip to Redis
-- (docs/design.md §3.10). It is not a script of its own: stock.go prepends
-- it to reserve.lua's admission checks. It returns {8, retry after in ms}
-- for a buyer over the limit, before anything is read or written; else it
-- records the purchase and falls through.
--
-- KEYS[8] rate    string: the buyer's theoretical arrival time, in
--                 microseconds of Redis TIME (GCRA); it expires once the
--                 buyer's full burst is available again
-- ARGV[5] purchases per second per buyer; the burst is one second's
--         worth, as github.com/go-redis/redis_rate's PerSecond. Absent,
--         empty or 0: no limit.
--
-- GCRA: each purchase moves the buyer's arrival time one interval
-- (1/rate s) forward from max(now, the last arrival time); a purchase that
-- would move it more than one second past now is refused, and may be
-- retried once it would not.
local rate = tonumber(ARGV[5] or '') or 0
if rate > 0 then
  local t = redis.call('TIME')
  local us = tonumber(t[1]) * 1000000 + tonumber(t[2])
  local tat = math.max(tonumber(redis.call('GET', KEYS[8]) or '0') or 0, us)
  local arrival = tat + 1000000 / rate
  local early = arrival - us - 1000000
  if early > 0 then
    return {8, tostring(math.ceil(early / 1000))}
  end
  -- '%.0f' writes all the digits: tostring would round to 14 of them.
  redis.call('SET', KEYS[8], string.format('%.0f', arrival), 'PX', math.ceil((arrival - us) / 1000))
end
