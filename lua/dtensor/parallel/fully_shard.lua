-- dt.parallel.fully_shard(module, mesh, {reshard_after_forward = true, mesh_dim =,
-- mp_policy = {param_dtype =, reduce_dtype =}}): fully sharded data parallelism (PyTorch's
-- FSDP2 / ZeRO-3; doc/parallel.md).  Applied to each block and then to the root.
--
--  * Each parameter the module manages (its own and its descendants', less those of
--    submodules sharded already) becomes a DTensor leaf sharded on dim 1 over the dp dim
--    (torch.chunk sizes: uneven is fine).  On a mesh with other dims (tensor parallel), the
--    sharded parameter lives on the mesh with its dims reordered, dp last: a tensor dim that TP
--    shards too is then chunked TP first, so this rank's dp shard is a chunk of its TP shard
--    (what PyTorch's _StridedShard says), and gathering over dp rebuilds the TP shard.
--  * Before the module's forward its parameters are gathered by one all_gather over the dp
--    group (the shards packed in one buffer, padded to equal sizes) into one persistent
--    buffer; the module's parameter slots hold views of it during forward (as DTensors with the
--    original placements when the parameter was one, else plain tensors).  An
--    autograd.Function (fsdp_unshard) makes those views, so its backward receives their
--    gradients as soon as the block's backward made them: packed in one buffer, reduced by one
--    reduce_scatter over dp (sum for DTensor gradients that arrive Partial over dp; the average
--    for plain ones, as DDP), cast back to the parameters' dtype.  A DTensor gradient the
--    engine reduced already (it keeps Partial only into a keeps_partial node, so one passing a
--    view such as Linear's weight:t() comes Replicate) is only chunked.
--  * After forward the buffer's bytes are freed (t:_release_storage(): the autograd nodes keep
--    their views, whose storage comes back in place with t:_refill_, leaving the version
--    counter alone) unless the module is outermost: a forward not inside another sharded
--    module's (the root's, or a checkpoint's recomputation in backward) keeps them for the
--    backward that follows at once.  A pass-through Function on the outputs
--    (fsdp_pre_backward) gathers them again before the block's backward; the unshard node's
--    backward frees them after the reduce_scatter.
--  * Prefetch (as FSDP2's implicit prefetch): in forward, a block issues the next block's
--    all_gather async before its own compute; in backward, a block's pre-backward gather issues
--    the previous block's.  The same collectives, counted once, the same bytes (see below).
local core = require "dtensor.core"
local L = require "dtensor.parallel.layouts"
local placements_text = require "dtensor.placements_text"
local mesh_arg = require("dtensor.parallel.distribute_module").mesh_arg
local dp_dim = require("dtensor.parallel.replicate").dp_dim
local mp_option = require("dtensor.parallel.replicate").mp_option
local Function = require("dtensor.autograd").module.autograd.Function
local D = core.distributed
local M = {}

local WHO = "fully_shard"
local OPTIONS = {reshard_after_forward = true, mesh_dim = true, mp_policy = true}

local active = 0 -- sharded modules whose forward is running on this rank (this Lua state)

-- ---- options and meshes ----

-- the value at coordinate c (0-based list) of a nested layout
local function at(layout, c)
  local v = layout
  for _, i in ipairs(c) do v = v[i + 1] end
  return v
end

-- mesh with its dims in `order` (a list of old dims): same ranks, new coordinates
local function permuted(mesh, order)
  local shape, layout, names = mesh:shape(), mesh:layout(), mesh:dim_names()
  local function build(k, c)
    if k > #order then
      local old = {}
      for j, d in ipairs(order) do old[d] = c[j] end
      return at(layout, old)
    end
    local out = {}
    for i = 0, shape[order[k]] - 1 do
      c[k] = i
      out[i + 1] = build(k + 1, c)
    end
    c[k] = nil
    return out
  end
  local new_names
  if names then
    new_names = {}
    for j, d in ipairs(order) do new_names[j] = names[d] end
  end
  return core.DeviceMesh(mesh.device_type, build(1, {}), new_names)
end

-- the mesh the sharded parameters live on: mesh's other dims, then dp
local function shard_mesh(mesh, dim)
  if mesh.ndim == 1 or dim == mesh.ndim then return mesh end
  local order = {}
  for d = 1, mesh.ndim do if d ~= dim then order[#order + 1] = d end end
  order[#order + 1] = dim
  return permuted(mesh, order)
end

-- ---- the parameters a module manages ----

local function managed_by_others(module)
  local owned = {}
  for _, entry in ipairs(module:named_modules()) do
    local st = entry[2] ~= module and rawget(entry[2], "_fsdp")
    if st then for _, p in ipairs(st.params) do owned[p.sharded] = true end end
  end
  return owned
end

-- {sub, pname, name, param} for each parameter module manages, in named_parameters order
local function params_to_shard(module)
  local owned, seen, list = managed_by_others(module), {}, {}
  for _, entry in ipairs(module:named_modules()) do
    local prefix, sub = entry[1], entry[2]
    for _, pname in ipairs(rawget(sub, "_param_names")) do
      local p = rawget(sub, "_parameters")[pname]
      if not owned[p] and not seen[p] then
        seen[p] = true
        list[#list + 1] = {sub = sub, pname = pname, name = prefix == "" and pname or prefix .. "." .. pname, param = p}
      end
    end
  end
  return list
end


-- e: a managed parameter; fills its layout in the packed buffers and makes its sharded leaf
local function shard_param(e, st)
  local p, n, r = e.param, st.n, st.coord
  local lt
  if core.is_dtensor(p) then
    if p.device_mesh ~= st.mesh then
      error(WHO .. ": parameter '" .. e.name .. "' is a DTensor on " .. tostring(p.device_mesh) ..
            ", not on the mesh given (" .. tostring(st.mesh) .. ")", 4)
    end
    if not p.placements[st.dim]:is_replicate() then
      error(WHO .. ": parameter '" .. e.name .. "' has placements " .. placements_text(p.placements) ..
            ": it must be Replicate on the data-parallel dim " .. st.dim, 4)
    end
    e.placements = p.placements
    lt = p:to_local():detach()
  else
    lt = p:detach()
  end
  if lt:dim() == 0 then error(WHO .. ": parameter '" .. e.name .. "' is 0-d: Shard(1) needs a dim", 4) end
  if st.dtype and lt.dtype ~= st.dtype then
    error(WHO .. ": the parameters of one call must share a dtype (they are gathered in one buffer): '" ..
          e.name .. "' is " .. lt.dtype .. ", the others " .. st.dtype, 4)
  end
  st.dtype = lt.dtype
  e.shape, e.local_shape = p:size(), lt:size()
  e.rows = e.local_shape[1]
  e.row = e.rows == 0 and 0 or lt:numel() // e.rows
  e.c = (e.rows + n - 1) // n -- torch.chunk's chunk size
  local first = math.min(r * e.c, e.rows)
  e.my_rows = math.min(e.c, e.rows - first)
  local shard = core.no_grad(function() return lt:narrow(1, first + 1, e.my_rows):clone() end)
  local placements = {}
  for d = 1, st.mesh.ndim do
    if d ~= st.dim then placements[#placements + 1] = e.placements and e.placements[d] or core.Replicate() end
  end
  placements[#placements + 1] = core.Shard(1)
  e.shard_placements = placements
  e.sharded = core.from_local(shard, st.smesh, placements, {shape = e.shape}):requires_grad_(p.requires_grad)
  e.sub[e.pname] = e.sharded
end

-- ---- gathering and freeing ----

local function local_of(t) return core.is_dtensor(t) and t:to_local() or t end

-- ---- prefetch (FSDP2's implicit prefetch) ----
-- A block's all_gather is issued async while the block before it computes: in forward, the
-- block that followed it in the last forward of the same outermost module; in backward, the
-- block that preceded it in this forward.  gather() consumes it; nothing else changes (the
-- same all_gather, counted once, the same bytes).  A prefetch that no gather consumed (the
-- control flow changed) is completed and dropped when the forward or backward ends, so that
-- an optimizer step in between never leaves stale values.
local prefetching = {} -- states with a prefetched gather, in issue order

-- the shards packed (padded to equal sizes) and their all_gather issued: {work, out}
local function gather_start(st)
  return core.no_grad(function()
    local parts = {}
    for _, e in ipairs(st.params) do
      local l = local_of(e.sharded):reshape(-1)
      parts[#parts + 1] = l
      local pad = (e.c - e.my_rows) * e.row
      if pad > 0 then parts[#parts + 1] = core.zeros({pad}, {dtype = l.dtype}) end
    end
    local flat = #parts == 1 and parts[1] or core.cat(parts)
    if flat.dtype ~= st.param_dtype then flat = flat:to(st.param_dtype) end
    if st.n == 1 then return {out = flat} end
    return {work = D.all_gather(flat, {group = st.group, async_op = true})}
  end)
end

local function prefetch(st)
  if st == nil or st.prefetched or #st.params == 0 then return end
  st.prefetched = gather_start(st)
  prefetching[#prefetching + 1] = st
end

-- completes every prefetch not consumed (their all_gathers were issued on every rank)
local function drop_prefetches()
  for _, st in ipairs(prefetching) do
    local p = st.prefetched
    st.prefetched = nil
    if p and p.work then p.work:wait() end
  end
  prefetching = {}
end

-- the all_gather of the shards (the prefetched one, else one issued now) into st.full (its
-- storage brought back when released)
local function gather(st)
  local p = st.prefetched or gather_start(st)
  st.prefetched = nil
  core.no_grad(function()
    local all = (p.work and p.work:wait() or p.out):view(st.n, st.shard_numel)
    for _, e in ipairs(st.params) do
      e.region:_refill_(all:narrow(2, e.off + 1, e.c * e.row))
    end
  end)
end

local function free(st) st.full:_release_storage() end

-- the compute parameters: views of st.full, as DTensors with the original placements
local function views(st)
  local out = {}
  for i, e in ipairs(st.params) do
    local v = st.full:narrow(1, e.uoff + 1, e.rows * e.row):view(e.local_shape)
    out[i] = e.placements and core.from_local(v, st.mesh, e.placements, {shape = e.shape}) or v
  end
  return out
end

-- a gradient's local part on this rank and whether it is summed over dp (Partial there);
-- Partial on the other mesh dims is reduced first (sum over that dim's group)
local function grad_part(st, e, g)
  if not e.placements then return g, true end
  local gl = g:to_local()
  local partial_dp = false
  for d, pl in ipairs(g.placements) do
    if pl:is_partial() then
      if pl.reduce_op ~= "sum" then
        error(WHO .. ": the gradient of '" .. e.name .. "' is " .. tostring(pl) .. " on mesh dim " .. d ..
              "; only Partial(sum) is reduced", 0)
      end
      if d == st.dim then partial_dp = true else gl = D.all_reduce(gl:clone(), "sum", st.mesh:get_group(d)) end
    elseif not L.same(pl, e.placements[d], #e.shape) then
      error(WHO .. ": the gradient of '" .. e.name .. "' has placements " .. placements_text(g.placements) ..
            ", expected those of the parameter " .. placements_text(e.placements), 0)
    end
  end
  return gl, partial_dp
end

-- the sharded parameters' gradients from the compute parameters': one reduce_scatter over
-- dp per kind (sum for Partial DTensor gradients, avg for plain ones)
local function reduce_grads(st, grads)
  local kinds, local_parts = {}, {}
  for i, e in ipairs(st.params) do
    local g = grads[i]
    if g ~= nil then
      local gl, reduce = grad_part(st, e, g)
      local op = not reduce and "none" or (e.placements and "sum" or "avg")
      local_parts[i] = {gl = gl, op = op}
      kinds[op] = true
    end
  end
  local shards = {}
  for op in pairs(kinds) do
    if op == "none" then -- whole on every dp rank: this rank's chunk
      for i, e in ipairs(st.params) do
        local lp = local_parts[i]
        if lp and lp.op == op then shards[i] = lp.gl:narrow(1, math.min(st.coord * e.c, e.rows) + 1, e.my_rows) end
      end
    else
      local buf = core.zeros({st.n, st.shard_numel}, {dtype = st.reduce_dtype})
      for i, e in ipairs(st.params) do
        local lp = local_parts[i]
        if lp and lp.op == op and e.row > 0 then
          local gl = lp.gl:reshape(e.rows, e.row)
          local pad = st.n * e.c - e.rows
          if pad > 0 then gl = core.cat({gl, core.zeros({pad, e.row}, {dtype = gl.dtype})}) end
          buf:narrow(2, e.off + 1, e.c * e.row):copy_(gl:reshape(st.n, e.c * e.row))
        end
      end
      local mine = st.n == 1 and buf:reshape(-1) or D.reduce_scatter(buf:reshape(-1), op, st.group)
      for i, e in ipairs(st.params) do
        local lp = local_parts[i]
        if lp and lp.op == op then shards[i] = mine:narrow(1, e.off + 1, e.my_rows * e.row) end
      end
    end
  end
  local out = {n = #st.params}
  for i, e in ipairs(st.params) do
    local s = shards[i]
    if s ~= nil then
      local shape = {e.my_rows, table.unpack(e.local_shape, 2)}
      s = s:reshape(shape):to(st.dtype)
      out[i] = core.from_local(s, st.smesh, e.shard_placements, {shape = e.shape})
    end
  end
  return out
end

-- the sharded parameters -> the gathered ones (recorded, so that backward reduce-scatters)
local Unshard = Function {
  name = "fsdp_unshard",
  keeps_partial = true,
  forward = function(ctx, st)
    ctx.st = st
    gather(st)
    return table.unpack(views(st))
  end,
  backward = function(ctx, ...)
    local st = ctx.st
    local grads = reduce_grads(st, table.pack(...))
    free(st)
    return nil, table.unpack(grads, 1, grads.n)
  end,
}

-- the block's outputs, passed through: its backward gathers the parameters again
local PreBackward = Function {
  name = "fsdp_pre_backward",
  keeps_partial = true,
  forward = function(ctx, st, ...)
    ctx.st, ctx.before = st, st.pass_before
    return ...
  end,
  backward = function(ctx, ...)
    if ctx.st.full:_storage_released() then
      gather(ctx.st)
      local before = ctx.before -- the block whose backward comes next: its gather overlaps this one's
      if before and before.full:_storage_released() then
        if #prefetching == 0 then core.autograd.queue_callback(drop_prefetches) end
        prefetch(before)
      end
    end
    return nil, ...
  end,
}

local function set_params(st, values)
  for i, e in ipairs(st.params) do rawget(e.sub, "_parameters")[e.pname] = values[i] end
end

-- the forward of the outermost sharded module running now: the order its blocks ran in
local pass = nil

local function pre_forward(st)
  st.outermost = active == 0
  active = active + 1
  if st.outermost then pass = {root = st} end
  st.pass_before = pass.last
  if pass.last then pass.last.next_in[pass.root] = st end
  pass.last = st
  local recording = core.is_grad_enabled() and st.any_grad
  st.recording = recording
  local compute
  if recording then
    local sharded = {}
    for i, e in ipairs(st.params) do sharded[i] = e.sharded end
    compute = table.pack(Unshard(st, table.unpack(sharded)))
  else
    gather(st)
    compute = views(st)
  end
  set_params(st, compute)
  prefetch(st.next_in[pass.root]) -- the next block's gather overlaps this block's compute
end

local function wrap_outputs(st, output)
  if core.is_tensor(output) then
    return output.requires_grad and PreBackward(st, output) or output
  end
  if type(output) ~= "table" or getmetatable(output) ~= nil then return output end
  local idx, ts = {}, {}
  for i = 1, #output do
    if core.is_tensor(output[i]) and output[i].requires_grad then idx[#idx + 1], ts[#ts + 1] = i, output[i] end
  end
  if #ts == 0 then return output end
  local wrapped = table.pack(PreBackward(st, table.unpack(ts)))
  local out = {}
  for i = 1, #output do out[i] = output[i] end
  for k, i in ipairs(idx) do out[i] = wrapped[k] end
  return out
end

local function post_forward(st, output)
  active = math.max(active - 1, 0)
  if st.outermost and pass then -- the end of the pass: its last block has no next one
    if pass.last then pass.last.next_in[pass.root] = nil end
    drop_prefetches()
  end
  local sharded = {}
  for i, e in ipairs(st.params) do sharded[i] = e.sharded end
  set_params(st, sharded)
  if not st.recording then
    free(st)
    return nil
  end
  if st.reshard and not st.outermost then
    free(st)
    return wrap_outputs(st, output)
  end
  return nil
end

function M.fully_shard(module, mesh, opts)
  if not L.is_module(module) then
    error(WHO .. ": expected a dt.nn.Module, got " .. (core.is_tensor(module) and "a tensor" or type(module)), 2)
  end
  mesh = mesh_arg(mesh, WHO, 2)
  opts = L.options(opts, OPTIONS, WHO, 2)
  if rawget(module, "_fsdp") then error(WHO .. ": the module (" .. module.__name .. ") is sharded already", 2) end
  local dim = dp_dim(mesh, opts.mesh_dim, WHO)
  local st = {mesh = mesh, dim = dim, reshard = L.boolean(opts.reshard_after_forward, true, WHO,
              "reshard_after_forward", 2), params = {}, next_in = setmetatable({}, {__mode = "k"})}
  local mp = mp_option(opts.mp_policy, WHO)
  local coord = mesh:get_coordinate()
  if not coord then return module end -- off the mesh: nothing to shard
  st.smesh = shard_mesh(mesh, dim)
  st.group = mesh:get_group(dim)
  st.n, st.coord = st.group:size(), coord[dim]
  local list = params_to_shard(module)
  -- plain parameters start equal on the dp group (as replicate and DDP)
  core.no_grad(function()
    for _, e in ipairs(list) do
      if not core.is_dtensor(e.param) then D.broadcast(e.param, st.group:ranks()[1], st.group) end
    end
  end)
  local off, uoff = 0, 0
  for _, e in ipairs(list) do
    shard_param(e, st)
    e.off, e.uoff = off, uoff
    off, uoff = off + e.c * e.row, uoff + st.n * e.c * e.row
    st.params[#st.params + 1] = e
    st.any_grad = st.any_grad or e.sharded.requires_grad
  end
  if #st.params == 0 then
    rawset(module, "_fsdp", st)
    return module
  end
  st.shard_numel = off
  st.param_dtype = mp.param_dtype or st.dtype
  st.reduce_dtype = mp.reduce_dtype or st.param_dtype
  st.full = core.zeros({uoff}, {dtype = st.param_dtype})
  for _, e in ipairs(st.params) do -- made while the storage holds its bytes: views of it later need none
    e.region = st.full:narrow(1, e.uoff + 1, st.n * e.c * e.row):view(st.n, e.c * e.row)
  end
  free(st)
  module:register_forward_pre_hook(function() pre_forward(st) end)
  module:register_forward_hook(function(_, _, output) return post_forward(st, output) end)
  rawset(module, "_fsdp", st)
  return module
end

-- this rank's bytes of the module's sharded parameters (the ones fully_shard manages)
function M.fully_shard_bytes(module)
  local st = type(module) == "table" and rawget(module, "_fsdp")
  if not st then error("fully_shard_bytes: the module was not given to dt.parallel.fully_shard", 2) end
  local bytes = 0
  for _, e in ipairs(st.params) do
    local l = local_of(e.sharded)
    bytes = bytes + l:numel() * l:element_size()
  end
  return bytes
end

return M
