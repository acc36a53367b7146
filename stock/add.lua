-- add.lua: put units an operator added to a sale on sale in Redis.
--
-- KEYS[1] meta, KEYS[2] stock, KEYS[3] version
-- ARGV[1] units to add (> 0)
--
-- Run after the database has the units (store.AddUnits): until then Redis
-- holds fewer units than the database, the side that cannot oversell.
-- The version moves, so a reconciler that read the sale before the add
-- repairs nothing. Returns the remaining count after the add, or -1 when the
-- sale is not loaded (its next load reads the stock from the database).
if redis.call('EXISTS', KEYS[1]) == 0 then
  return -1
end
local left = redis.call('INCRBY', KEYS[2], ARGV[1])
redis.call('INCR', KEYS[3])
return left
