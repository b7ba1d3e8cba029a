-- DTensor forms of functions that are not single rows of the operator table (doc/dispatch.md):
-- x:item() / x:equal(y) (answers every rank of the world agrees on), the *_like factories.
-- (cat/stack of DTensors are ops of the table: src/distributed/sharding_rules/join.c.)
-- Returns {module = {...}, methods = {...}}: init.lua installs it into dt and dt.Tensor.
local core = require "dtensor.core"
local dispatch = require("dtensor.dispatch").module -- _decide, _check_same_mesh
local factories = require("dtensor.dtensor").module -- zeros/ones/empty/full on a mesh
local module, methods = {}, {}

-- ---- scalar answers: the same on every rank of the world ----
-- the C functions wrapped here (plain tensors go straight to them).  core.Tensor is also
-- dt.Tensor: init.lua loads every module before it installs any method, so this is C's item.
local item, equal, allclose = core.Tensor.item, core.equal, core.allclose
local function world_value(mesh, v, dtype)
  if mesh:size() == core.world_size() then return v end
  -- ranks outside the mesh get it from the mesh's first rank
  local root = mesh:layout()
  while type(root) == "table" do root = root[1] end
  local t = core.tensor({v == nil and 0 or v}, {dtype = dtype})
  core.distributed.broadcast(t, root)
  return item(t[1])
end

function methods.item(x)
  if not core.is_dtensor(x) then return (item(x)) end -- not a tail call: errors name item
  if x:numel() ~= 1 then error("item: a DTensor of " .. x:numel() .. " elements (item needs exactly one)", 2) end
  local v = x.device_mesh:get_coordinate() and item(x:full_tensor()) or nil
  local dtype = (x.dtype == "bool" or x.dtype:match("int")) and "int64" or "float64"
  if x.dtype == "bool" and v ~= nil then v = v and 1 or 0 end
  v = world_value(x.device_mesh, v, dtype)
  if x.dtype == "bool" then return v ~= 0 end
  return v
end

-- x and y (DTensors of one global shape) compared shard by shard with local_cmp; Partial
-- is reduced first and y brought to x's sharding.  Every rank of the world gets the AND.
local function compare_shards(x, y, local_cmp)
  local target = {}
  for m, p in ipairs(x.placements) do target[m] = p:is_partial() and core.Replicate() or p end
  local mine = 1
  if x.device_mesh:get_coordinate() then
    mine = local_cmp(x:redistribute(target):to_local(), y:redistribute(target):to_local()) and 1 or 0
  else
    x:redistribute(target) -- nothing moves off-mesh; kept for the SPMD order
    y:redistribute(target)
  end
  local t = core.tensor({mine}, {dtype = "int64"})
  core.distributed.all_reduce(t, "min") -- all ranks of the world AND their answers
  return item(t[1]) == 1
end

local function both_dtensors(name, x, y)
  if core.is_dtensor(x) and core.is_dtensor(y) then
    dispatch._check_same_mesh(name, x.device_mesh, y.device_mesh, 3) -- not a tail call: the level counts this frame
    return
  end
  error(name .. ": a DTensor and a plain tensor; convert the plain one with dt.distribute_tensor or compare full_tensor()s", 3)
end

local function shape_text(s) return "{" .. table.concat(s, ",") .. "}" end

local function same_shape(sx, sy)
  local same = #sx == #sy
  for d = 1, #sx do same = same and sx[d] == sy[d] end
  return same
end

local function dequal(x, y)
  if not (core.is_dtensor(x) or core.is_dtensor(y)) then return (equal(x, y)) end
  both_dtensors("equal", x, y)
  if x.dtype ~= y.dtype or not same_shape(x:size(), y:size()) then return false end -- from metadata: every rank agrees
  return compare_shards(x, y, equal)
end

-- allclose(x, y, rtol, atol, equal_nan) or allclose(x, y, {rtol =, atol =, equal_nan =}):
-- DTensors must have one global shape (no broadcasting across shards); dtypes may differ.
local function dallclose(x, y, ...)
  if not (core.is_dtensor(x) or core.is_dtensor(y)) then return (allclose(x, y, ...)) end
  both_dtensors("allclose", x, y)
  local sx, sy = x:size(), y:size()
  if not same_shape(sx, sy) then
    error("allclose: DTensors of global shapes " .. shape_text(sx) .. " and " .. shape_text(sy) ..
          " (DTensors are compared at one shape; expand or redistribute first)", 2)
  end
  local opts = table.pack(...)
  return compare_shards(x, y, function(a, b) return allclose(a, b, table.unpack(opts, 1, opts.n)) end)
end
methods.equal, module.equal = dequal, dequal
methods.allclose, module.allclose = dallclose, dallclose

-- ---- *_like factories keep a DTensor's mesh and placements (Partial becomes Replicate:
-- a fresh value is not a sum of pending parts) ----
local function like_placements(x)
  local out = {}
  for m, p in ipairs(x.placements) do out[m] = p:is_partial() and core.Replicate() or p end
  return {outputs = {out}}
end
local function like_opts(name, x, opts)
  local o = {}
  if type(opts) == "table" then for key, v in pairs(opts) do o[key] = v end end
  o.device_mesh = x.device_mesh
  o.placements = dispatch._decide(name, "", {x}, function() return like_placements(x) end).outputs[1]
  o.dtype = o.dtype or x.dtype
  o.requires_grad = nil -- applied by the *_like function, whose name its errors give
  return o
end
local requires_grad = core._requires_grad_option
-- plain calls go through plain.<name>(...), not a tail call, so argument errors name it
local plain = {}
for _, name in ipairs {"zeros_like", "ones_like", "empty_like", "full_like", "rand_like", "randn_like"} do
  plain[name] = core[name]
end
function module.zeros_like(x, opts)
  if core.is_dtensor(x) then
    return requires_grad(factories.zeros(x:size(), like_opts("zeros_like", x, opts)), opts, "zeros_like")
  end
  return (plain.zeros_like(x, opts))
end
function module.ones_like(x, opts)
  if core.is_dtensor(x) then
    return requires_grad(factories.ones(x:size(), like_opts("ones_like", x, opts)), opts, "ones_like")
  end
  return (plain.ones_like(x, opts))
end
function module.empty_like(x, opts)
  if core.is_dtensor(x) then
    return requires_grad(factories.empty(x:size(), like_opts("empty_like", x, opts)), opts, "empty_like")
  end
  return (plain.empty_like(x, opts))
end
-- a draw of dt.rand/randn on x's mesh (RNG tracker region) whose errors name rand_like/randn_like
local function random_like(op, name, x, opts)
  local o = like_opts(name, x, opts)
  return requires_grad(core._dtensor_random(op, x:size(), o.device_mesh, o.placements, o.dtype, nil, nil, name), opts, name)
end
function module.rand_like(x, opts)
  if core.is_dtensor(x) then return random_like("rand", "rand_like", x, opts) end
  return (plain.rand_like(x, opts))
end
function module.randn_like(x, opts)
  if core.is_dtensor(x) then return random_like("randn", "randn_like", x, opts) end
  return (plain.randn_like(x, opts))
end
function module.full_like(x, value, opts)
  if core.is_dtensor(x) then
    return requires_grad(factories.full(x:size(), value, like_opts("full_like", x, opts)), opts, "full_like")
  end
  return (plain.full_like(x, value, opts))
end

return {module = module, methods = methods}
