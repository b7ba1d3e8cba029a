-- The dtlua side of the differential cases (tests/differential/README.md): every rank reads
-- the cases, builds each input as its local shard (the value formula, Partial parts and
-- torch.chunk geometry of torch_ops.py) with dt.from_local, runs the op under dt.comm_debug,
-- full_tensor's each output and compares it with the op on one device.  Rank 0 writes one
-- JSON line per case.  Cases whose mesh does not use exactly the world's ranks are skipped.
--
-- usage: dtlua -n 4 tests/differential/run_dtlua.lua cases.jsonl results.jsonl
local jsonl = require "dtensor.utils.jsonl"
local F = dt.nn.functional
local cases_path, out_path = arg[1], arg[2]
assert(cases_path and out_path, "usage: dtlua -n N run_dtlua.lua cases.jsonl results.jsonl")

local rank, world = dt.distributed.get_rank(), dt.distributed.get_world_size()

-- ------------------------------------------------------------------ JSON out (nested)
local function json(v)
  local t = type(v)
  if t == "table" then
    if #v > 0 or next(v) == nil then
      local parts = {}
      for i, x in ipairs(v) do parts[i] = json(x) end
      return "[" .. table.concat(parts, ",") .. "]"
    end
    local keys, parts = {}, {}
    for k in pairs(v) do keys[#keys + 1] = k end
    table.sort(keys)
    for _, k in ipairs(keys) do parts[#parts + 1] = jsonl.quote(k) .. ":" .. json(v[k]) end
    return "{" .. table.concat(parts, ",") .. "}"
  elseif t == "string" then return jsonl.quote(v)
  elseif t == "number" then
    if v ~= v then return "NaN" elseif v == math.huge then return "Infinity"
    elseif v == -math.huge then return "-Infinity" end
    if math.type(v) == "integer" then return tostring(v) end
    return string.format("%.17g", v)
  end
  return tostring(v)
end

-- ------------------------------------------------------------------ inputs (torch_ops.py's formula)
local function numel(shape)
  local n = 1
  for _, s in ipairs(shape) do n = n * s end
  return n
end

local function flat_values(spec, seed)
  local shape, kind, n = spec.shape, spec.kind, numel(spec.shape)
  local v = {}
  if kind == "float" then
    for i = 0, n - 1 do v[i + 1] = ((i * 7 + seed * 13) % 23 - 11) / 4 end
  elseif kind == "distinct" then
    for i = 0, n - 1 do v[i + 1] = ((i * 7919 + seed) % n - n // 2) / 4 end
  else
    local k, bound, d = kind:match("^(%a+):(%d+):?(%d*)$")
    bound = tonumber(bound)
    if k == "index" then
      for i = 0, n - 1 do v[i + 1] = (i * 5 + seed) % bound + 1 end -- 1-based in Lua
    else -- perm: distinct along dim d
      d = tonumber(d)
      local inner = 1
      for j = d + 2, #shape do inner = inner * shape[j] end
      for i = 0, n - 1 do
        v[i + 1] = ((i // inner) % shape[d + 1] + seed + i // (inner * shape[d + 1]) + i % inner) % bound + 1
      end
    end
  end
  return v
end

local function tensor(spec, seed)
  local dtype = spec.dtype == "float32" and "float32" or "int64"
  local v = flat_values(spec, seed)
  return dt.tensor(#v > 0 and v or {}, {dtype = dtype}):reshape(spec.shape)
end

local function global_input(spec) return tensor(spec, spec.seed) end

local function partial_part(spec, sizes, coords)
  local x = global_input(spec)
  for md, p in ipairs(spec.placements) do
    if p:sub(1, 1) == "P" then
      local m, c = sizes[md], coords[md]
      local sum = dt.zeros_like(x)
      local ys = {}
      for k = 1, m - 1 do
        ys[k] = tensor(spec, spec.seed + 101 * md * k)
        sum = sum + ys[k]
      end
      local total = p == "P(avg)" and x * m or x
      x = c > 0 and ys[c] or total - sum
    end
  end
  return x
end

local function local_shard(spec, sizes, coords)
  local x = partial_part(spec, sizes, coords)
  for md, p in ipairs(spec.placements) do
    if p:sub(1, 1) == "S" then
      local d = tonumber(p:sub(2)) + 1
      local L, n = x:size(d), sizes[md]
      local cs = (L + n - 1) // n
      local start = math.min(coords[md] * cs, L)
      x = x:narrow(d, start + 1, math.min(start + cs, L) - start)
    end
  end
  return x:contiguous()
end

local function placement(p)
  if p == "R" then return "R" elseif p == "P" then return "P" elseif p == "P(avg)" then return "P(avg)" end
  return "S" .. (tonumber(p:sub(2)) + 1)
end

local function make_dtensor(spec, mesh)
  local coords = mesh:get_coordinate()
  local sizes = mesh:shape()
  local pl = {}
  for i, p in ipairs(spec.placements) do pl[i] = placement(p) end
  return dt.from_local(local_shard(spec, sizes, coords), mesh, pl,
                       {run_check = false, shape = spec.shape})
end

-- ------------------------------------------------------------------ the ops (0-based dims in a)
local function d1(d) return d + 1 end
local OPS = {
  neg = function(t) return -t[1] end,
  exp = function(t) return t[1]:exp() end,
  relu = function(t) return t[1]:relu() end,
  tanh = function(t) return t[1]:tanh() end,
  abs = function(t) return t[1]:abs() end,
  floor = function(t) return t[1]:floor() end,
  add = function(t) return t[1] + t[2] end,
  mul = function(t) return t[1] * t[2] end,
  sub = function(t) return t[1] - t[2] end,
  add_bcast = function(t) return t[1] + t[2] end,
  add_scalar = function(t) return t[1] + 2 end,
  mul_scalar = function(t) return t[1] * 3 end,
  sum_all = function(t) return t[1]:sum() end,
  sum_dim = function(t, a) return t[1]:sum(d1(a.dim), a.keepdim) end,
  mean_dim = function(t, a) return t[1]:mean(d1(a.dim), a.keepdim) end,
  amax_dim = function(t, a) return t[1]:amax(d1(a.dim), a.keepdim) end,
  logsumexp_dim = function(t, a) return t[1]:logsumexp(d1(a.dim), a.keepdim) end,
  mm = function(t) return t[1]:mm(t[2]) end,
  bmm = function(t) return t[1]:bmm(t[2]) end,
  matmul_3d2d = function(t) return t[1]:matmul(t[2]) end,
  dot = function(t) return t[1]:dot(t[2]) end,
  einsum_mm = function(t) return dt.einsum("ij,jk->ik", t[1], t[2]) end,
  einsum_bmm = function(t) return dt.einsum("bij,bjk->bik", t[1], t[2]) end,
  transpose = function(t, a) return t[1]:transpose(d1(a.dim0), d1(a.dim1)) end,
  permute = function(t, a) return t[1]:permute(d1(a.dims[1]), d1(a.dims[2]), d1(a.dims[3])) end,
  unsqueeze = function(t, a) return t[1]:unsqueeze(d1(a.dim)) end,
  flatten = function(t) return t[1]:flatten() end,
  view_merge = function(t)
    local s = t[1]:size()
    return t[1]:reshape(s[1] * s[2], s[3])
  end,
  cat = function(t, a) return dt.cat({t[1], t[2]}, d1(a.dim)) end,
  stack = function(t, a) return dt.stack({t[1], t[2]}, d1(a.dim)) end,
  softmax = function(t, a) return t[1]:softmax(d1(a.dim)) end,
  log_softmax = function(t, a) return t[1]:log_softmax(d1(a.dim)) end,
  layer_norm = function(t) return F.layer_norm(t[1], t[1]:size(-1)) end,
  gather = function(t, a) return t[1]:gather(d1(a.dim), t[2]) end,
  scatter = function(t, a) return t[1]:scatter(d1(a.dim), t[2], t[3]) end,
  scatter_add = function(t, a) return t[1]:scatter_add(d1(a.dim), t[2], t[3]) end,
  sort = function(t, a) return t[1]:sort(d1(a.dim), a.descending) end,
  topk = function(t, a) return t[1]:topk(a.k, d1(a.dim)) end,
  cumsum = function(t, a) return t[1]:cumsum(d1(a.dim)) end,
  index_select = function(t, a) return t[1]:index_select(d1(a.dim), t[2]) end,
  flip = function(t, a)
    local dims = {}
    for i, d in ipairs(a.dims) do dims[i] = d1(d) end
    return t[1]:flip(dims)
  end,
  roll = function(t, a) return t[1]:roll(a.shift, d1(a.dim)) end,
  tril = function(t, a) return t[1]:tril(a.diagonal) end,
  triu = function(t, a) return t[1]:triu(a.diagonal) end,
}
-- ops whose second output holds 1-based indices (recorded 0-based, as torch's)
local INDEX_OUT = {sort = 2, topk = 2}

-- ------------------------------------------------------------------ comparing
local function flat(t)
  local v = t:to("float64"):reshape(t:numel()):totable()
  return v
end

local function compare(op, fulls, ref)
  local rec = {shapes = {}, values = {}}
  for i, f in ipairs(fulls) do
    rec.shapes[i] = f:size()
    local v = flat(f)
    if INDEX_OUT[op] == i then for j = 1, #v do v[j] = v[j] - 1 end end
    rec.values[i] = v
  end
  if type(ref) ~= "table" then rec.single = "error"; return rec end
  if #ref ~= #fulls then rec.single = "shape"; return rec end
  local kind = "bitwise"
  for i, r in ipairs(ref) do
    local f = fulls[i]
    local rs, fs = r:size(), f:size()
    if #rs ~= #fs then rec.single = "shape"; return rec end
    for j = 1, #rs do if rs[j] ~= fs[j] then rec.single = "shape"; return rec end end
    if not dt.equal(r, f) then
      if r.dtype ~= f.dtype or not r:to("float64"):allclose(f:to("float64"), 1e-5, 1e-5, true) then
        rec.single = "wrong"; return rec
      end
      kind = "close"
    end
  end
  rec.single = kind
  return rec
end

local function pack(...) return {...} end

local function summarize(c)
  local by = {}
  for _, o in ipairs(c.ops) do by[o.name] = (by[o.name] or 0) + 1 end
  return {n = #c.ops, bytes = c.bytes, by = by}
end

local function run_case(case, mesh)
  local op = OPS[case.op]
  local rec = {id = case.id, op = case.op, family = case.family, mesh = case.mesh}
  if not op then rec.status = "error"; rec.error = "runner: no such op"; return rec end
  local globals, dts = {}, {}
  for i, spec in ipairs(case.inputs) do
    globals[i] = global_input(spec)
    dts[i] = make_dtensor(spec, mesh)
  end
  local ok_ref, ref = pcall(function() return pack(op(globals, case.args)) end)
  local outs
  local ok, c = pcall(dt.comm_debug, function() outs = pack(op(dts, case.args)) end)
  if not ok then
    rec.status = "error"; rec.error = tostring(c):sub(1, 300); rec.single_error = not ok_ref
    return rec
  end
  rec.comm = summarize(c)
  rec.out_placements = {}
  for i, o in ipairs(outs) do
    local pl = {}
    for j, p in ipairs(o.placements or {}) do pl[j] = tostring(p) end
    rec.out_placements[i] = pl
  end
  local fulls = {}
  local fc = dt.comm_debug(function()
    for i, o in ipairs(outs) do fulls[i] = o:full_tensor() end
  end)
  rec.full_comm = summarize(fc)
  for k, v in pairs(compare(case.op, fulls, ok_ref and ref or nil)) do rec[k] = v end
  rec.status = "ok"
  return rec
end

-- ------------------------------------------------------------------ main
local meshes = {}
local out = rank == 0 and assert(io.open(out_path, "w")) or nil
for line in io.lines(cases_path) do
  local case = jsonl.decode(line)
  if numel(case.mesh) == world then
    local key = table.concat(case.mesh, "x")
    meshes[key] = meshes[key] or dt.init_device_mesh("cpu", case.mesh)
    local t0 = dt._clock and dt._clock() or os.clock()
    local ok, rec = pcall(run_case, case, meshes[key])
    if not ok then
      rec = {id = case.id, op = case.op, family = case.family, mesh = case.mesh,
             status = "error", error = "runner: " .. tostring(rec):sub(1, 300)}
    end
    rec.secs = (dt._clock and dt._clock() or os.clock()) - t0
    if out then out:write(json(rec), "\n"); out:flush() end
  end
end
if out then out:close() end
