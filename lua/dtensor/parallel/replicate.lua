-- dt.parallel.replicate(module, mesh, {mesh_dim =, bucket_cap_mb = 25, mp_policy =
-- {param_dtype =, reduce_dtype =}}): data parallelism over one mesh dim (PyTorch's replicate /
-- DistributedDataParallel; doc/parallel.md).
--
-- Each rank of the data-parallel (dp) dim runs the module on its own batch, with the same
-- parameters, and its own loss; replicate() makes the gradients the average over the dp dim:
--  * The parameters keep what they are: plain tensors stay plain, DTensors from tensor
--    parallelism stay on their (tp) mesh.  Nothing in the graph involves the dp dim, so the
--    engine never reduces over it and replicate() averages once: a parameter that is a
--    DTensor on a mesh spanning the dp dim is refused (its gradient would be reduced by the
--    engine already, or be a per-rank value under a Replicate placement).
--  * At replicate(), the parameters and buffers are broadcast from the first rank of the dp
--    group, so the replicas start equal (as DDP).
--  * A hook on each parameter (t:register_hook) hands its gradient to its bucket
--    (lua/dtensor/parallel/buckets.lua, grad_buckets.lua).  When a bucket has all its gradients, and every
--    bucket before it was launched, its local tensors are flattened into one buffer and
--    averaged by one async all_reduce over the dp group, which runs while backward computes
--    the next gradients (DDP's overlap).  At the end of backward (a callback queued with
--    dt.autograd.queue_callback) every bucket is waited and written back: a .grad that this
--    backward created becomes the average, one that held earlier gradients gets
--    (average - gradient) added.  Hooks run in the same order on every rank (the engine's
--    order), so the buckets' all_reduces match.
--  * Every parameter that requires grad must receive a gradient in each backward (as DDP
--    without find_unused_parameters): the next forward raises, naming those that did not.
--  * mp_policy (as fully_shard's): param_dtype: the module's forward runs on casts of the
--    parameters and of its floating tensor arguments (differentiable `to`s made before each
--    forward; the parameters are put back after it), so
--    the parameters, their .grad and the optimizer's state keep their dtype; reduce_dtype
--    (default: param_dtype, else the parameter's): the buckets are averaged in it, then cast
--    back into .grad (also on a dp group of one rank, so every mesh rounds alike).
local core = require "dtensor.core"
local L = require "dtensor.parallel.layouts"
local grad_buckets = require "dtensor.parallel.grad_buckets"
local mesh_arg = require("dtensor.parallel.distribute_module").mesh_arg
local D = core.distributed
local M = {}

local OPTIONS = {mesh_dim = true, bucket_cap_mb = true, mp_policy = true}
local FLOAT = {float32 = true, float64 = true, bfloat16 = true, float16 = true}

local function local_of(t) return core.is_dtensor(t) and t:to_local() or t end

-- the dp dim of mesh (1-d: its only dim; else opts.mesh_dim, or the dim named "dp")
local function dp_dim(mesh, d, who)
  if d == nil then
    if mesh.ndim == 1 then return 1 end
    for i, n in ipairs(mesh:dim_names() or {}) do if n == "dp" then return i end end
    error(who .. ": a " .. mesh.ndim .. "-d mesh needs mesh_dim (the data-parallel dim: an index or a name)", 3)
  end
  if math.type(d) == "integer" then
    if d < 1 or d > mesh.ndim then error(who .. ": mesh_dim " .. d .. " is out of range for a " .. mesh.ndim .. "-d mesh", 3) end
    return d
  end
  if type(d) == "string" then
    for i, n in ipairs(mesh:dim_names() or {}) do if n == d then return i end end
    error(who .. ": the mesh has no dim named '" .. d .. "'", 3)
  end
  error(who .. ": mesh_dim must be a dim index or name, got " .. type(d), 3)
end

-- mp_policy = {param_dtype =, reduce_dtype =} (nil: {}), checked for `who` (fully_shard too)
function M.mp_option(mp, who)
  if mp == nil then return {} end
  mp = L.options(mp, {param_dtype = true, reduce_dtype = true}, who .. ": mp_policy", 3)
  for _, name in ipairs({"param_dtype", "reduce_dtype"}) do
    local v = mp[name]
    if v ~= nil and not FLOAT[v] then error(who .. ": mp_policy." .. name .. " must be a floating dtype, got " .. tostring(v), 3) end
  end
  return {param_dtype = mp.param_dtype, reduce_dtype = mp.reduce_dtype}
end

local function rank_set(layout, set)
  set = set or {}
  for _, v in ipairs(layout) do
    if type(v) == "table" then rank_set(v, set) else set[v] = true end
  end
  return set
end

-- the parameters to average: {name, param} for each distinct one that requires grad;
-- DTensors must live on a mesh that holds this rank and no other rank of the dp group
local function managed_params(module, group_ranks, who)
  local list, seen = {}, {}
  for _, np in ipairs(module:named_parameters()) do
    local name, p = np[1], np[2]
    if not seen[p] and p.requires_grad then
      seen[p] = true
      if core.is_dtensor(p) then
        local on = rank_set(p.device_mesh:layout())
        if not on[core.rank()] then
          error(who .. ": parameter '" .. name .. "' is a DTensor on a mesh without this rank (" .. core.rank() .. ")", 3)
        end
        for _, r in ipairs(group_ranks) do
          if r ~= core.rank() and on[r] then
            error(who .. ": parameter '" .. name .. "' is a DTensor on " .. tostring(p.device_mesh) .. ", which spans " ..
                  "the data-parallel dim (rank " .. r .. " of the dp group is on it): its gradient would be reduced " ..
                  "over that dim twice; give replicate() plain or tensor-parallel parameters (parallelize_module on " ..
                  "mesh[\"tp\"])", 3)
          end
        end
      end
      list[#list + 1] = {name = name, param = p}
    end
  end
  return list
end

-- the replicas start equal: every parameter and buffer from the dp group's first rank
local function broadcast_state(module, group, src)
  core.no_grad(function()
    for _, np in ipairs(module:named_parameters()) do D.broadcast(local_of(np[2]), src, group) end
    for _, entry in ipairs(module:named_modules()) do
      local m = entry[2]
      for _, bname in ipairs(m._buffer_names or {}) do
        local b = m._buffers[bname]
        if b ~= nil then D.broadcast(local_of(b), src, group) end
      end
    end
  end)
end

-- mp_policy's param_dtype: before forward each parameter slot of a managed parameter holds
-- its cast (one per parameter: tied slots share it), after forward the parameter again
local function param_slots(module, params)
  local managed, slots = {}, {}
  for _, e in ipairs(params) do managed[e.param] = true end
  for _, entry in ipairs(module:named_modules()) do
    local sub = entry[2]
    for _, pname in ipairs(rawget(sub, "_param_names")) do
      local p = rawget(sub, "_parameters")[pname]
      if managed[p] then slots[#slots + 1] = {sub = sub, pname = pname, param = p} end
    end
  end
  return slots
end

local function cast_params(state, inputs)
  local casts = {}
  for _, s in ipairs(state.slots) do
    local c = casts[s.param]
    if c == nil then
      c = s.param.dtype == state.param_dtype and s.param or s.param:to(state.param_dtype)
      casts[s.param] = c
    end
    rawget(s.sub, "_parameters")[s.pname] = c
  end
  -- and the floating tensor inputs (as PyTorch's cast_forward_inputs)
  local out, changed = {n = inputs.n}, false
  for i = 1, inputs.n do
    local x = inputs[i]
    if core.is_tensor(x) and x.dtype:match("float") and x.dtype ~= state.param_dtype then x, changed = x:to(state.param_dtype), true end
    out[i] = x
  end
  return changed and out or nil
end

local function restore_params(state)
  for _, s in ipairs(state.slots) do rawget(s.sub, "_parameters")[s.pname] = s.param end
end

function M.replicate(module, mesh, opts)
  local who = "replicate"
  if not L.is_module(module) then error(who .. ": expected a dt.nn.Module, got " .. type(module), 2) end
  mesh = mesh_arg(mesh, who, 2)
  opts = L.options(opts, OPTIONS, who, 2)
  local dim = dp_dim(mesh, opts.mesh_dim, who)
  local mp = M.mp_option(opts.mp_policy, who)
  local cap = opts.bucket_cap_mb
  if cap == nil then cap = 25 end
  if type(cap) ~= "number" or cap <= 0 then error(who .. ": bucket_cap_mb must be a positive number, got " .. tostring(cap), 2) end
  if rawget(module, "_replicate") then error(who .. ": the module is replicated already", 2) end
  if not mesh:get_coordinate() then return module end -- off the mesh: nothing to average
  local group = mesh:get_group(dim)
  local params = managed_params(module, group:ranks(), who)
  broadcast_state(module, group, group:ranks()[1])

  local sizes = {}
  for i, e in ipairs(params) do
    local l = local_of(e.param)
    sizes[i] = {name = e.name, dtype = l.dtype, bytes = l:numel() * l:element_size()}
  end
  local state = grad_buckets.new(params, sizes, group, cap * 1024 * 1024, "avg", who, false,
                                 mp.reduce_dtype or mp.param_dtype)
  state.param_dtype = mp.param_dtype
  module:register_forward_pre_hook(function() grad_buckets.check_finished(state) end)
  if state.param_dtype then
    state.slots = param_slots(module, params)
    module:register_forward_pre_hook(function(_, inputs) return cast_params(state, inputs) end)
    module:register_forward_hook(function() restore_params(state) end)
  end
  rawset(module, "_replicate", state)
  return module
end

M.dp_dim = dp_dim -- fully_shard finds its dp dim alike

-- the buckets of a replicated module, in launch order: lists of parameter names
function M.replicate_buckets(module)
  local state = type(module) == "table" and rawget(module, "_replicate")
  if not state then error("replicate_buckets: the module was not given to dt.parallel.replicate", 2) end
  local out = {}
  for k, b in ipairs(state.buckets) do
    out[k] = {}
    for i, slot in ipairs(b.slots) do out[k][i] = slot.name end
  end
  return out
end

return M
