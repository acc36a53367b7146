-- repair.lua: apply the reconciler's plan in one atomic step, only if the
-- sale has not changed since the reconciler read it (snapshot.lua).
--
-- KEYS[1] meta, KEYS[2] stock, KEYS[3] buyers, KEYS[4] idem,
-- KEYS[5] version, KEYS[6] released
-- ARGV[1] the version the plan was made from
-- ARGV[2] the remaining count to set after the releases, or '' to leave it
-- ARGV[3] the database's total stock that count was computed from (the
--         meta's `total`, see add.lua), set with it
-- ARGV[4] n, the number of buyers to restore
-- ARGV[5 .. 4+3n] user id, order id, winning Idempotency-Key ('' for none)
--                 triples of the buyers to restore
-- ARGV[5+3n ..]   user id, order id pairs of the reservations to release
--
-- Returns {applied, restored, refused, released, remaining before,
-- remaining after}; applied is 0, and nothing was done, when the version
-- moved (a purchase, release or load happened after the snapshot) or the
-- sale is no longer loaded.
if redis.call('EXISTS', KEYS[1]) == 0 or (redis.call('GET', KEYS[5]) or '0') ~= ARGV[1] then
  return {0, 0, 0, 0, 0, 0}
end
local was = tonumber(redis.call('GET', KEYS[2]) or '0')
local restored, refused, released = 0, 0, 0
local i = 5
for _ = 1, tonumber(ARGV[4]) do
  -- An order in the released set is over in Redis, whatever the caller's
  -- view of it; HSETNX never replaces another reservation of the buyer.
  if redis.call('SISMEMBER', KEYS[6], ARGV[i + 1]) == 1 then
    refused = refused + 1
  elseif redis.call('HSETNX', KEYS[3], ARGV[i], ARGV[i + 1]) == 1 then
    restored = restored + 1
    if ARGV[i + 2] ~= '' then
      redis.call('HSET', KEYS[4], ARGV[i], ARGV[i + 2])
    end
  end
  i = i + 3
end
-- Stale reservations, released as release.lua does.
while i < #ARGV do
  if redis.call('HGET', KEYS[3], ARGV[i]) == ARGV[i + 1] then
    redis.call('HDEL', KEYS[3], ARGV[i])
    redis.call('HDEL', KEYS[4], ARGV[i])
    redis.call('INCR', KEYS[2])
    redis.call('SADD', KEYS[6], ARGV[i + 1])
    released = released + 1
  end
  i = i + 2
end
if ARGV[2] ~= '' then
  redis.call('SET', KEYS[2], ARGV[2])
  redis.call('HSET', KEYS[1], 'total', ARGV[3])
end
local now = tonumber(redis.call('GET', KEYS[2]) or '0')
if restored > 0 or released > 0 or now ~= was then
  redis.call('INCR', KEYS[5])
end
return {1, restored, refused, released, was, now}
