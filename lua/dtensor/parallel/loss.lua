-- dt.parallel.loss_parallel: PyTorch's loss_parallel context manager (doc/parallel.md).
-- F.cross_entropy on DTensor logits sharded on the class dim never gathers them anyway
-- (lua/dtensor/dtensor_nn.lua); inside loss_parallel it also takes a plain target (this
-- rank's part, replicated where the classes are sharded) and refuses logits whose class dim
-- is not sharded, as PyTorch does.  Two forms, as dt.no_grad:
--   loss_parallel(fn, ...)                  fn(...)'s results, the mode restored after (also on error)
--   local _ <close> = loss_parallel()       on until the end of the scope
-- Backward needs no mode (unlike PyTorch's): the graph holds what to do.
local switch = require("dtensor.dtensor_nn").loss_parallel
local M = {}

local function guard()
  switch(1)
  local open = true
  return setmetatable({}, {__close = function()
    if open then open = false; switch(-1) end
  end, __name = "loss_parallel guard"})
end

function M.loss_parallel(fn, ...)
  if fn == nil then return guard() end
  if type(fn) ~= "function" then error("loss_parallel: expected a function or nothing, got " .. type(fn), 2) end
  switch(1)
  local res = table.pack(pcall(fn, ...))
  switch(-1)
  if not res[1] then error(res[2], 0) end
  return table.unpack(res, 2, res.n)
end

return M
