-- Shared helpers of the DTensor SPMD specs: a PRNG seeded alike on every rank (so every
-- rank draws the same cases), the meshes of this world size, a torch.chunk reference, and
-- comparisons of DTensor results with the op on the global plain tensors.
local assert = require "luassert" -- dofile runs in _G, outside busted's spec environment
local H = {}

H.prng = require("tests.spec.support.spec_helpers").prng -- Park-Miller, the op-table cases' too

H.DTYPES = {"float32", "float64", "bfloat16", "float16", "int64", "int32", "uint8", "bool"}

-- The meshes to test on this world: {name, mesh}; built on every rank in the same order.
function H.meshes()
  local n = dt.world_size()
  local list = {{"1-d of " .. n, dt.init_device_mesh("cpu", {n})}}
  if n == 4 then
    list[#list + 1] = {"2x2", dt.init_device_mesh("cpu", {2, 2}, {"dp", "tp"})}
    list[#list + 1] = {"1x4", dt.init_device_mesh("cpu", {1, 4})}
    list[#list + 1] = {"4x1", dt.init_device_mesh("cpu", {4, 1})}
    list[#list + 1] = {"2x2 permuted", dt.DeviceMesh("cpu", {{3, 1}, {2, 0}})}
    list[#list + 1] = {"2x1x2", dt.init_device_mesh("cpu", {2, 1, 2})}
  elseif n > 1 then
    list[#list + 1] = {"1x" .. n, dt.init_device_mesh("cpu", {1, n})}
    list[#list + 1] = {n .. "x1", dt.init_device_mesh("cpu", {n, 1})}
    list[#list + 1] = {"1x" .. n .. "x1", dt.init_device_mesh("cpu", {1, n, 1})}
  end
  if n >= 3 then -- rank 0 is not in this one
    local ranks = {}
    for r = n - 1, 1, -1 do ranks[#ranks + 1] = r end
    list[#list + 1] = {"1-d without rank 0", dt.DeviceMesh("cpu", ranks)}
  end
  return list
end

-- A global tensor of this shape and dtype with exact small values.
function H.global(shape, dtype)
  local numel = 1
  for _, s in ipairs(shape) do numel = numel * s end
  local x = dt.arange(numel)
  if dtype == "bool" then x = x:remainder(2) else x = x:remainder(200) end
  return x:reshape(shape):to(dtype)
end

local function chunk(L, n, c) -- torch.chunk: start (0-based) and length
  local size = (L + n - 1) // n
  local s = math.min(c * size, L)
  return s, math.min(size, L - s)
end
H.chunk = chunk

-- The slice of the global tensor x that the rank at mesh coordinates coord holds.
function H.expected_local(x, mesh, placements, coord)
  local shape, start = x:size(), {}
  for d = 1, #shape do start[d] = 0 end
  for m = 1, mesh.ndim do
    local p = placements[m]
    if p:is_shard() then
      local d = p.dim
      local s, len = chunk(shape[d], mesh:shape()[m], coord[m])
      start[d] = start[d] + s
      shape[d] = len
    end
  end
  local out = x
  for d = 1, #shape do out = out:narrow(d, start[d] + 1, shape[d]) end
  return out
end

function H.same(a, b) -- exact equality of shape, dtype and values
  return a.dtype == b.dtype and #a:size() == #b:size() and dt.equal(a, b)
end

function H.placement_string(list)
  local out = {}
  for i, p in ipairs(list) do out[i] = tostring(p) end
  return "{" .. table.concat(out, ", ") .. "}"
end

-- pcall(f, ...) must fail with a message containing pattern (plain text).  (Plain error() at
-- level 2, so that the failure names the caller's line.)
function H.fails(pattern, f, ...)
  local ok, err = pcall(f, ...)
  if ok then error("expected an error matching: " .. pattern, 2) end
  if not tostring(err):find(pattern, 1, true) then
    error("expected an error matching: " .. pattern .. "\ngot: " .. tostring(err), 2)
  end
end

-- Every rank of the world holds the same generator state (seed, offset).  A collective: call
-- it on every rank, before any assertion.
function H.rng_states_agree()
  local st, n = dt.get_rng_state(), dt.world_size()
  local all = dt.distributed.all_gather(dt.tensor({st.seed, st.offset}, {dtype = "int64"})):totable()
  for r = 1, n - 1 do
    if all[2 * r + 1] ~= all[1] or all[2 * r + 2] ~= all[2] then return false end
  end
  return true
end

-- Asserts that d, a DTensor, equals want, the op on the global plain tensors: its global
-- metadata on every rank, its values on the mesh's ranks (nan and inf where the reference has
-- them; bfloat16/float16 to their precision).
function H.close(d, want, what)
  assert.are.same(want:size(), d:size(), what)
  assert.are.equal(want.dtype, d.dtype, what)
  local got = d:full_tensor()
  if not d.device_mesh:get_coordinate() or want:numel() == 0 then return end
  local g, w = got:to("float64"), want:to("float64")
  assert(dt.equal(g:ne(g), w:ne(w)), (what or "") .. ": nan at other places")
  local same = g:eq(w)
  g, w = dt.where(same, 0, g), dt.where(same, 0, w)
  g, w = dt.where(g:ne(g), 0, g), dt.where(w:ne(w), 0, w)
  local tol = (want.dtype == "bfloat16" or want.dtype == "float16") and 2e-2 or 1e-9
  if want.dtype == "float32" then tol = 1e-5 end
  local err = (g - w):abs():max():item()
  assert(err <= tol * (1 + w:abs():max():item()), (what or "") .. ": max error " .. err)
end

-- A global tensor of this shape and float dtype (default float32): 3 sin(0.37 k), k = 0, 1, ...
function H.values(shape, dtype)
  local numel = 1
  for _, v in ipairs(shape) do numel = numel * v end
  return ((dt.arange(numel):to("float64") * 0.37):sin():reshape(shape) * 3):to(dtype or "float32")
end

-- The plain op's error message on the global tensors (without its position).
function H.plain_error(f, ...)
  local ok, err = pcall(f, ...)
  assert(not ok, "the plain op was expected to fail")
  return (tostring(err):gsub("^[^\n]-:%d+: ", ""))
end

H.FLOATS = {"float32", "float64", "bfloat16", "float16"}

-- distribute_tensor of a global tensor every rank holds (no broadcast from a source rank).
function H.dist(x, mesh, p) return dt.distribute_tensor(x, mesh, p, {src_rank = false}) end

-- A random shape of ndim dims, sizes in lo..hi (1..7).
function H.shape_of(rng, ndim, lo, hi)
  local s = {}
  for d = 1, ndim do s[d] = rng.int(lo or 1, hi or 7) end
  return s
end

-- A random placement list for a tensor of ndim dims on mesh.  partial: false (Shard and
-- Replicate), true (Partial(sum) too), or a dtype (Partial sum/max, and avg for floating
-- dtypes or min for the others).
function H.placements(rng, mesh, ndim, partial)
  local p = {}
  for m = 1, mesh.ndim do
    local k = rng.int(1, partial and 4 or 3)
    if ndim == 0 or k == 1 then p[m] = dt.Replicate()
    elseif k == 4 then
      p[m] = dt.Partial(partial == true and "sum" or rng.pick {"sum", "sum", "max", partial:match("float") and "avg" or "min"})
    else p[m] = dt.Shard(rng.int(1, ndim)) end
  end
  return p
end

-- The groups collective specs run on: the world, and ranks 1..n-1 when there are 3 or more
-- ({name, ranks, group}; group nil for the world).  Every rank must call it (new_group).
function H.groups()
  local n, world = dt.world_size(), {}
  for r = 0, n - 1 do world[#world + 1] = r end
  local list = {{name = "world", ranks = world}}
  if n > 2 then
    local ranks = {table.unpack(world, 2)}
    list[2] = {name = "ranks 1..n-1", group = dt.distributed.new_group(ranks), ranks = ranks}
  end
  return list
end

return H
