-- snapshot.lua: read a sale's admission state in one atomic step, for the
-- reconciler.
--
-- KEYS[1] meta, KEYS[2] stock, KEYS[3] buyers, KEYS[4] intents,
-- KEYS[5] version
--
-- Returns {version, warm, remaining, intents, buyers}: the version ('0' if
-- none), 1 if the sale is loaded, the remaining count ('' if none), the
-- length of the intent stream, and the buyers hash as a flat list of user
-- id, order id pairs. Repair with this version applies only if nothing
-- changed since.
return {
  redis.call('GET', KEYS[5]) or '0',
  redis.call('EXISTS', KEYS[1]),
  redis.call('GET', KEYS[2]) or '',
  redis.call('XLEN', KEYS[4]),
  redis.call('HGETALL', KEYS[3]),
}
