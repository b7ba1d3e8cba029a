-- How dt.parallel.replicate groups gradients into buckets (PyTorch DDP's bucket assignment):
-- parameters in reverse registration order (roughly the order backward completes their
-- gradients), one open bucket per dtype, closed once it holds cap_bytes or more; a
-- parameter larger than the cap is a bucket of its own.  The sizes are of the local tensors
-- (what is all-reduced), which the ranks of a data-parallel group share.
local M = {}

-- params: list of {name =, numel =, dtype =, bytes =}; returns a list of buckets, each a
-- list of indices into params
function M.assign(params, cap_bytes)
  local buckets, open = {}, {} -- open[dtype] = {indices, bytes}
  local order = {} -- dtypes in the order their first bucket opened
  for i = #params, 1, -1 do
    local p = params[i]
    local b = open[p.dtype]
    if not b then
      b = {list = {}, bytes = 0}
      open[p.dtype] = b
      order[#order + 1] = p.dtype
    end
    b.list[#b.list + 1] = i
    b.bytes = b.bytes + p.bytes
    if b.bytes >= cap_bytes then
      buckets[#buckets + 1] = b.list
      open[p.dtype] = {list = {}, bytes = 0}
    end
  end
  for _, dtype in ipairs(order) do
    if #open[dtype].list > 0 then buckets[#buckets + 1] = open[dtype].list end
  end
  return buckets
end

return M
