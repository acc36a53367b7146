-- release.lua: give a reserved unit back. The inverse of reserve.lua.
--
-- KEYS[1] meta, KEYS[2] stock, KEYS[3] buyers, KEYS[4] idem,
-- KEYS[5] version, KEYS[6] released (the set of released order ids),
-- KEYS[7] admitted (order id -> admission time, reserve.lua)
-- ARGV[1] user id, ARGV[2] order id
--
-- Released only if buyers[user] is this order, so a late or repeated
-- release can never free a unit that belongs to another order (the same
-- buyer may have bought again after this order ended). Returns 1 when a unit
-- went back to stock, 0 when there was nothing to release.
--
-- The order id joins the released set even when there was nothing to
-- release (Redis had lost the buyer's entry): the order is over either
-- way, and the set is what stops the reconciler from restoring its entry.
-- The version moves whenever the state did, so a reconciler that read the
-- sale before this release repairs nothing.
if redis.call('EXISTS', KEYS[1]) == 0 then
  return 0 -- not loaded (or retired): nothing to release, nothing to record
end
local released = 0
if redis.call('HGET', KEYS[3], ARGV[1]) == ARGV[2] then
  redis.call('HDEL', KEYS[3], ARGV[1])
  redis.call('HDEL', KEYS[4], ARGV[1])
  redis.call('INCR', KEYS[2])
  released = 1
end
redis.call('HDEL', KEYS[7], ARGV[2])
if redis.call('SADD', KEYS[6], ARGV[2]) == 1 or released == 1 then
  redis.call('INCR', KEYS[5])
end
return released
