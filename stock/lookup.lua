-- lookup.lua: what reserve.lua would answer, without reserving. It runs
-- after admit.lua (prepended by stock.go), which answers every case but
-- one: the buyer could take a unit now, answered here as 7 ("open"). It
-- writes nothing.
return {7, ''}
