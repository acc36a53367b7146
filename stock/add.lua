-- add.lua: put units an operator added to a sale on sale in Redis.
--
-- KEYS[1] meta, KEYS[2] stock, KEYS[3] version
-- ARGV[1] units to add (> 0), ARGV[2] the sale's total stock in the
-- database once they were added
--
-- Run after the database has the units (store.AddUnits): until then Redis
-- holds fewer units than the database, the side that cannot oversell.
-- The version moves, so a reconciler that read the sale before the add
-- repairs nothing.
--
-- The meta's `total` is the database total Redis's count already covers:
-- a load and a count repair set it from the database, an add raises it. An
-- add whose total is covered already (the operator paused past the sale
-- lock's expiry, and a reconciler set the count from a database that had
-- the units) changes nothing, so units are never counted twice. Returns
-- the remaining count, or -1 when the sale is not loaded (its next load
-- reads the stock from the database).
if redis.call('EXISTS', KEYS[1]) == 0 then
  return -1
end
local covered = tonumber(redis.call('HGET', KEYS[1], 'total') or '-1')
if covered >= tonumber(ARGV[2]) then
  return tonumber(redis.call('GET', KEYS[2]) or '0')
end
local left = redis.call('INCRBY', KEYS[2], ARGV[1])
redis.call('HSET', KEYS[1], 'total', ARGV[2])
redis.call('INCR', KEYS[3])
return left
