-- topk over a sharded dim of a DTensor (x:topk in lua/dtensor/shape_ops.lua calls it).  Each
-- shard's own topk holds every element of the global top k that lies in it (a shard's order is the restriction of the global stable order), so:
-- local topk (indices made global), padded to the same count per rank with values that sort
-- last (-inf for largest, NaN for smallest; integer extremes) at indices past the end, an
-- all_gather of the candidates, a stable sort by global index (pads last, ties in global
-- order), and a topk of that: exactly the single-device values and indices.
local core = require "dtensor.core"
local c_topk = core.topk -- the op row (shape_ops.lua wraps the method)

local EXTREME = {int64 = {math.mininteger, math.maxinteger}, int32 = {-2 ^ 31, 2 ^ 31 - 1}, uint8 = {0, 255}}
local function pad_value(dtype, largest)
  local e = EXTREME[dtype]
  if e then return largest and e[1] or e[2] end
  return largest and -math.huge or 0 / 0
end

-- x a DTensor whose dim d (1-based, normalised) some mesh dim shards; 0 < k <= its size
return function(x, k, d, largest)
  local mesh, pl = x.device_mesh, x.placements
  local m -- the mesh dim that keeps dim sharded; Partial and other shardings of dim are undone
  local target = {}
  for i, p in ipairs(pl) do
    if p:is_partial() then target[i] = core.Replicate()
    elseif p:is_shard() and p.dim == d then
      if m then target[i] = core.Replicate() else m, target[i] = i, p end
    else target[i] = p end
  end
  local n, R = x:size(d), mesh:size(m)
  local chunk = (n + R - 1) // R
  local kk = math.min(k, chunk)
  -- the candidates (a value and an int64 index each) send more than the shard itself: the op
  -- row gathers the dim instead (one all_gather of the shard, as PyTorch)
  local esize = x:element_size()
  if kk * (esize + 8) >= chunk * esize then return c_topk(x, k, d, largest) end
  x = x:redistribute(target)
  local coord = mesh:get_coordinate()
  local offset = coord and math.min(coord[m] * chunk, n) or 0
  local loc = x:to_local()
  if not coord then -- off the mesh: nothing of its own, in the tensor's rank (autograd's link kept)
    local zero = {}
    for i = 1, x:dim() do zero[i] = 0 end
    loc = loc:reshape(zero)
  end
  local lk = math.min(kk, loc:dim() > 0 and loc:size(d) or 0)
  local lv, li = c_topk(loc, lk, d, largest)
  li = li + offset
  if lk < kk then -- pad: values that sort last, at indices past the end
    local ps = loc:size()
    ps[d] = kk - lk
    local pad = core.full(ps, pad_value(x.dtype, largest), {dtype = x.dtype})
    -- no candidate here: the pads, tied to the shard by a zero term so that its gradient (zeros)
    -- reaches the input on this rank as on the others (cat would skip an empty 1-d part)
    if lk == 0 and x.dtype:match("float") then lv = pad + loc:sum() * 0
    else lv = core.cat({lv, pad}, d) end
    li = core.cat({li, core.full(ps, n + 1, {dtype = "int64"})}, d)
  end
  local gshape = x:size()
  gshape[d] = kk * R
  local cand_pl, rep = {}, {}
  for i, p in ipairs(target) do cand_pl[i], rep[i] = p, i == m and core.Replicate() or p end
  local cv = core.from_local(lv, mesh, cand_pl, {shape = gshape}):redistribute(rep)
  local ci = core.from_local(li, mesh, cand_pl, {shape = gshape}):redistribute(rep)
  local _, by_index = ci:sort(d) -- stable: the candidates in global index order, pads last
  cv, ci = cv:gather(d, by_index), ci:gather(d, by_index)
  local tv, tp = c_topk(cv, k, d, largest)
  return tv, ci:gather(d, tp)
end
