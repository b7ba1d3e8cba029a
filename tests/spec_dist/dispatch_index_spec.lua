-- Indexing on DTensors: t[k] and t[k] = v for random shapes (even and uneven),
-- random placements on every mesh of this world (off-mesh ranks included) and random keys
-- of every form (integers, negative ones, {start, stop[, step]}, {i}, {}, ":"), compared with
-- the same indexing of the global tensor; the collectives issued; errors on every rank.
local H = dofile((debug.getinfo(1, "S").source:match("^@(.*[/\\])") or "./") .. "dtensor_helpers.lua")
local n = dt.world_size()
local fails, placements, dist = H.fails, H.placements, H.dist

-- d a DTensor equal to the plain want: global metadata everywhere, values on its mesh.
local function same(d, want, what)
  assert(dt.is_dtensor(d), what)
  assert.are.same(want:size(), d:size(), what)
  assert.are.equal(want.dtype, d.dtype, what)
  if not d.device_mesh:get_coordinate() then return end
  assert(dt.equal(d:full_tensor(), want), what .. ": values differ")
end

-- A random key for a tensor of this shape: {key, description}.
local function random_key(rng, shape)
  if rng.int(1, 5) == 1 then
    local i = rng.int(1, shape[1])
    return rng.int(1, 2) == 1 and i or i - shape[1] - 1
  end
  local key, nk = {}, rng.int(0, #shape)
  for d = 1, nk do
    local s, c = shape[d], rng.int(1, 6)
    if c == 1 then key[d] = rng.int(1, s)
    elseif c == 2 then key[d] = -rng.int(1, s)
    elseif c == 3 then key[d] = rng.pick {{}, ":"}
    elseif c == 4 then key[d] = {rng.int(1, s)}
    else
      local a = rng.int(1, s)
      local b = rng.int(a > 1 and a - 1 or a, s) -- {a, a - 1} is empty
      local r = {a, rng.int(1, 2) == 1 and b or b - s - 1}
      if c == 6 then r[3] = rng.int(1, 3) end
      key[d] = r
    end
  end
  return key
end

local function key_string(k)
  if type(k) ~= "table" then return tostring(k) end
  local parts = {}
  for i, e in ipairs(k) do parts[i] = type(e) == "table" and "{" .. table.concat(e, ",") .. "}" or tostring(e) end
  return "{" .. table.concat(parts, ", ") .. "}"
end

local function global(rng, shape, dtype)
  return (H.global(shape, "int64") + rng.int(0, 5)):to(dtype)
end

for _, entry in ipairs(H.meshes()) do
  local name, mesh = entry[1], entry[2]
  describe("indexing DTensors on mesh " .. name, function()
    it("t[k] equals the global tensor's t[k] for random shapes, placements and keys", function()
      local rng = H.prng(71)
      for case = 1, 40 do
        local ndim = rng.int(1, 3)
        local shape = H.shape_of(rng, ndim)
        local dtype = rng.pick {"float32", "float64", "int64", "int32"}
        local G = global(rng, shape, dtype)
        local p = placements(rng, mesh, ndim, dtype)
        local x = dist(G, mesh, p)
        local k = random_key(rng, shape)
        local what = name .. " case " .. case .. " " .. H.placement_string(p) .. " shape {" ..
                         table.concat(shape, ",") .. "} key " .. key_string(k)
        same(x[k], G[k], what)
        assert.are.same(p, x.placements, what .. ": the input keeps its placements")
      end
    end)

    it("t[k] = v writes in place, keeping placements, equal to assigning into the global tensor", function()
      local rng = H.prng(72)
      for case = 1, 40 do
        local ndim = rng.int(1, 3)
        local shape = H.shape_of(rng, ndim)
        local dtype = rng.pick {"float32", "float64", "int64"}
        local G = global(rng, shape, dtype)
        local p = placements(rng, mesh, ndim, dtype)
        local x = dist(G, mesh, p)
        local local_before = x:to_local()
        local k = random_key(rng, shape)
        local region = G[k]
        local what = name .. " case " .. case .. " " .. H.placement_string(p) .. " shape {" ..
                         table.concat(shape, ",") .. "} key " .. key_string(k)
        local want = G:clone()
        local c = rng.int(1, 4)
        if c == 1 then -- a number
          want[k] = 1000 + case
          x[k] = 1000 + case
        elseif c == 2 then -- a one-element plain tensor
          want[k] = dt.tensor(-case)
          x[k] = dt.tensor(-case)
        else -- a DTensor of the region's shape (or a broadcast one), any placements
          local vshape = region:size()
          if c == 3 and #vshape > 0 then vshape[1] = 1 end
          if #vshape > 0 and rng.int(1, 3) == 1 then table.remove(vshape, 1) end
          local vdtype = rng.pick {"float64", "int64"}
          local V = global(rng, vshape, vdtype) + 300
          local v = dist(V, mesh, placements(rng, mesh, #vshape, vdtype))
          what = what .. " value " .. H.placement_string(v.placements) .. " {" .. table.concat(vshape, ",") .. "}"
          want[k] = V
          x[k] = v
        end
        assert.are.same(p, x.placements, what .. ": placements kept")
        assert(x:to_local():shares_storage(local_before), what .. ": written in place")
        same(x, want, what)
      end
    end)

    it("inside implicit_replication a plain tensor value is taken as replicated", function()
      local rng = H.prng(73)
      for case = 1, 10 do
        local shape = {rng.int(1, 6), rng.int(1, 6)}
        local G = global(rng, shape, "float64")
        local p = placements(rng, mesh, 2, "float64")
        local x = dist(G, mesh, p)
        local k = random_key(rng, shape)
        local V = G[k] * 0 + dt.arange(G[k]:numel()):reshape(G[k]:size()):to("float64")
        local want = G:clone()
        want[k] = V
        dt.implicit_replication(function() x[k] = V end)
        same(x, want, name .. " case " .. case .. " key " .. key_string(k))
      end
    end)

    it("t[k] along a dim that is not sharded issues no collective and stays sharded", function()
      local G = dt.arange(6 * 5):reshape(6, 5):to("float32")
      local x = dist(G, mesh, (function()
        local p = {}
        for m = 1, mesh.ndim do p[m] = dt.Shard(1) end
        return p
      end)())
      local y
      local c = dt.comm_debug(function() y = x[{{}, {2, 4}}] end)
      assert.are.equal(0, #c.ops)
      assert.are.same(x.placements, y.placements)
      same(y, G[{{}, {2, 4}}], "slice of dim 2")
      c = dt.comm_debug(function() y = x[{{1, -1}, -1}] end)
      assert.are.equal(0, #c.ops, "a whole-dim range keeps the sharding")
      same(y, G[{{1, -1}, -1}], "select of dim 2")
      c = dt.comm_debug(function() x[{{}, 3}] = 5 end)
      assert.are.equal(0, #c.ops, "a number is written without communication")
      G[{{}, 3}] = 5
      same(x, G, "assignment of a number")
      -- a value sharded like the target's whole dim moves nothing either
      local V = dt.arange(6):to("float32") * -1
      local v = dist(V, mesh, x.placements)
      c = dt.comm_debug(function() x[{{}, 2}] = v end)
      assert.are.equal(0, #c.ops, "a value sharded alike moves nothing")
      G[{{}, 2}] = V
      same(x, G, "assignment of a DTensor sharded alike")
    end)

    it("uneven shards with steps: each rank writes its own positions", function()
      local G = dt.arange((2 * n + 1) * 3):reshape(2 * n + 1, 3):to("float64")
      local p = {}
      for m = 1, mesh.ndim do p[m] = dt.Shard(1) end
      local x = dist(G, mesh, p)
      x[{{2, -1, 3}}] = dt.distribute_tensor(G[{{2, -1, 3}}] * 10, mesh, p, {src_rank = false})
      G[{{2, -1, 3}}] = G[{{2, -1, 3}}] * 10
      same(x, G, "stepped rows")
      same(x[{{1, -1, 2}, {3, 2, 1}}], G[{{1, -1, 2}, {3, 2, 1}}], "an empty range")
    end)

    it("errors are those of plain tensors, on every rank", function()
      local G = dt.arange(12):reshape(3, 4):to("float32")
      local p = {}
      for m = 1, mesh.ndim do p[m] = dt.Shard(2) end
      local x = dist(G, mesh, p)
      fails("indexing: index 5 out of range for dim 1 of size 3", function() return x[5] end)
      fails("indexing: index -4 out of range for dim 1 of size 3", function() return x[-4] end)
      fails("indexing: index 5 out of range for dim 2 of size 4", function() return x[{1, 5}] end)
      fails("indexing: range {2, 7} out of range for dim 2 of size 4", function() return x[{{}, {2, 7}}] end)
      fails("indexing: 3 entries for a 2-d tensor", function() return x[{1, 1, 1}] end)
      fails("indexing: step must be positive, got 0 in dim 1", function() return x[{{1, 2, 0}}] end)
      fails("indexing: index 5 out of range for dim 1 of size 3", function() x[5] = 1 end)
      fails("indexing assignment: value 300 cannot be converted to type uint8 without overflow", function()
        local u = dist(G:to("uint8"), mesh, p)
        u[1] = 300
      end)
      fails("indexing assignment: the value is a plain tensor of 4 elements assigned into a DTensor", function()
        x[1] = dt.ones(4)
      end)
      fails("indexing assignment: shape {3} does not broadcast to {4}", function()
        local r = {}
        for m = 1, mesh.ndim do r[m] = dt.Replicate() end
        x[1] = dist(dt.ones(3), mesh, r)
      end)
      fails("indexing assignment: the value is a DTensor and the tensor is not", function()
        local plain = dt.zeros(3, 4)
        plain[1] = x[1]
      end)
    end)
  end)
end

-- index_select on DTensors: random shapes, placements (Partial(sum) included) and indices
-- (replicated or sharded), against the same call on the global tensors.

-- a random x, dim and index of up to max_ids entries for index_select
local function select_case(rng, max_ids)
  local ndim = rng.int(1, 3)
  local shape = H.shape_of(rng, ndim, 1)
  local X, dim = global(rng, shape, "float64"), rng.int(1, ndim)
  local ids = {}
  for k = 1, rng.int(0, max_ids) do ids[k] = rng.int(1, shape[dim]) end
  return X, dim, dt.tensor(ids, {dtype = "int64"}), ndim
end

for _, entry in ipairs(H.meshes()) do
  local name, mesh = entry[1], entry[2]
  describe("index_select on DTensors on mesh " .. name, function()
    it("equals index_select of the global tensors; Partial(sum) stays Partial", function()
      local rng = H.prng(97)
      for case = 1, 20 do
        local X, dim, I, ndim = select_case(rng, 5)
        local px = placements(rng, mesh, ndim, true)
        local pi = placements(rng, mesh, 1, false)
        local x, i = dist(X, mesh, px), dist(I, mesh, pi)
        local y = x:index_select(dim, i)
        same(y, X:index_select(dim, I), "case " .. case .. ": x " .. H.placement_string(px) .. " index " .. H.placement_string(pi))
        for m = 1, mesh.ndim do
          local p = x.placements[m]
          if p:is_partial() then assert.is_true(y.placements[m]:is_partial(), "case " .. case .. ": Partial kept") end
          if p:is_shard() and p.dim ~= dim then assert.are.equal(tostring(p), tostring(y.placements[m])) end
        end
      end
    end)

    it("a sharded index over a replicated x moves nothing: the output is sharded on dim like the index", function()
      local rng = H.prng(98)
      for case = 1, 10 do
        local X, dim, I = select_case(rng, 9)
        local rep, pi = {}, {}
        for m = 1, mesh.ndim do rep[m], pi[m] = dt.Replicate(), rng.int(0, 1) == 1 and dt.Shard(1) or dt.Replicate() end
        local x, i = dist(X, mesh, rep), dist(I, mesh, pi)
        local y
        local c = dt.comm_debug(function() y = x:index_select(dim, i) end)
        local what = "case " .. case .. ": index " .. H.placement_string(pi)
        assert.are.equal(0, #c.ops, what .. ": no communication")
        same(y, X:index_select(dim, I), what)
        if mesh:get_coordinate() then
          for m = 1, mesh.ndim do
            assert.are.equal(tostring(pi[m]:is_shard() and dt.Shard(dim) or dt.Replicate()), tostring(y.placements[m]), what)
          end
        end
      end
    end)

    it("raises the plain call's errors on the mesh's ranks", function()
      local x = dist(global(H.prng(5), {3, 4}, "float64"), mesh, H.placements(H.prng(6), mesh, 2, false))
      local r = {}
      for m = 1, mesh.ndim do r[m] = dt.Replicate() end
      local i = dist(dt.tensor({1, 4}), mesh, r)
      if mesh:get_coordinate() then
        fails("index_select: index 4 out of range for dim 1 of size 3 (indices are 1-based: 1..3)", function()
          return x:index_select(1, i)
        end)
      end
      fails("index_select: index must be an int64 or int32 tensor, got float32", function()
        return x:index_select(1, i:float())
      end)
    end)
  end)
end

-- index_add on DTensors: random shapes and placements (Partial(sum) included) of x, the index
-- and the source, against the same call on the global tensors; the strategies that move
-- nothing (doc/dispatch.md); the errors of the plain call.
for _, entry in ipairs(H.meshes()) do
  local name, mesh = entry[1], entry[2]
  local R, S1 = {}, {}
  for m = 1, mesh.ndim do R[m], S1[m] = dt.Replicate(), dt.Shard(1) end
  describe("index_add on DTensors on mesh " .. name, function()
    it("equals index_add of the global tensors", function()
      local rng = H.prng(101)
      for case = 1, 30 do
        local ndim = rng.int(1, 3)
        local shape = H.shape_of(rng, ndim, 1)
        local dim = rng.int(1, ndim)
        local ids = {}
        for k = 1, rng.int(0, 6) do ids[k] = rng.int(1, shape[dim]) end
        local sshape = {table.unpack(shape)}
        sshape[dim] = #ids
        local X, Src, I = global(rng, shape, "float64"), global(rng, sshape, "float64"), dt.tensor(ids, {dtype = "int64"})
        local px, pi, ps = placements(rng, mesh, ndim, true), placements(rng, mesh, 1, false), placements(rng, mesh, ndim, true)
        local y = dist(X, mesh, px):index_add(dim, dist(I, mesh, pi), dist(Src, mesh, ps))
        same(y, X:index_add(dim, I, Src), "case " .. case .. ": x " .. H.placement_string(px) .. " index " ..
             H.placement_string(pi) .. " source " .. H.placement_string(ps) .. " dim " .. dim)
      end
    end)

    it("moves nothing for x sharded on the indexed dim (each rank adds its block's rows) or the index and source sharded alike (a Partial(sum) result counting x once)", function()
      local X = global(H.prng(3), {2 * n + 1, 3}, "float64")
      local ids = {}
      for k = 1, 2 * n + 1 do ids[k] = (k * 5) % (2 * n + 1) + 1 end
      ids[#ids + 1] = ids[1] -- a repeat
      local I, Src = dt.tensor(ids, {dtype = "int64"}), global(H.prng(4), {#ids, 3}, "float64")
      local want = X:index_add(1, I, Src)
      local y
      local c = dt.comm_debug(function() y = dist(X, mesh, S1):index_add(1, dist(I, mesh, R), dist(Src, mesh, R)) end)
      assert.are.equal(0, #c.ops, "x's block: no collective")
      for m = 1, mesh.ndim do assert.are.equal("Shard(1)", tostring(y.placements[m])) end
      same(y, want, "x sharded on the indexed dim")
      c = dt.comm_debug(function() y = dist(X, mesh, R):index_add(1, dist(I, mesh, S1), dist(Src, mesh, S1)) end)
      assert.are.equal(0, #c.ops, "index and source sharded alike: no collective")
      for m = 1, mesh.ndim do
        if mesh:shape()[m] > 1 then assert.is_true(y.placements[m]:is_partial(), "Partial(sum) on mesh dim " .. m) end
      end
      same(y, want, "index and source sharded")
    end)

    it("raises the plain call's errors on the mesh's ranks", function()
      local x = dist(global(H.prng(5), {7, 2}, "float64"), mesh, S1)
      local i, s = dist(dt.tensor({1, 9}), mesh, R), dist(dt.zeros(2, 2, {dtype = "float64"}), mesh, R)
      if mesh:get_coordinate() then
        fails("index_add: index 9 out of range for dim 1 of size 7 (indices are 1-based: 1..7)", function()
          return x:index_add(1, i, s)
        end)
      end
      fails("index_add: source dtype float32 differs from the tensor's float64", function() return x:index_add(1, i, s:float()) end)
    end)
  end)
end
