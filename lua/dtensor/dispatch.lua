-- The Lua side of the sharding dispatcher (src/distributed/dispatch.c, doc/dispatch.md):
-- the decisions of the ops composed from other ops, dt.register_sharding, dt.register_op /
-- dt.ops, dt.explain, and the plugins of the directories in DTLUA_PLUGINS (loaded last, once
-- every DTensor op is in place).  Returns {module = {...}, with_dt = {explain = ...},
-- load_plugins = fn}: init.lua installs it and calls load_plugins last.
local core = require "dtensor.core"
local placements_text = require "dtensor.placements_text"
local module = {}
local with_dt = {} -- functions that read the composed dt (first argument)

local ops = {} -- dt.ops: name -> the callable of an op registered from Lua
module.ops = ops
local lua_ops = {} -- name -> {forward =, sharding =}

-- ---- decisions of the composed ops (embedding, cross_entropy, *_like, ops of
-- dt.register_op): kept in the dispatcher's cache, keyed by name, static args (a string)
-- and the DTensors' global shapes, dtypes, placements and mesh shape; counted in
-- dt.dispatch_stats() and logged under DTLUA_LOG=dispatch like its own.  A decision is a
-- table of placements, lists, numbers, strings and booleans; `inputs` (target placements
-- per DTensor) and `outputs` (placement lists) are what the log shows, `cost` its price.
-- The cache holds it encoded as a Lua constructor; `decoded` memoises the decoding (weak:
-- the key -> decision map is the dispatcher's alone).  Decisions are read-only.
local lookup, store = core._decision_lookup, core._decision_store
local decoded = setmetatable({}, {__mode = "v"})
local env = {Shard = core.Shard, Replicate = core.Replicate, Partial = core.Partial, sum = "sum", avg = "avg", max = "max",
             min = "min"}

local function encode(v)
  local t = type(v)
  if t == "table" then
    local parts, keys = {}, {}
    for i = 1, #v do parts[i] = encode(v[i]) end
    for k in pairs(v) do
      if not (math.type(k) == "integer" and k >= 1 and k <= #v) then keys[#keys + 1] = k end
    end
    table.sort(keys, function(a, b) return tostring(a) < tostring(b) end)
    for _, k in ipairs(keys) do parts[#parts + 1] = "[" .. encode(k) .. "]=" .. encode(v[k]) end
    return "{" .. table.concat(parts, ",") .. "}"
  elseif t == "number" then
    if v ~= v then return "(0/0)" end
    if v == math.huge or v == -math.huge then return v > 0 and "(1/0)" or "(-1/0)" end
    return string.format(math.type(v) == "integer" and "%d" or "%.17g", v)
  elseif t == "string" then return string.format("%q", v)
  elseif t == "boolean" then return tostring(v)
  elseif t == "userdata" then return tostring(v) -- a placement: Shard(1), Replicate(), Partial(sum)
  end
  error("decision: cannot keep a " .. t, 0)
end

local function decode(blob)
  local d = assert(load("return " .. blob, "=decision", "t", env))()
  decoded[blob] = d
  return d
end

-- dt._decide(name, static, tensors, compute): the cached decision for these DTensors and
-- static args, else compute()'s, stored.
function module._decide(name, static, tensors, compute)
  local blob = lookup(name, static, false, tensors)
  if blob then return decoded[blob] or decode(blob) end
  local d = compute()
  blob = encode(d)
  decoded[blob] = d
  store(name, static, false, tensors, blob, d.inputs, d.outputs, d.cost)
  return d
end

-- dt._memo(name, static, tensors[, value]): a value an op remembers beside its decision
-- (not a decision: not counted, not logged), read, or stored when value is given.
function module._memo(name, static, tensors, value)
  if value == nil then
    local blob = lookup(name, static, true, tensors)
    return blob and (decoded[blob] or decode(blob))
  end
  local blob = encode(value)
  decoded[blob] = value
  store(name, static, true, tensors, blob)
end

-- A new rule for a composed op: its decisions are forgotten (as register_sharding does for
-- a dispatched op, with the whole cache).
function module._forget_decisions() core.dispatch_cache_clear() end

-- A plain tensor t beside DTensors on mesh in op `name` (`what`: "argument 2", ...), as a
-- replicated DTensor: one element, or any inside dt.implicit_replication; else the C
-- dispatcher's error saying to convert it.
function module._replicated(name, what, t, mesh)
  if not core.is_tensor(t) then error(("%s: %s must be a tensor, got %s"):format(name, what, type(t)), 0) end
  local ok, err = pcall(core._check_plain, name, what, t)
  if not ok then error((tostring(err):gsub("^[^\n]-:%d+: ", "")), 0) end
  local r = {}
  for m = 1, mesh.ndim do r[m] = core.Replicate() end
  return core.from_local(t, mesh, r)
end

-- The C dispatcher's error for DTensor operands on two meshes, raised `level` frames above
-- the caller (as error()'s level).
function module._check_same_mesh(name, mesh, other, level)
  if mesh ~= other then
    error(name .. ": DTensor operands on different meshes: " .. tostring(mesh) .. " and " .. tostring(other), level + 1)
  end
end

local function traceback_call(what, f, ...)
  local res = table.pack(xpcall(f, debug.traceback, ...))
  if not res[1] then error(what .. ": " .. tostring(res[2]), 0) end
  return table.unpack(res, 2, res.n)
end

function module.register_sharding(name, fn)
  if type(name) ~= "string" then error("register_sharding: op name must be a string, got " .. type(name), 2) end
  if fn ~= nil and type(fn) ~= "function" then
    error("register_sharding: rule must be a function(schema) -> strategies, got " .. type(fn), 2)
  end
  if lua_ops[name] then
    lua_ops[name].sharding = fn
    module._forget_decisions()
    return
  end
  core._register_sharding(name, fn)
end

-- ---- ops written in Lua ----
local function placement_list(p, mesh_ndim, ndim, where)
  if type(p) ~= "table" or #p ~= mesh_ndim then
    error(where .. ": expected a list of " .. mesh_ndim .. " placements (one per mesh dim)", 0)
  end
  local out = {}
  for m = 1, mesh_ndim do
    local q = p[m]
    if type(q) == "string" then
      if q == "R" then q = core.Replicate()
      elseif q:match("^P") then q = q == "P" and core.Partial("sum") or core.Partial(q:match("^P%((%a+)%)$") or "?")
      elseif q:match("^S%-?%d+$") then q = core.Shard(tonumber(q:sub(2)))
      else error(where .. ": bad placement '" .. q .. "'", 0) end
    end
    if q:is_shard() then
      local d = q.dim < 0 and q.dim + ndim + 1 or q.dim
      if d < 1 or d > ndim then
        error(where .. ": Shard(" .. q.dim .. ") is out of range for a " .. ndim .. "-d tensor", 0)
      end
      q = core.Shard(d)
    end
    out[m] = q
  end
  return out
end


-- strategies of a Lua op for these DTensor args: list of {inputs, output, cost} (cost nil:
-- unreachable)
local function lua_strategies(name, op, tensors, mesh)
  local schema = {op = name, mesh_ndim = mesh.ndim, inputs = {}}
  for i, x in ipairs(tensors) do
    schema.inputs[i] = {shape = x:size(), dtype = x.dtype, placements = x.placements}
  end
  if not op.sharding then error(name .. ": no sharding rule for DTensor arguments; give register_op a sharding function", 0) end
  local list = traceback_call(name .. ": the sharding rule registered from Lua raised an error", op.sharding, schema)
  if type(list) ~= "table" then error(name .. ": the sharding rule from Lua must return a list of strategies", 0) end
  local out = {}
  for k, st in ipairs(list) do
    local where = name .. ": the sharding rule from Lua returned strategy " .. k
    if type(st) ~= "table" or type(st.inputs) ~= "table" or #st.inputs ~= #tensors then
      error(where .. ": expected {inputs = <" .. #tensors .. " placement lists>, output = <placements>}", 0)
    end
    local s = {inputs = {}, cost = 0}
    for i, x in ipairs(tensors) do
      s.inputs[i] = placement_list(st.inputs[i], mesh.ndim, #x:size(), where .. ", input " .. i)
      local c = core._redistribute_cost(x, s.inputs[i])
      if c == nil then s.cost = nil elseif s.cost then s.cost = s.cost + c end
    end
    if st.output == nil then error(where .. ": no output placements", 0) end
    s.output, s.shape = st.output, st.shape
    out[k] = s
  end
  return out
end

local function choose(strats)
  local best
  for _, s in ipairs(strats) do
    if s.cost and (not best or s.cost < best.cost) then best = s end
  end
  return best
end

-- The global shape and dtype of a Lua op's output, agreed by one all_reduce(sum) over the
-- world (so uneven shards add up exactly and ranks outside the mesh learn them): along each
-- dim, the ranks whose mesh coordinates are 0 on every mesh dim not sharding it add their
-- local size; the mesh's first rank adds the dtype and the ndim.  run() computes the local
-- result (nil off the mesh); an error in it or in the output placements is raised on
-- every rank (the failing ranks' own message, the others' naming the op).
local DTYPES = {"float32", "float64", "bfloat16", "float16", "int64", "int32", "uint8", "bool"}
local MAX_DIMS = 8
local function agreed_output(name, mesh, output, run)
  local v = {}
  for i = 1, 3 + MAX_DIMS do v[i] = 0 end
  local coord, y, err = mesh:get_coordinate(), nil, nil
  if coord then
    local ok, r = pcall(function()
      local res = run()
      local ys = res:size()
      local root = true
      for m = 1, mesh.ndim do root = root and coord[m] == 0 end
      if root then
        for i, d in ipairs(DTYPES) do if d == res.dtype then v[1] = i end end
        v[2] = #ys + 1
      end
      local out = placement_list(output, mesh.ndim, #ys, name .. ": the strategy's output")
      for d = 1, #ys do
        local adds = true
        for m = 1, mesh.ndim do
          if coord[m] ~= 0 and not (out[m]:is_shard() and out[m].dim == d) then adds = false end
        end
        if adds then v[3 + d] = ys[d] end
      end
      return res
    end)
    if ok then y = r else err, v[3] = r, 1 end
  end
  local t = core.tensor(v, {dtype = "int64"})
  core.distributed.all_reduce(t, "sum")
  if err then error(err, 0) end
  if t[3]:item() > 0 then error(name .. ": the op failed on another rank (see its error)", 0) end
  local shape = {}
  for d = 1, t[2]:item() - 1 do shape[d] = t[3 + d]:item() end
  return y, shape, DTYPES[t[1]:item()]
end

-- A string naming a Lua op call's non-tensor arguments (numbers, strings, booleans, nil),
-- or nil when one is something else (its output shape is then agreed at every call).
local function static_signature(args)
  local parts = {}
  for i = 1, args.n do
    local a, t = args[i], type(args[i])
    if t == "number" then parts[i] = math.type(a) .. ":" .. tostring(a)
    elseif t == "string" then parts[i] = string.format("%q", a)
    elseif t == "boolean" or t == "nil" then parts[i] = tostring(a)
    elseif core.is_dtensor(a) then parts[i] = "D"
    else return nil end
  end
  return table.concat(parts, ",")
end

function module.register_op(spec)
  if type(spec) ~= "table" then error("register_op: expected {name = , forward = , sharding = }", 2) end
  local name = spec.name
  if type(name) ~= "string" or name == "" then error("register_op: name must be a non-empty string", 2) end
  if type(spec.forward) ~= "function" then error("register_op: " .. name .. ": forward must be a function", 2) end
  if spec.sharding ~= nil and type(spec.sharding) ~= "function" then
    error("register_op: " .. name .. ": sharding must be a function(schema) -> strategies", 2)
  end
  local op = {forward = spec.forward, sharding = spec.sharding}
  lua_ops[name] = op
  module._forget_decisions()
  local function call(...)
    local args = table.pack(...)
    local tensors, pos, mesh = {}, {}, nil
    for i = 1, args.n do
      if core.is_dtensor(args[i]) then
        tensors[#tensors + 1], pos[#tensors + 1] = args[i], i
        mesh = mesh or args[i].device_mesh
        module._check_same_mesh(name, mesh, args[i].device_mesh, 2)
      end
    end
    if not mesh then return op.forward(...) end
    for i = 1, args.n do -- plain tensors: replicated where the dispatcher would take them, else its error
      if core.is_tensor(args[i]) and not core.is_dtensor(args[i]) then
        local ok, r = pcall(module._replicated, name, "argument " .. i, args[i], mesh)
        if not ok then error(r, 2) end
        args[i] = r
      end
    end
    tensors, pos = {}, {}
    for i = 1, args.n do
      if core.is_dtensor(args[i]) then tensors[#tensors + 1], pos[#tensors + 1] = args[i], i end
    end
    local best = module._decide(name, "", tensors, function()
      local b = choose(lua_strategies(name, op, tensors, mesh))
      if not b then error(name .. ": no sharding strategy of the rule fits these DTensor arguments", 0) end
      return {inputs = b.inputs, outputs = {b.output},
              output = b.output, shape = b.shape, cost = b.cost}
    end)
    local locals = {table.unpack(args, 1, args.n)}
    for k, x in ipairs(tensors) do locals[pos[k]] = x:redistribute(best.inputs[k]):to_local() end
    local function run() -- ranks outside the mesh do not run forward
      local y = op.forward(table.unpack(locals, 1, args.n))
      if not core.is_tensor(y) then error(name .. ": forward must return a tensor", 0) end
      return y
    end
    -- the output's global shape and dtype: the strategy's shape (on a mesh of the whole
    -- world), else agreed once per decision and non-tensor arguments, then remembered
    local sig = static_signature(args)
    local known = sig and module._memo(name, "shape " .. sig, tensors)
    if not known and best.shape and mesh:size() == core.world_size() then known = {shape = best.shape} end
    local y, shape, dtype
    if known then
      if mesh:get_coordinate() then y = run() end
      shape, dtype = known.shape, known.dtype
    else
      y, shape, dtype = agreed_output(name, mesh, best.output, run)
      if sig then module._memo(name, "shape " .. sig, tensors, {shape = shape, dtype = dtype}) end
    end
    local out = placement_list(best.output, mesh.ndim, #shape, name .. ": the strategy's output")
    return core.from_local(y or core.empty(0, {dtype = dtype}), mesh, out, {shape = shape})
  end
  ops[name] = call
  return call
end

-- the ops composed in Lua from dispatched ops (their decisions in the dispatcher's cache,
-- named): explain would run them (collectives included) rather than explain them
local composed_in_lua = {embedding = true, cross_entropy = true, linear = true,
                         zeros_like = true, ones_like = true, empty_like = true, full_like = true,
                         rand_like = true, randn_like = true}

-- dt.explain(op_name, args...): the strategies, their costs and the choice, as text.  An op
-- named here may be any function of the composed dt, its methods or dt.nn.functional.
function with_dt.explain(dt, name, ...)
  if type(name) ~= "string" then error("explain: the op's name must be a string, got " .. type(name), 2) end
  if lua_ops[name] then
    local tensors, mesh = {}, nil
    for i = 1, select("#", ...) do
      local a = select(i, ...)
      if core.is_dtensor(a) then tensors[#tensors + 1], mesh = a, mesh or a.device_mesh end
    end
    if not mesh then error("explain: no DTensor argument", 2) end
    local strats = lua_strategies(name, lua_ops[name], tensors, mesh)
    local lines = {name .. ": strategies (input placements -> output placements):"}
    for _, s in ipairs(strats) do
      local ins = {}
      for i, p in ipairs(s.inputs) do ins[i] = placements_text(p) end
      lines[#lines + 1] = table.concat(ins, ", ") .. " -> " .. placements_text(placement_list(s.output, mesh.ndim, 8, name)) .. "  " ..
                              (s.cost and string.format("cost %.3g s", s.cost) or "(not reachable)")
    end
    local best = choose(strats)
    if best then
      local ins = {}
      for i, p in ipairs(best.inputs) do ins[i] = placements_text(p) end
      lines[#lines + 1] = "chosen: " .. table.concat(ins, ", ") .. " -> " ..
                              placements_text(placement_list(best.output, mesh.ndim, 8, name))
    else
      lines[#lines + 1] = "chosen: none (no strategy is reachable)"
    end
    return table.concat(lines, "\n") .. "\n"
  end
  if composed_in_lua[name] then
    error("explain: " .. name .. " is composed in Lua from dispatched ops and redistributions (doc/dispatch.md); " ..
          "DTLUA_LOG=dispatch shows its decisions", 2)
  end
  local f = dt[name] or dt.Tensor[name] or dt.nn.functional[name]
  if type(f) ~= "function" then error("explain: unknown op '" .. tostring(name) .. "'", 2) end
  return core._explain(f, ...)
end

-- ---- plugins: every *.lua of the directories in DTLUA_PLUGINS (':'-separated), each called
-- with the composed dt (a plugin may extend it) ----
local function load_plugins(dt)
  local dirs = os.getenv("DTLUA_PLUGINS")
  if dirs and dirs ~= "" then
    for dir in dirs:gmatch("[^:]+") do
      local p = io.popen('ls -1 "' .. dir .. '" 2>/dev/null')
      local files = {}
      if p then
        for f in p:lines() do if f:match("%.lua$") then files[#files + 1] = f end end
        p:close()
      end
      table.sort(files)
      for _, f in ipairs(files) do
        local chunk, err = loadfile(dir .. "/" .. f)
        if not chunk then error("DTLUA_PLUGINS: " .. err, 0) end
        traceback_call("DTLUA_PLUGINS: " .. dir .. "/" .. f, chunk, dt)
      end
    end
  end
end

return {module = module, with_dt = with_dt, load_plugins = load_plugins}
