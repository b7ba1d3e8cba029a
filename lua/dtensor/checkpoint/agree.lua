-- Success agreed by every rank: one collective, so that a failure on any rank raises the same
-- error on all of them (never a rank left waiting in the next collective, never a state that
-- some ranks committed and others did not).
local core = require "dtensor.core"
local D = core.distributed

-- agree(op, ok, err): returns when every rank's ok is true; else raises err on a failing rank
-- (the same message on every rank when all fail alike) and, on the others, the message of
-- the lowest failing rank
return function(op, ok, err)
  if core.world_size() == 1 then
    if not ok then error(err, 0) end
    return
  end
  local msg = ok and "" or tostring(err)
  if not ok and msg == "" then msg = op .. ": failed (no message)" end
  local bytes = {msg:byte(1, math.min(#msg, 4000))}
  local all, sizes = D.all_gather_v(core.tensor(bytes, {dtype = "uint8"}))
  if not ok then error(msg, 0) end
  local at = 0
  for r = 1, #sizes do
    if sizes[r] > 0 then
      local codes = all:narrow(1, at + 1, sizes[r]):tolist()
      if r - 1 == core.rank() then error(msg, 0) end
      error(string.format("%s: rank %d failed: %s", op, r - 1, string.char(table.unpack(codes))), 0)
    end
    at = at + sizes[r]
  end
end
