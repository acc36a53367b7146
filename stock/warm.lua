-- warm.lua: load a sale into Redis unless it is there already.
--
-- KEYS[1] meta, KEYS[2] stock, KEYS[3] buyers, KEYS[4] idem
-- ARGV: sale id, starts_ms, ends_ms, price_cents, remaining,
--       then user id, order id pairs of the buyers that hold a unit.
-- Returns 1 when it loaded the sale, 0 when the sale was already warm
-- (warming twice must not reset a sale in progress).
if redis.call('EXISTS', KEYS[1]) == 1 then
  return 0
end
redis.call('SET', KEYS[2], ARGV[5])
redis.call('DEL', KEYS[3], KEYS[4])
for i = 6, #ARGV, 2 do
  redis.call('HSET', KEYS[3], ARGV[i], ARGV[i + 1])
end
redis.call('HSET', KEYS[1], 'sale_id', ARGV[1], 'starts_ms', ARGV[2], 'ends_ms', ARGV[3], 'price_cents', ARGV[4])
return 1
