-- reserve.lua: admit one buyer to a sale in one atomic step. It runs after
-- admit.lua (prepended by stock.go), which holds the checks, the KEYS and
-- ARGV, and the answers other than 0.
--
-- ARGV[6] the admitting api's clock at admission, Unix ms, or '' (absent:
--         ''): the order's admitted_at, which the intent carries to its row
--         and KEYS[9] keeps for reads of the order before its row exists
-- KEYS[9] admitted hash order id -> ARGV[6] (KEYS[8] is limit.lua's)
--
-- Returns {0, order id} once the buyer is admitted: DECR stock, HSET
-- buyers, XADD the intent (with the sale's payment_timeout_ms when it has
-- one, the purchase's traceparent when tracing is on, and the api's
-- admission time when it sent one), INCR the
-- version so that a reconciler holding an older view of the sale repairs
-- nothing, and ZADD the order to the line scored by that new version.
--
-- The intent's field names are stock.Intent's (intent.go: IntentOrderID,
-- IntentSaleID, IntentUserID, IntentAmountCents, IntentReservedMS,
-- IntentAdmittedMS, IntentPaymentTimeoutMS, IntentTraceparent);
-- ParseIntent reads them.
redis.call('DECR', KEYS[2])
redis.call('HSET', KEYS[3], ARGV[1], ARGV[2])
if ARGV[3] ~= '' then
  redis.call('HSET', KEYS[5], ARGV[1], ARGV[3])
end
local version = redis.call('INCR', KEYS[6])
local intent = {'order_id', ARGV[2], 'sale_id', meta[4], 'user_id', ARGV[1],
  'amount_cents', meta[3], 'reserved_ms', tostring(now)}
-- reserved_ms is Redis's clock; admitted_ms is the api's, which the order
-- shows as its admission time (the id's time may run ahead of both: the
-- id fence, docs/design.md §3.9).
if ARGV[6] and ARGV[6] ~= '' then
  intent[#intent + 1] = 'admitted_ms'
  intent[#intent + 1] = ARGV[6]
  redis.call('HSET', KEYS[9], ARGV[2], ARGV[6])
end
-- A sale with its own payment timeout (warm.lua) hands it to the order's
-- workflow through the intent; without one the relay uses its default.
local timeout = redis.call('HGET', KEYS[1], 'payment_timeout_ms')
if timeout then
  intent[#intent + 1] = 'payment_timeout_ms'
  intent[#intent + 1] = timeout
end
-- The purchase's trace context travels with the intent, so the relay
-- starts the workflow in the purchase's trace.
if ARGV[4] and ARGV[4] ~= '' then
  intent[#intent + 1] = 'traceparent'
  intent[#intent + 1] = ARGV[4]
end
-- The winning request's Idempotency-Key travels with the intent into the
-- order's row, so a sale rebuilt from the database still knows it.
if ARGV[3] ~= '' then
  intent[#intent + 1] = 'idem_key'
  intent[#intent + 1] = ARGV[3]
end
redis.call('XADD', KEYS[4], '*', unpack(intent))
-- The line holds exactly the orders of the stream (the relay removes both
-- at once, started.lua). The version only grows, so the order's rank is
-- its place among the admitted orders still waiting for their workflow
-- (docs/design.md §3.11).
redis.call('ZADD', KEYS[7], version, ARGV[2])
return {0, ARGV[2]}
