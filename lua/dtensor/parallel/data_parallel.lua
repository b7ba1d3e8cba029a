-- dt.parallel.data_parallel(step_fn, mesh, {batch_dim = 1, inputs = {...}, bucket_cap_mb = 25})
-- and dt.parallel.explain_batch_dims(step_fn, ...) (doc/data_parallel.md).
--
-- step_fn is a single-device training step: it takes the whole batch as plain tensors and
-- uses parameters it reaches itself (modules, an optimizer).  The returned function, called
-- with the same arguments on every rank:
--  * on the first call with given argument shapes, traces step_fn (dt._trace: it runs once on
--    the whole batch, on every rank alike, so that call's results are the single-device ones)
--    and runs the batch-dim analysis over the trace (batch_dims.lua): every node must have a
--    batch dim, be a Partial over the batch, or be batch-independent, else the error names the
--    op and its Lua line.  The parameters are the traced externals that require grad; each
--    must be found in a dt.nn.Module reachable from step_fn's upvalues (or opts.modules).
--  * on later calls runs step_fn eagerly as a DTensor program built from the analysis: each
--    batched argument distributed Shard(its batch dim) over the mesh (every rank holds the
--    batch: no communication), each parameter put into its module as a Replicate DTensor
--    through `to_replicate` (below), other tensors taken as replicated
--    (dt.implicit_replication).  The sharding dispatcher runs every op, so the results equal
--    the single-device program's (a mean over an unevenly sharded batch included: the
--    dispatcher reduces it exactly).  Each parameter's gradient arrives as a Partial over the
--    ranks; to_replicate's backward hands the rank's part to grad_buckets.lua, whose bucketed
--    async all_reduce(sum) writes the whole gradient into the plain parameter's .grad by the end
--    of backward, so the optimizer inside step_fn updates every rank's parameters alike.
--    DTensor results are returned as plain tensors (full_tensor).
--  * from the signature's third call, replays: the same DTensor program recorded once by
--    dt.compile and replayed (dp_replay.lua), unless opts.replay is false or the trace saw
--    what a graph cannot replay (dp:explain() says why); the second call stays eager because
--    it checks that every parameter is read through its module.
local core = require "dtensor.core"
local L = require "dtensor.parallel.layouts"
local mesh_arg = require("dtensor.parallel.distribute_module").mesh_arg
local batch_dims = require "dtensor.parallel.batch_dims"
local grad_buckets = require "dtensor.parallel.grad_buckets"
local dp_replay = require "dtensor.parallel.dp_replay"
local Function = require("dtensor.autograd").module.autograd.Function
local M = {}

local OPTIONS = {batch_dim = true, inputs = true, bucket_cap_mb = true, modules = true, replay = true}
local pack, unpack = table.pack, table.unpack

-- A parameter as a Replicate DTensor on the mesh.  Its gradient arrives as the engine has it
-- (keeps_partial): the rank's part (a Partial(sum)'s local value; of a gradient every rank
-- holds whole, the first rank's) goes to the buckets, which sum it into the parameter's .grad;
-- nothing flows into the plain parameter through the engine.
local to_replicate = Function {
  name = "data_parallel_replicate",
  keeps_partial = true,
  forward = function(ctx, p, mesh, first, buckets)
    ctx.p, ctx.first, ctx.buckets = p, first, buckets
    return core.from_local(p, mesh, {core.Replicate()})
  end,
  backward = function(ctx, g)
    local pl = g.placements[1]
    local l
    if pl:is_partial() and pl.reduce_op == "sum" then
      l = g:to_local()
    else
      l = g:redistribute(g.device_mesh, {core.Replicate()}):to_local()
      if not ctx.first then l = l * 0 end
    end
    grad_buckets.give(ctx.buckets, ctx.p, l)
    return nil
  end,
}

-- batch dims (0-based) of the tensor arguments, from opts.inputs / opts.batch_dim
local function arg_dims_of(self, args)
  local dims, shapes = {}, {}
  for i = 1, args.n do
    local a = args[i]
    if core.is_tensor(a) then
      if core.is_dtensor(a) then
        error("data_parallel: argument " .. i .. " is a DTensor; step_fn is a single-device program (give plain tensors)", 3)
      end
      local d = self.inputs == nil and self.batch_dim or self.inputs[i]
      local k = #dims + 1
      shapes[k] = a:size()
      if d ~= false and d ~= nil then
        local nd = a:dim()
        if d < 0 then d = nd + 1 + d end
        if d < 1 or d > nd then
          error(string.format("data_parallel: batch dim %d of argument %d is out of range for its shape {%s}",
                self.inputs and self.inputs[i] or self.batch_dim, i, table.concat(a:size(), ",")), 3)
        end
        dims[k] = d - 1
      end
    end
  end
  return dims, shapes
end

local function signature(args)
  local parts = {}
  for i = 1, args.n do
    local a = args[i]
    parts[i] = core.is_tensor(a) and (a.dtype .. "{" .. table.concat(a:size(), ",") .. "}") or type(a)
  end
  return table.concat(parts, ";")
end

-- where each parameter lives: a list of {module =, name =} (tied parameters live in several),
-- from the modules reachable from fn's upvalues; and the optimizers reachable there (tables
-- with param_groups), whose Lua hyperparameters guard the replayed graphs
local function find_modules(fn, extra)
  local found, seen, optimizers = {}, {}, {}
  local function visit(v, depth)
    if depth > 4 or seen[v] then return end
    seen[v] = true
    if type(v) == "table" and type(rawget(v, "param_groups")) == "table" then
      optimizers[#optimizers + 1] = v
      return
    end
    -- a module instance (not a class: those hold no _parameters; nor a table whose __index raises)
    local ok, is_module = pcall(L.is_module, v)
    if ok and is_module and type(v) == "table" and type(rawget(v, "_parameters")) == "table" then
      for _, entry in ipairs(v:named_modules()) do found[#found + 1] = entry[2] end
      return
    end
    if type(v) == "function" then
      for i = 1, math.huge do
        local name, u = debug.getupvalue(v, i)
        if not name then break end
        if type(u) == "table" or type(u) == "function" then visit(u, depth + 1) end
      end
    elseif type(v) == "table" and getmetatable(v) == nil then
      for _, u in pairs(v) do if type(u) == "table" or type(u) == "function" then visit(u, depth + 1) end end
    end
  end
  visit(fn, 0)
  for _, m in ipairs(extra or {}) do visit(m, 0) end
  local where = {}
  local seen_at = {}
  for _, m in ipairs(found) do
    for _, name in ipairs(rawget(m, "_param_names") or {}) do
      local p = rawget(m, "_parameters")[name]
      if p ~= nil and not seen_at[m] then
        where[p] = where[p] or {}
        table.insert(where[p], {module = m, name = name})
      end
    end
    seen_at[m] = true
  end
  return where, optimizers
end

-- the first node reading slot s (for errors)
local function first_reader(trace, s)
  for _, n in ipairs(trace.nodes) do
    for _, i in ipairs(n.ins) do if i == s then return n end end
  end
end

local function setup_params(self, trace)
  local where, optimizers = find_modules(self.step_fn, self.modules)
  local params, sizes = {}, {}
  for e, ext in ipairs(trace.externals) do
    if ext.requires_grad then
      local p = ext.tensor
      local at = p and where[p]
      if not at then
        local n = first_reader(trace, trace.nargs + e - 1)
        error(string.format("data_parallel: a tensor that requires grad {%s}, read by %s at %s, is not a parameter of a "
              .. "dt.nn.Module reachable from step_fn (its upvalues) nor of opts.modules", table.concat(ext.shape, ","),
              n and n.name or "?", n and n.where or "?"), 0)
      end
      params[#params + 1] = {name = at[1].name, param = p, at = at}
      sizes[#sizes + 1] = {name = at[1].name, dtype = p.dtype, bytes = p:numel() * p:element_size()}
    end
  end
  if self.params then
    if #params ~= #self.params then error("data_parallel: step_fn uses other parameters for these argument shapes", 0) end
    return
  end
  self.params, self.optimizers = params, optimizers
  self.buckets = grad_buckets.new(params, sizes, self.group, self.cap, "sum", "data_parallel", true)
  -- while a step runs distributed, a gradient reaching the plain parameter itself means step_fn
  -- read it without its module (an upvalue): it would be reduced twice
  for _, e in ipairs(params) do
    e.param:register_hook(function()
      if self.running then
        error("data_parallel: parameter '" .. e.name .. "' got a gradient as a plain tensor: step_fn reads it "
              .. "directly (e.g. as an upvalue) instead of through its module, which data_parallel replicates; "
              .. "read it through the module", 0)
      end
    end)
  end
end

local function trace_call(self, key, args)
  local dims, shapes = arg_dims_of(self, args)
  local out = pack(core._trace(self.step_fn, unpack(args, 1, args.n)))
  local trace = out[1]
  trace.arg_shapes = shapes
  self.analyses[key] = batch_dims.analyse(trace, dims)
  self.last = self.analyses[key]
  setup_params(self, trace)
  self.plans[key] = {blocker = dp_replay.blocker(self.replay, trace), eager_calls = 0}
  self.last_plan = self.plans[key]
  self.counts.traces = self.counts.traces + 1
  return unpack(out, 2, out.n)
end

local function as_plain(v)
  if core.is_dtensor(v) then return v:full_tensor() end
  return v
end

-- the batched arguments as Shard(batch dim) DTensors (every rank holds the batch: no communication)
local function sharded_args(self, an, args)
  local mesh, dims = self.mesh, an.arg_dims
  local k = 0
  local dargs = {n = args.n}
  for i = 1, args.n do
    local a = args[i]
    if core.is_tensor(a) then
      k = k + 1
      if dims[k] ~= nil then a = core.distribute_tensor(a, mesh, {core.Shard(dims[k] + 1)}, {src_rank = false}) end
    end
    dargs[i] = a
  end
  return dargs
end

local function run_distributed(self, an, args)
  grad_buckets.check_finished(self.buckets)
  local mesh = self.mesh
  local dargs = sharded_args(self, an, args)
  local first = self.group:ranks()[1] == core.rank()
  for _, e in ipairs(self.params) do
    local r = to_replicate(e.param, mesh, first, self.buckets)
    for _, at in ipairs(e.at) do rawget(at.module, "_parameters")[at.name] = r end
  end
  self.running = true
  local out = pack(pcall(core.implicit_replication, self.step_fn, unpack(dargs, 1, dargs.n)))
  self.running = false
  for _, e in ipairs(self.params) do
    for _, at in ipairs(e.at) do rawget(at.module, "_parameters")[at.name] = e.param end
  end
  if not out[1] then
    grad_buckets.abandon(self.buckets)
    error(out[2], 0)
  end
  for i = 2, out.n do out[i] = as_plain(out[i]) end
  self.counts.distributed_calls = self.counts.distributed_calls + 1
  return unpack(out, 2, out.n)
end

local Runner = {}
Runner.__index = Runner
Runner.__call = function(self, ...)
  local args = pack(...)
  local key = signature(args)
  local an = self.analyses[key]
  if not an then return trace_call(self, key, args) end
  local plan = self.plans[key]
  self.last_plan = plan
  if plan.blocker or plan.eager_calls == 0 then
    plan.eager_calls = plan.eager_calls + 1
    return run_distributed(self, an, args)
  end
  plan.compiled = plan.compiled or dp_replay.compile(self)
  local out = dp_replay.call(self, plan, sharded_args(self, an, args))
  self.counts.distributed_calls = self.counts.distributed_calls + 1
  if plan.compiled then self.counts.replayed_calls = self.counts.replayed_calls + 1 end
  return unpack(out, 1, out.n)
end

-- dp:stats(): traces run (one per argument signature), calls run as DTensor programs (eager
-- or replayed), of those the calls run by a graph (recorded or replayed), and the graphs
-- recorded (one per signature, and one per change of the optimizers' Lua hyperparameters)
function Runner:stats()
  local graphs = 0
  for _, plan in pairs(self.plans) do graphs = graphs + (plan.compiled and plan.compiled:stats().graphs or 0) end
  return {traces = self.counts.traces, distributed_calls = self.counts.distributed_calls,
          replayed_calls = self.counts.replayed_calls, graphs = graphs}
end

-- dp:explain(): the batch dims of the last traced signature's nodes, as explain_batch_dims
-- prints them, and whether its calls replay (or why not)
function Runner:explain()
  if not self.last then error("explain: nothing traced yet (call the data-parallel step first)", 2) end
  local p = self.last_plan
  local how = p.blocker and ("replay: off: " .. p.blocker .. "; calls run eagerly on DTensors")
    or "replay: on (from the signature's third call: a dt.compile graph of the DTensor step)"
  return batch_dims.format(self.last) .. "\n" .. how
end

-- dp:graph(opts): the replayed graph of the last signature (dt.compile's f:graph(opts))
function Runner:graph(opts)
  local p = self.last_plan
  if not (p and p.compiled and p.compiled:stats().graphs > 0) then
    error("graph: no replayed graph yet" .. (p and p.blocker and (" (replay: off: " .. p.blocker .. ")") or
          " (a signature replays from its third call)"), 2)
  end
  return p.compiled:graph(opts)
end

local function check_opts(opts, who)
  opts = L.options(opts, OPTIONS, who, 3)
  local bd = opts.batch_dim
  if bd == nil then bd = 1 end
  if math.type(bd) ~= "integer" then error(who .. ": batch_dim must be an integer dim (1-based), got " .. tostring(bd), 3) end
  if opts.inputs ~= nil and type(opts.inputs) ~= "table" then
    error(who .. ": inputs must be a list with one entry per argument of step_fn (its batch dim, or false), got " ..
          type(opts.inputs), 3)
  end
  for i, d in pairs(opts.inputs or {}) do
    if math.type(i) ~= "integer" or not (d == false or math.type(d) == "integer") then
      error(who .. ": inputs[" .. tostring(i) .. "] must be a batch dim (an integer) or false, got " .. tostring(d), 3)
    end
  end
  return opts, bd
end

function M.data_parallel(step_fn, mesh, opts)
  local who = "data_parallel"
  if type(step_fn) ~= "function" then error(who .. ": expected a step function, got " .. type(step_fn), 2) end
  mesh = mesh_arg(mesh, who, 2)
  local bd
  opts, bd = check_opts(opts, who)
  if mesh.ndim ~= 1 then error(who .. ": expects a 1-d mesh (the data-parallel dim), got a " .. mesh.ndim .. "-d mesh", 2) end
  if not mesh:get_coordinate() then error(who .. ": rank " .. core.rank() .. " is not on the mesh", 2) end
  local cap = opts.bucket_cap_mb
  if cap == nil then cap = 25 end
  if type(cap) ~= "number" or cap <= 0 then error(who .. ": bucket_cap_mb must be a positive number, got " .. tostring(cap), 2) end
  if opts.replay ~= nil and type(opts.replay) ~= "boolean" then
    error(who .. ": replay must be a boolean, got " .. tostring(opts.replay), 2)
  end
  local self = setmetatable({step_fn = step_fn, mesh = mesh, group = mesh:get_group(1), batch_dim = bd, inputs = opts.inputs,
                             modules = opts.modules, cap = cap * 1024 * 1024, analyses = {}, plans = {},
                             replay = opts.replay ~= false,
                             counts = {traces = 0, distributed_calls = 0, replayed_calls = 0}}, Runner)
  return self
end

-- dt.parallel.explain_batch_dims(step_fn, ...[, {batch_dim =, inputs =}]): traces step_fn(...)
-- (running it once), prints each node with its batch dim and Lua line, returns the text and
-- step_fn's results.  A trailing plain table (not a tensor) holds the options.
function M.explain_batch_dims(step_fn, ...)
  local who = "explain_batch_dims"
  if type(step_fn) ~= "function" then error(who .. ": expected a step function, got " .. type(step_fn), 2) end
  local args = pack(...)
  local opts = {}
  if args.n > 0 and type(args[args.n]) == "table" and not core.is_tensor(args[args.n]) and not L.is_module(args[args.n]) then
    opts = args[args.n]
    args.n = args.n - 1
  end
  local bd
  opts, bd = check_opts(opts, who)
  local probe = {batch_dim = bd, inputs = opts.inputs}
  local dims, shapes = arg_dims_of(probe, args)
  local out = pack(core._trace(step_fn, unpack(args, 1, args.n)))
  out[1].arg_shapes = shapes
  local text = batch_dims.format(batch_dims.analyse(out[1], dims))
  print(text)
  return text, unpack(out, 2, out.n)
end

return M
