-- release.lua: give a reserved unit back. The inverse of reserve.lua.
--
-- KEYS[1] stock, KEYS[2] buyers, KEYS[3] idem
-- ARGV[1] user id, ARGV[2] order id
--
-- Released only if buyers[user] is this order, so a late or repeated
-- release can never free a unit that belongs to another order (the same
-- buyer may have bought again after this order ended). Returns 1 when a unit
-- went back to stock, 0 when there was nothing to release.
if redis.call('HGET', KEYS[2], ARGV[1]) == ARGV[2] then
  redis.call('HDEL', KEYS[2], ARGV[1])
  redis.call('HDEL', KEYS[3], ARGV[1])
  redis.call('INCR', KEYS[1])
  return 1
end
return 0
