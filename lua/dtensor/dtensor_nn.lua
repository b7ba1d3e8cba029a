-- F.embedding and F.cross_entropy on DTensors (doc/dispatch.md): embedding is one op call
-- after an agreed range check; cross_entropy is composed from dispatched ops and
-- redistributions.  Returns {functional = {...}}: init.lua installs it into
-- dt.nn.functional over the plain functions of dtensor.nn.functional, which it wraps; and
-- loss_parallel(delta), the switch of dt.parallel.loss_parallel (lua/dtensor/parallel/loss.lua).
local core = require "dtensor.core"
local plain_F = require "dtensor.nn.functional" -- the plain embedding and cross_entropy
local dispatch = require("dtensor.dispatch").module -- _decide, _replicated, _check_same_mesh
local functional = {}

-- ---- embedding on DTensors: one op through the front door (its strategies: the NN
-- family's sharding rule, src/distributed/sharding_rules/nn.c).  Here only what needs the
-- ids' values on every rank: an id outside the vocab is an error on every rank, as for
-- plain tensors, decided locally when every rank holds all the ids, else agreed by one
-- all_reduce of two integers (the smallest and the largest id). ----
-- The value of v (this rank's integers, nil off-mesh) outside 1..limit that plain tensors
-- would name: the smallest when below 1, else the largest; nil when all are in range.
-- Agreed by one all_reduce of two integers unless every rank of the world holds every
-- value (all_here), so every rank raises the same error.
local NONE = -(1 << 62)
local function out_of_range(v, limit, all_here)
  local lo, hi = NONE, NONE -- -min, max
  if v and v:numel() > 0 then lo, hi = -v:min():item(), v:max():item() end
  if not all_here then
    local t = core.tensor({lo, hi}, {dtype = "int64"})
    core.distributed.all_reduce(t, "max")
    lo, hi = t[1]:item(), t[2]:item()
  end
  return (-lo < 1 and lo ~= NONE) and -lo or (hi > limit and hi or nil)
end

-- The same check inside dt.compile, as ops of the graph, so every replay checks the ids it
-- is given: this rank's {-smallest, largest} (v: this rank's integers, nil off the mesh),
-- agreed by a Partial(max) DTensor reduced over the mesh unless every rank holds all the
-- values, then checked on that pair by ids_to_zero_based (kept by dead-code elimination),
-- which raises the same error on every rank of the mesh.  numel: the global count.
local function check_in_graph(v, mesh, limit, all_here, numel, kind)
  if numel == 0 or v == nil then return end -- ranks off the mesh take no part
  local pair
  if v and v:numel() > 0 then
    v = v:to("int64")
    pair = core.stack({-v:min(), v:max()})
  else
    pair = core.full({2}, NONE, {dtype = "int64"})
  end
  if not all_here then
    local partial = {}
    for m = 1, mesh.ndim do partial[m] = core.Partial("max") end
    pair = core.from_local(pair, mesh, partial, {shape = {2}}):full_tensor()
  end
  core._ids_to_zero_based(core.cat({-pair:narrow(1, 1, 1), pair:narrow(1, 2, 1)}), limit, kind)
end

local function integer_dtype(dtype) return dtype == "int64" or dtype == "int32" or dtype == "uint8" end

-- The mesh of two operands, at least one a DTensor, and the two as DTensors on it (a plain
-- one taken as replicated where the dispatcher would take it, else its error); errors at
-- the caller's caller.
local function common_mesh(name, a, b)
  local mesh = (core.is_dtensor(a) and a or b).device_mesh
  if not core.is_dtensor(a) then a = dispatch._replicated(name, "argument 1", a, mesh) end
  if not core.is_dtensor(b) then b = dispatch._replicated(name, "argument 2", b, mesh) end
  dispatch._check_same_mesh(name, a.device_mesh, b.device_mesh, 3)
  return a.device_mesh, a, b
end

local plain_embedding = plain_F.embedding
function functional.embedding(ids, weight)
  if not (core.is_dtensor(ids) or core.is_dtensor(weight)) then return (plain_embedding(ids, weight)) end
  local mesh
  mesh, ids, weight = common_mesh("embedding", ids, weight)
  local wsize = weight:size()
  if #wsize ~= 2 then error("embedding: weight must be 2-d [vocab, dim], got " .. #wsize .. "-d", 2) end
  if not integer_dtype(ids.dtype) then
    error("embedding: ids must be an integer tensor, got " .. ids.dtype, 2)
  end
  -- a Partial of the ids is reduced first: the check reads their values (and the rule
  -- would reduce it anyway, a lookup not being linear in its ids)
  local ip, partial, all_here = {}, false, mesh:size() == core.world_size()
  for m = 1, mesh.ndim do
    local p = ids.placements[m]
    partial = partial or p:is_partial()
    ip[m] = p:is_partial() and core.Replicate() or p
    all_here = all_here and not ip[m]:is_shard()
  end
  if partial then ids = ids:redistribute(ip) end
  if core.is_compiling() then
    check_in_graph(mesh:get_coordinate() and ids:to_local() or nil, mesh, wsize[1], all_here, ids:numel(), "embedding")
    if ids.dtype == "uint8" then ids = ids:to("int64") end
    return (core._embedding(ids, weight))
  end
  local bad = out_of_range(mesh:get_coordinate() and ids:to_local() or nil, wsize[1], all_here)
  if bad then
    error(string.format("embedding: id %d out of range for vocab size %d (ids are 1-based: 1..%d)", bad, wsize[1], wsize[1]), 2)
  end
  if ids.dtype == "uint8" then ids = ids:to("int64") end -- the op takes int64/int32 ids
  return (core._embedding(ids, weight))
end

-- ---- cross_entropy on DTensor logits: batch/spatial shardings pass through (the target
-- follows); a class-sharded dim (loss parallel) is never gathered: the max, the sum of
-- exponentials and the target's logit are reduced across the class shards (Partial(max),
-- Partial(sum)), each rank reading only its own classes. ----
local plain_ce = plain_F.cross_entropy
local function rebuild(x, mesh, placements, shape)
  return core.from_local(x, mesh, placements, {shape = shape})
end
-- plain cross_entropy's argument checks, on the options and the global metadata: every
-- rank raises them before any collective.  Returns ignore_index and the reduction.
local ce_options = {ignore_index = true, reduction = true}
local function ce_args(logits, target, opts)
  if opts ~= nil and (type(opts) ~= "table" or core.is_tensor(opts)) then
    error("cross_entropy: options must be a table, got " .. type(opts), 3)
  end
  opts = opts or {}
  for k in pairs(opts) do
    if not ce_options[k] then error("cross_entropy: unknown option '" .. tostring(k) .. "'", 3) end
  end
  local ignore, reduction = opts.ignore_index, opts.reduction or "mean"
  if ignore == nil then ignore = -100 end
  if math.type(ignore) ~= "integer" then error("cross_entropy: ignore_index must be an integer, got " .. tostring(ignore), 3) end
  if reduction ~= "none" and reduction ~= "mean" and reduction ~= "sum" then
    error('cross_entropy: reduction must be "none", "mean" or "sum", got "' .. tostring(reduction) .. '"', 3)
  end
  if not logits.dtype:match("float") then error("cross_entropy: logits must be a floating-point tensor, got " .. logits.dtype, 3) end
  if not integer_dtype(target.dtype) then error("cross_entropy: targets must be an integer tensor, got " .. target.dtype, 3) end
  local xs, ts = logits:size(), target:size()
  if #xs == 0 then error("cross_entropy: logits must have at least 1 dim, got a 0-d tensor", 3) end
  local ok = #ts == (#xs == 1 and 0 or #xs - 1)
  if ok and #xs >= 2 then
    ok = ts[1] == xs[1]
    for d = 3, #xs do ok = ok and ts[d - 1] == xs[d] end
  end
  if not ok then
    error("cross_entropy: target shape {" .. table.concat(ts, ",") .. "} does not match logits {" .. table.concat(xs, ",") ..
          "} (expected logits [n, classes, ...] and target [n, ...])", 3)
  end
  return ignore, reduction
end

-- plain cross_entropy's error for a target outside 1..classes (ignore_index excepted), on
-- every rank; t2: the target as redistributed, all_here: every rank holds all of it
local function check_targets(t2, mesh, classes, ignore, all_here)
  local tl
  if mesh:get_coordinate() then
    tl = t2:to_local()
    tl = core.where(tl:eq(ignore), 1, tl)
  end
  if core.is_compiling() then return check_in_graph(tl, mesh, classes, all_here, t2:numel(), "cross_entropy") end
  local bad = out_of_range(tl, classes, all_here)
  if bad then
    error(string.format("cross_entropy: target %d out of range for %d classes (targets are 1-based: 1..%d)", bad,
                        classes, classes), 3)
  end
end

-- ---- loss parallel (dt.parallel.loss_parallel, lua/dtensor/parallel/loss.lua): inside it,
-- DTensor logits must be sharded on the class dim, and a plain target is this rank's part of
-- the target, laid out as the logits without their class dim (replicated where the logits
-- shard the classes), as PyTorch's loss_parallel takes it. ----
local loss_parallel_depth = 0 -- per rank (each rank has its own Lua state)
local function loss_parallel(delta)
  loss_parallel_depth = loss_parallel_depth + delta
  return loss_parallel_depth
end

local function loss_parallel_args(logits, target)
  local shape, mesh = logits:size(), logits.device_mesh
  local cdim = #shape == 1 and 1 or 2
  local tp, class = {}, false
  for m = 1, mesh.ndim do
    local p = logits.placements[m]
    if p:is_shard() and p.dim == cdim then
      tp[m], class = core.Replicate(), true
    elseif p:is_shard() then
      tp[m] = core.Shard(p.dim < cdim and p.dim or p.dim - 1)
    else
      tp[m] = core.Replicate()
    end
  end
  if not class then
    local ps = {}
    for m, p in ipairs(logits.placements) do ps[m] = tostring(p) end
    error("cross_entropy: loss_parallel expects the logits sharded on the class dim (dim " .. cdim ..
          "), got placements (" .. table.concat(ps, ", ") .. ")", 3)
  end
  if core.is_tensor(target) and not core.is_dtensor(target) then
    local ts = {}
    for d = 1, #shape do if d ~= cdim then ts[#ts + 1] = shape[d] end end
    target = core.from_local(target, mesh, tp, {shape = ts})
  end
  return logits, target
end

function functional.cross_entropy(logits, target, opts)
  if loss_parallel_depth > 0 and core.is_dtensor(logits) then logits, target = loss_parallel_args(logits, target) end
  if not (core.is_dtensor(logits) or core.is_dtensor(target)) then return (plain_ce(logits, target, opts)) end
  local mesh
  mesh, logits, target = common_mesh("cross_entropy", logits, target)
  local ignore, reduction = ce_args(logits, target, opts)
  local shape = logits:size()
  local cdim = #shape == 1 and 1 or 2
  -- the placements: logits/target targets, the per-sample loss's, and those of the
  -- class-reduced partial results (loss parallel)
  local dec = dispatch._decide("cross_entropy", "", {logits, target}, function()
    local lp, tp, batch, class = {}, {}, {}, false
    for m = 1, mesh.ndim do
      local p = logits.placements[m]
      if p:is_shard() and p.dim == cdim then
        lp[m], tp[m], batch[m], class = p, core.Replicate(), core.Replicate(), true
      elseif p:is_shard() then
        lp[m], tp[m], batch[m] = p, core.Shard(p.dim < cdim and p.dim or p.dim - 1), core.Shard(p.dim < cdim and p.dim or p.dim - 1)
      else
        lp[m], tp[m], batch[m] = core.Replicate(), core.Replicate(), core.Replicate()
      end
    end
    local all_here = mesh:size() == core.world_size()
    for m = 1, mesh.ndim do all_here = all_here and not tp[m]:is_shard() end
    if not class then return {inputs = {lp, tp}, outputs = {batch}, lp = lp, tp = tp, batch = batch, all_here = all_here} end
    local maxp, sump = {}, {}
    for m = 1, mesh.ndim do
      local classdim = lp[m]:is_shard() and lp[m].dim == cdim
      maxp[m] = classdim and core.Partial("max") or batch[m]
      sump[m] = classdim and core.Partial("sum") or batch[m]
      if batch[m]:is_shard() and batch[m].dim >= cdim then -- kshape keeps the class dim
        maxp[m] = classdim and maxp[m] or core.Shard(batch[m].dim + 1)
        sump[m] = classdim and sump[m] or core.Shard(batch[m].dim + 1)
      end
    end
    local kplace = {}
    for m = 1, mesh.ndim do kplace[m] = (maxp[m]:is_partial()) and core.Replicate() or maxp[m] end
    return {inputs = {lp, tp}, outputs = {batch}, lp = lp, tp = tp, batch = batch, class = true, maxp = maxp,
            sump = sump, kplace = kplace, all_here = all_here}
  end)
  local lp, tp, batch, class = dec.lp, dec.tp, dec.batch, dec.class
  local l2, t2 = logits:redistribute(lp), target:redistribute(tp)
  check_targets(t2, mesh, shape[cdim], ignore, dec.all_here)
  if not class then -- plain per-element losses on the shards, then the reduction as DTensor ops
    local tshape = target:size()
    local per
    if mesh:get_coordinate() then
      per = plain_ce(l2:to_local(), t2:to_local(), {ignore_index = ignore, reduction = "none"})
    else -- off the mesh: empty, and requiring grad where the logits do, as on the mesh's ranks
      per = l2:to_local() * 0
    end
    local loss = rebuild(per, mesh, batch, tshape)
    if reduction == "none" then return loss end
    if reduction == "sum" then return loss:sum() end
    return loss:sum() / t2:ne(ignore):sum()
  end
  local kshape = {}
  for d = 1, #shape do kshape[d] = d == cdim and 1 or shape[d] end
  local maxp, sump, kplace = dec.maxp, dec.sump, dec.kplace
  local on = mesh:get_coordinate() ~= nil
  local lx, tx = l2:to_local(), t2:to_local()
  local start, len = 0, on and lx:size(cdim) or 0
  if on then
    for _, b in ipairs(core._dtensor_shards(l2)) do
      if b.rank == core.rank() then start = b.offset[cdim] end
    end
  end
  -- a local [.., 1, ..] tensor of fill where this rank has no class (an empty shard), empty off
  -- the mesh: derived from lx, so that it requires grad where lx does and every rank records
  -- the same conversions (their backward's collectives must match)
  local function local_keep(fill)
    if not on then return lx * 0 end
    return lx:sum(cdim, true) + fill
  end
  local mx = (on and len > 0) and lx:amax(cdim, true) or local_keep(-math.huge)
  -- the class max feeds two terms: the per-sample loss, which the ranks of a class dim compute
  -- alike (its gradient is whole there), and each rank's own exponentials (its gradient there
  -- is the rank's contribution): one to_local per use, so that each backward takes the kind of
  -- its own use (doc/autograd-dtensor.md)
  local gmaxd = rebuild(mx, mesh, maxp, kshape):redistribute(kplace)
  local gmax, gmax_own = gmaxd:to_local(), gmaxd:to_local()
  -- every rank of the mesh uses gmax_own, an empty class shard too (its sum is 0): the
  -- backward's collectives follow the graph, which must be the same on the mesh's ranks
  local se = on and (lx - gmax_own):exp():sum(cdim, true) or local_keep(0)
  local gse = rebuild(se, mesh, sump, kshape):redistribute(kplace):to_local()
  local picked
  if on and len > 0 then
    local tk = (#shape == 1) and tx:reshape(1) or tx:unsqueeze(cdim)
    local classes = core.arange(start + 1, start + len + 1):to(tx.dtype)
    if #shape > 1 then
      local cs = {}
      for d = 1, #shape do cs[d] = d == cdim and len or 1 end
      classes = classes:reshape(cs)
    end
    picked = (lx * classes:eq(tk):to(lx.dtype)):sum(cdim, true)
  else
    picked = local_keep(0)
  end
  local gp = rebuild(picked, mesh, sump, kshape):redistribute(kplace):to_local()
  local per = lx * 0 -- off the mesh: empty (requiring grad as on the mesh)
  if on then
    per = gse:log() + gmax - gp
    per = (#shape == 1) and per:reshape({}) or per:squeeze(cdim)
    per = core.where(tx:eq(ignore), 0, per)
  end
  local loss = rebuild(per, mesh, batch, target:size())
  if reduction == "none" then return loss end
  if reduction == "sum" then return loss:sum() end
  return loss:sum() / t2:ne(ignore):sum()
end

return {functional = functional, loss_parallel = loss_parallel}
