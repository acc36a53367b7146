-- warm.lua: load a sale into Redis unless it is there already.
--
-- KEYS[1] meta, KEYS[2] stock, KEYS[3] buyers, KEYS[4] idem,
-- KEYS[5] version, KEYS[6] released
-- ARGV: sale id, starts_ms, ends_ms, price_cents, remaining,
--       payment_timeout_ms ('' for the server's default: reserve.lua then
--       writes none into the intents, and the relay uses its own),
--       total (the sale's total stock in the database, which the count
--       covers: see add.lua),
--       then user id, order id, Idempotency-Key ('' for none) triples of
--       the buyers that hold a unit: the key of the purchase that won it,
--       so that its retry still answers the same 202 after a rebuild.
-- Returns 1 when it loaded the sale, 0 when the sale was already warm
-- (warming twice must not reset a sale in progress).
--
-- The released set is kept: order ids are never reused, so "this order was
-- released" stays true across a reload (after a data loss the set is gone
-- with everything else, and the database's final statuses speak instead).
-- A buyer whose order is in it is not loaded: its saga released it while
-- the caller read the database. Its unit is then missing from both the
-- count and the buyers until the reconciler's next pass, the side on which
-- nothing is oversold. The version is incremented, never reset, so a view
-- of the sale taken before the load is stale after it.
if redis.call('EXISTS', KEYS[1]) == 1 then
  return 0
end
redis.call('SET', KEYS[2], ARGV[5])
redis.call('DEL', KEYS[3], KEYS[4])
for i = 8, #ARGV, 3 do
  if redis.call('SISMEMBER', KEYS[6], ARGV[i + 1]) == 0 then
    redis.call('HSET', KEYS[3], ARGV[i], ARGV[i + 1])
    if ARGV[i + 2] ~= '' then
      redis.call('HSET', KEYS[4], ARGV[i], ARGV[i + 2])
    end
  end
end
redis.call('HSET', KEYS[1], 'sale_id', ARGV[1], 'starts_ms', ARGV[2], 'ends_ms', ARGV[3], 'price_cents', ARGV[4], 'total', ARGV[7])
if ARGV[6] ~= '' then
  redis.call('HSET', KEYS[1], 'payment_timeout_ms', ARGV[6])
end
redis.call('INCR', KEYS[5])
return 1
