-- started.lua: take intents whose workflow has started off their sale's
-- stream and line, in one atomic step (the relay, docs/design.md §5).
--
-- KEYS[1] intents, KEYS[2] line, KEYS[3] started
-- ARGV[1] the relay's consumer group
-- ARGV[2 ..] stream entry id, order id pairs ('' for an entry whose order
--            id could not be read)
--
-- The entries are acknowledged and deleted and their orders leave the line
-- together, so the line keeps holding exactly the orders of the stream
-- (docs/design.md §3.11). started grows by the entries actually deleted: a
-- repeated call (its first answer was lost) deletes nothing and counts
-- nothing, so the counter stays the number of departures from the line.
--
-- Once the stream is empty nobody waits, and the line is dropped with
-- anything it still holds: an order admitted by this version and started
-- by a relay of an earlier one, which did not take it off the line, would
-- otherwise count ahead of every later buyer. Returns the number of
-- entries deleted.
local entries, orders = {}, {}
for i = 2, #ARGV, 2 do
  entries[#entries + 1] = ARGV[i]
  if ARGV[i + 1] ~= '' then
    orders[#orders + 1] = ARGV[i + 1]
  end
end
if #entries == 0 then
  return 0
end
redis.call('XACK', KEYS[1], ARGV[1], unpack(entries))
local deleted = redis.call('XDEL', KEYS[1], unpack(entries))
if #orders > 0 then
  redis.call('ZREM', KEYS[2], unpack(orders))
end
if deleted > 0 then
  redis.call('INCRBY', KEYS[3], deleted)
end
if redis.call('XLEN', KEYS[1]) == 0 then
  redis.call('DEL', KEYS[2])
end
return deleted
