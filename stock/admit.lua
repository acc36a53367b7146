-- admit.lua: the admission checks, shared by reserve.lua and lookup.lua so
-- that a lookup always answers what a reservation would. It is not a script
-- of its own: stock.go prepends it to each of the two, after a line that
-- sets rewrite_winner (true for reserve.lua). It returns the answer
-- for a buyer who cannot be admitted, and falls through, with meta and now
-- set, when the buyer may take a unit.
--
-- KEYS[1] meta    hash  starts_ms, ends_ms, price_cents, sale_id
-- KEYS[2] stock   string remaining units
-- KEYS[3] buyers  hash  user id -> order id
-- KEYS[4] intents stream of admitted orders, read by the relay
-- KEYS[5] idem    hash  user id -> Idempotency-Key of the request that won
-- KEYS[6] version incremented on every change of the sale's admission state
-- KEYS[7] line    sorted set of the orders in the intent stream, scored by
--                 the version of their admission; unused by lookup.lua
-- ARGV[1] user id
-- ARGV[2] order id minted by the caller (a decimal string: Lua numbers are
--         doubles and would round a 64-bit id); unused by lookup.lua
-- ARGV[3] Idempotency-Key of the request, or ''
-- ARGV[4] W3C traceparent of the purchase, or '' (absent: ''); unused by
--         lookup.lua
--
-- Answers {code, order id}: 1 already purchased (the existing order id),
-- 2 sold out, 3 not started, 4 ended, 5 unknown sale (not warmed), 6 a
-- retry of the request that won (same Idempotency-Key; the existing order
-- id). The script it is prepended to answers the rest.
local meta = redis.call('HMGET', KEYS[1], 'starts_ms', 'ends_ms', 'price_cents', 'sale_id')
if not meta[1] then
  return {5, ''}
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if now < tonumber(meta[1]) then
  return {3, ''}
end
if now >= tonumber(meta[2]) then
  return {4, ''}
end
-- A buyer who already holds a unit gets the same order back, so a retried
-- request never takes a second unit.
local existing = redis.call('HGET', KEYS[3], ARGV[1])
if existing then
  if ARGV[3] ~= '' and redis.call('HGET', KEYS[5], ARGV[1]) == ARGV[3] then
    if rewrite_winner then
      -- A write of this run, so that a WAIT after it covers the
      -- reservation answered here (redisack: a connection's WAIT counts
      -- its own writes, and replication keeps their order).
      redis.call('HSET', KEYS[5], ARGV[1], ARGV[3])
    end
    return {6, existing}
  end
  if rewrite_winner then
    -- The same value again: a write of this run, so that a WAIT after it
    -- covers the reservation this refusal names (a buyer told "you
    -- already hold order X" must hold X on a replica).
    redis.call('HSET', KEYS[3], ARGV[1], existing)
  end
  return {1, existing}
end
local stock = redis.call('GET', KEYS[2])
local left = tonumber(stock or '0')
if left <= 0 then
  if rewrite_winner and stock then
    -- Likewise: "sold out" only once a replica holds the reservations
    -- that sold it out.
    redis.call('SET', KEYS[2], stock, 'KEEPTTL')
  end
  return {2, ''}
end
