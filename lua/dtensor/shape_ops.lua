-- Shape and index functions composed of the operator table's ops through the front door, so
-- that they work alike on plain tensors and DTensors (the sharding of what they call is
-- kept) and are differentiable (doc/ops-views.md):
--   scatter/scatter_add with a number or a larger source, and their in-place forms;
--   topk over a sharded dim (topk_sharded.lua: per-shard candidates merged, exact, ties included);
--   movedim/moveaxis, ravel, unbind, unflatten, swapaxes/swapdims, atleast_1d/2d/3d, dot,
--   tile, repeat_interleave, einsum.
-- Returns {module = {...}, methods = {...}}: init.lua installs them into dt and dt.Tensor.
local core = require "dtensor.core"
local like = require("dtensor.dtensor_ops").module -- full_like on DTensors too
local module, methods = {}, {}

local c_scatter, c_scatter_add, c_topk = core.scatter, core.scatter_add, core.topk

local function is_tensor(x) return core.is_tensor(x) end
local function shape_text(s) return "{" .. table.concat(s, ",") .. "}" end

local function check_tensor(name, x, what, level)
  if not is_tensor(x) then error(name .. ": " .. (what or "expected a tensor") .. ", got " .. type(x), (level or 2) + 1) end
end

-- a 1-based dim (negative from the end) of an nd-d tensor, normalised to 1..nd
local function norm_dim(name, d, nd, level)
  local n = math.max(nd, 1)
  if math.type(d) ~= "integer" then error(name .. ": dim must be an integer, got " .. (math.type(d) or type(d)), level + 1) end
  if d == 0 or d < -n or d > n then
    error(string.format("%s: dim %d out of range for a %d-d tensor (dims are 1-based: 1..%d or -%d..-1)", name, d, nd, n, n), level + 1)
  end
  return d < 0 and d + n + 1 or d
end

-- ---- scatter, scatter_add: a number for src (a tensor of it, the index's shape and
-- placements, x's dtype), a source larger than the index (its leading block, as torch reads it)
local function scatter_src(name, x, dim, index, src)
  check_tensor(name, x, nil, 3)
  check_tensor(name, index, "index must be a tensor", 3)
  if type(src) == "number" then
    local ok, r = pcall(like.full_like, index, src, {dtype = x.dtype})
    if not ok then error(name .. ": " .. tostring(r):gsub("^.-full: ", ""), 3) end
    return r
  end
  check_tensor(name, src, "src must be a tensor or a number", 3)
  local is, ss = index:size(), src:size()
  if #is ~= #ss then
    error(string.format("%s: source shape %s and index shape %s differ in their number of dims", name, shape_text(ss), shape_text(is)), 3)
  end
  for d = 1, #is do
    if ss[d] < is[d] then
      error(string.format("%s: source shape %s is smaller than the index's %s in dim %d", name, shape_text(ss), shape_text(is), d), 3)
    end
    if ss[d] > is[d] then src = src:narrow(d, 1, is[d]) end
  end
  return src
end

function methods.scatter(x, dim, index, src) return c_scatter(x, dim, index, scatter_src("scatter", x, dim, index, src)) end
function methods.scatter_add(x, dim, index, src)
  return c_scatter_add(x, dim, index, scatter_src("scatter_add", x, dim, index, src))
end
-- in place: x takes the result (autograd records the copy_)
function methods.scatter_(x, dim, index, src)
  local r = c_scatter(x, dim, index, scatter_src("scatter_", x, dim, index, src))
  return x:copy_(r)
end
function methods.scatter_add_(x, dim, index, src)
  local r = c_scatter_add(x, dim, index, scatter_src("scatter_add_", x, dim, index, src))
  return x:copy_(r)
end
module.scatter, module.scatter_add = methods.scatter, methods.scatter_add

-- ---- topk: over a sharded dim, lua/dtensor/topk_sharded.lua's merge of per-shard candidates
local sharded_topk = require "dtensor.topk_sharded"

local function topk_args(x, k, dim, largest, sorted)
  if type(dim) == "table" then
    local o = dim
    return o.dim, o.largest == nil or o.largest, o.sorted
  end
  if largest == nil then largest = true end
  return dim, largest, sorted
end

function methods.topk(x, k, dim, largest, sorted)
  if not core.is_dtensor(x) or math.type(k) ~= "integer" then return c_topk(x, k, dim, largest, sorted) end
  local d, lg = topk_args(x, k, dim, largest, sorted)
  d = norm_dim("topk", d or -1, x:dim(), 2)
  local size = x:dim() > 0 and x:size(d) or 1
  if k < 0 or k > size then return c_topk(x, k, dim, largest, sorted) end -- its error
  local sharded = false
  for _, p in ipairs(x.placements) do sharded = sharded or (p:is_shard() and p.dim == d) end
  if not sharded or k == 0 then return c_topk(x, k, dim, largest, sorted) end
  return sharded_topk(x, k, d, lg)
end
module.topk = methods.topk

-- ---- dims
local function dim_list(name, v, nd)
  local l = type(v) == "table" and v or {v}
  local out, seen = {}, {}
  for i, d in ipairs(l) do
    out[i] = norm_dim(name, d, nd, 3)
    if seen[out[i]] then error(name .. ": dim " .. d .. " appears twice", 3) end
    seen[out[i]] = true
  end
  return out
end

-- movedim(source, destination): dims (or lists of dims) moved to the given positions, the
-- others keeping their order in the remaining positions
function methods.movedim(x, source, destination)
  check_tensor("movedim", x)
  local nd = x:dim()
  local src, dst = dim_list("movedim", source, nd), dim_list("movedim", destination, nd)
  if #src ~= #dst then
    error(string.format("movedim: %d source dims and %d destination dims (they pair up)", #src, #dst), 2)
  end
  local order, used = {}, {}
  for i = 1, #src do order[dst[i]], used[src[i]] = src[i], true end
  local rest = 1
  for pos = 1, nd do
    if not order[pos] then
      while used[rest] do rest = rest + 1 end
      order[pos], rest = rest, rest + 1
    end
  end
  if nd == 0 then return x:view({}) end
  return x:permute(order)
end
methods.moveaxis = methods.movedim

-- swapaxes / swapdims: transpose under numpy's names
local function swap(name)
  return function(x, d0, d1)
    check_tensor(name, x)
    return x:transpose(d0, d1)
  end
end
methods.swapaxes, methods.swapdims = swap("swapaxes"), swap("swapdims")

-- ravel: the elements as a 1-d tensor (a view when the layout allows)
function methods.ravel(x)
  check_tensor("ravel", x)
  return x:reshape(x:numel())
end

-- unbind(dim = 1): the list of slices along dim (views)
function methods.unbind(x, dim)
  check_tensor("unbind", x)
  if x:dim() == 0 then error("unbind: a 0-d tensor has no dim to unbind", 2) end
  local d = norm_dim("unbind", dim or 1, x:dim(), 2)
  local out = {}
  for i = 1, x:size(d) do out[i] = x:select(d, i) end
  return out
end

-- unflatten(dim, sizes): dim split into sizes (one may be -1)
function methods.unflatten(x, dim, sizes)
  check_tensor("unflatten", x)
  local d = norm_dim("unflatten", dim, x:dim(), 2)
  if type(sizes) ~= "table" or #sizes == 0 then error("unflatten: sizes must be a non-empty list of integers", 2) end
  local s, prod, free = x:size(), 1, nil
  for i, v in ipairs(sizes) do
    if math.type(v) ~= "integer" or v < -1 then error("unflatten: sizes must be integers (one may be -1), got " .. (math.type(v) and tostring(v) or type(v)), 2) end
    if v == -1 then
      if free then error("unflatten: only one size may be -1", 2) end
      free = i
    else prod = prod * v end
  end
  local fixed = {table.unpack(sizes)}
  if free then
    if prod == 0 or s[d] % prod ~= 0 then
      error(string.format("unflatten: sizes %s do not fit dim %d of size %d", shape_text(sizes), d, s[d]), 2)
    end
    fixed[free] = s[d] // prod
  elseif prod ~= s[d] then
    error(string.format("unflatten: sizes %s multiply to %d, not dim %d's size %d", shape_text(sizes), prod, d, s[d]), 2)
  end
  local shape = {}
  for i = 1, d - 1 do shape[#shape + 1] = s[i] end
  for _, v in ipairs(fixed) do shape[#shape + 1] = v end
  for i = d + 1, #s do shape[#shape + 1] = s[i] end
  return x:reshape(shape)
end

-- atleast_1d/2d/3d: views with leading (and for 3-d trailing) size-1 dims; several tensors
-- give several results
local function atleast(name, n, shape_of)
  return function(...)
    local args, out = table.pack(...), {}
    for i = 1, args.n do
      local x = args[i]
      check_tensor(name, x)
      out[i] = x:dim() >= n and x or x:reshape(shape_of(x:size()))
    end
    return table.unpack(out, 1, args.n)
  end
end
methods.atleast_1d = atleast("atleast_1d", 1, function() return {1} end)
methods.atleast_2d = atleast("atleast_2d", 2, function(s) return #s == 0 and {1, 1} or {1, s[1]} end)
methods.atleast_3d = atleast("atleast_3d", 3, function(s)
  if #s == 0 then return {1, 1, 1} end
  if #s == 1 then return {1, s[1], 1} end
  return {s[1], s[2], 1}
end)

-- dot(a, b): the inner product of two 1-d tensors of one size
function methods.dot(a, b)
  check_tensor("dot", a)
  check_tensor("dot", b, "expected a second tensor")
  if a:dim() ~= 1 or b:dim() ~= 1 then
    error(string.format("dot: expects two 1-d tensors, got %d-d and %d-d", a:dim(), b:dim()), 2)
  end
  if a:size(1) ~= b:size(1) then
    error(string.format("dot: sizes %d and %d differ", a:size(1), b:size(1)), 2)
  end
  if a.dtype ~= b.dtype then error("dot: dtypes " .. a.dtype .. " and " .. b.dtype .. " differ", 2) end
  return a:matmul(b)
end

-- tile(reps): repeat with reps padded by leading ones to the tensor's dims (torch.tile);
-- also the way to call repeat, a Lua keyword (t["repeat"](t, ...) otherwise)
function methods.tile(x, reps, ...)
  check_tensor("tile", x)
  if type(reps) ~= "table" then reps = {reps, ...} end
  local r = {}
  for i = 1, x:dim() - #reps do r[i] = 1 end
  for _, v in ipairs(reps) do r[#r + 1] = v end
  return x["repeat"](x, r)
end

-- repeat_interleave(repeats, dim): each element (or slice along dim) repeated; repeats an
-- integer, or a plain 1-d integer tensor / list with one count per slice; without dim the
-- flattened tensor
local MAX_INTERLEAVED = 1 << 27

function methods.repeat_interleave(x, repeats, dim)
  check_tensor("repeat_interleave", x)
  if dim == nil then x, dim = x:reshape(x:numel()), 1 end
  local d = norm_dim("repeat_interleave", dim, x:dim(), 2)
  local size = x:dim() > 0 and x:size(d) or 1
  if math.type(repeats) == "integer" then
    if repeats < 0 then error("repeat_interleave: repeats must be non-negative, got " .. repeats, 2) end
    if x:dim() == 0 then x, d = x:reshape(1), 1 end
    local s = x:size()
    local e = {table.unpack(s)}
    table.insert(e, d + 1, repeats)
    s[d] = s[d] * repeats
    local ok, r = pcall(function() return x:unsqueeze(d + 1):expand(e):reshape(s) end)
    if not ok then error("repeat_interleave: " .. tostring(r):gsub("^[^\n]-:%d+: ", ""), 2) end
    return r
  end
  if core.is_dtensor(repeats) then
    error("repeat_interleave: per-slice counts must be a list or a plain tensor, got a DTensor (full_tensor() it)", 2)
  end
  local counts = is_tensor(repeats) and repeats:totable() or repeats
  if type(counts) ~= "table" or #counts ~= size then
    error(string.format("repeat_interleave: expected an integer or %d counts (one per slice of dim %d), got %s", size, d,
                        is_tensor(repeats) and shape_text(repeats:size()) or type(repeats)), 2)
  end
  local total = 0
  for _, c in ipairs(counts) do
    if math.type(c) ~= "integer" or c < 0 then error("repeat_interleave: counts must be non-negative integers, got " .. (math.type(c) and tostring(c) or type(c)), 2) end
    total = total + c
    -- the index is built as a Lua list: a count beyond what memory holds is an error, not a hang
    if total > MAX_INTERLEAVED or total < 0 then
      error(string.format("repeat_interleave: the counts add up to more than %d slices (count %d); use an integer repeats", MAX_INTERLEAVED, c), 2)
    end
  end
  local ids = {}
  for i, c in ipairs(counts) do
    for _ = 1, c do ids[#ids + 1] = i end
  end
  local ix = core.tensor(#ids > 0 and ids or {}, {dtype = "int64"})
  if core.is_dtensor(x) then
    local rep = {}
    for m = 1, x.device_mesh.ndim do rep[m] = core.Replicate() end
    ix = core.distribute_tensor(ix, x.device_mesh, rep, {src_rank = false})
  end
  return x:index_select(d, ix)
end

module.einsum = require "dtensor.einsum"

for _, name in ipairs {"movedim", "moveaxis", "swapaxes", "swapdims", "ravel", "unbind", "unflatten", "atleast_1d",
                       "atleast_2d", "atleast_3d", "dot", "tile", "repeat_interleave"} do
  module[name] = methods[name]
end

return {module = module, methods = methods}
