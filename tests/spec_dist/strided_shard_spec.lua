-- _StridedShard, SPMD (dtlua -n 1..4; doc/dtensor.md "_StridedShard"): flattening a
-- non-leading sharded dim moves no data and gives _StridedShard(dim, split_factor); pointwise
-- ops keep it, views back to the original shape restore the plain Shard, redistribute to and
-- from it and full_tensor give the single-device values bitwise -- random shapes (even,
-- uneven, zero-size), 1-d meshes and a 2x2 mesh, collectives counted with dt.comm_debug;
-- nested with a Shard of the same dim (FSDP + TP) on 2x2, 4x1, 1x4, 2x1 and 1x2 meshes, and
-- Shard(d) <-> _StridedShard(d, k) by one all_to_all.
local H = dofile((debug.getinfo(1, "S").source:match("^@(.*[/\\])") or "./") .. "dtensor_helpers.lua")
local rank, n = dt.rank(), dt.world_size()
local R, S, SS = dt.Replicate, dt.Shard, dt._StridedShard

local function meshes()
  local list = {{"1-d", dt.init_device_mesh("cpu", {n})}}
  if n == 4 then list[2] = {"2x2", dt.init_device_mesh("cpu", {2, 2})} end
  return list
end

local function silent(what, f) -- f moves no data
  local c = dt.comm_debug(f)
  assert(#c.ops == 0, ("%s: %d collectives, none expected"):format(what, #c.ops))
end

local function is(p, want, what)
  assert.are.equal(tostring(want), tostring(p), what)
end

-- the global x sharded on dim 2 of (a, b, c) over mesh dim 1 (and dim 3 over mesh dim 2 of a 2x2 mesh)
local function sharded(x, mesh)
  local p = {S(2)}
  if mesh.ndim == 2 then p[2] = S(3) end
  return H.dist(x, mesh, p), p
end

describe("_StridedShard placement", function()
  it("prints, compares and reads like PyTorch's (dims 1-based)", function()
    local p = SS(1, 4)
    assert.are.equal("_StridedShard(dim=1, sf=4)", tostring(p))
    assert.is_true(p == SS(1, {split_factor = 4}))
    assert.is_true(p == SS(1, {sf = 4}))
    assert.is_false(p == SS(1, 2))
    assert.is_false(p == S(1))
    assert.are.equal(1, p.dim)
    assert.are.equal(4, p.split_factor)
    assert.is_true(p:is_strided_shard())
    assert.is_false(p:is_shard()) -- not a box of the dim: code asking for Shard must not take it for one
  end)

  it("refuses bad arguments, naming them", function()
    H.fails("split_factor must be 1", SS, 1, 0)
    H.fails("split_factor must be an integer", SS, 1, "x")
    H.fails("dims are 1-based", SS, 0, 2)
    local mesh = dt.init_device_mesh("cpu", {n})
    H.fails("size 6 does not split into 4 equal blocks", dt.distribute_tensor, dt.zeros(6, 2), mesh, {SS(1, 4)})
    if n == 4 then
      local m2 = dt.init_device_mesh("cpu", {2, 2})
      H.fails("split tensor dim 1 by two factors neither of which divides the other (2 on mesh dim 1, 3 on mesh dim 2)",
        dt.distribute_tensor, dt.zeros(12, 2), m2, {SS(1, 2), SS(1, 3)})
    end
  end)
end)

describe("flattening a sharded dim", function()
  local rng = H.prng(4242)
  for _, mm in ipairs(meshes()) do
    local name, mesh = mm[1], mm[2]
    it("issues no collective and gives _StridedShard, on random shapes (" .. name .. ")", function()
      for case = 1, 24 do
        local a, b, c = rng.int(1, 5), rng.int(0, 9), rng.int(1, 4)
        if case % 6 == 0 then b = 2 * n end -- even
        local x = H.global({a, b, c}, "float32")
        local d = sharded(x, mesh)
        local what = ("case %d (%d, %d, %d) on %s"):format(case, a, b, c, name)
        local v, f
        local keeps = b > 1 -- a sharded size-1 dim merged with the next is replicated
        if keeps then
          silent(what .. " view", function() v = d:view(a * b, c) end)
          silent(what .. " flatten", function() f = d:flatten(1, 2) end)
          is(v.placements[1], a > 1 and SS(1, a) or S(1), what)
          is(f.placements[1], v.placements[1], what)
          if mesh.ndim == 2 then is(v.placements[2], S(2), what) end
        else
          v, f = d:view(a * b, c), d:flatten(1, 2)
        end
        assert.is_true(H.same(v:full_tensor(), x:view(a * b, c)), what)
        assert.is_true(H.same(f:full_tensor(), x:view(a * b, c)), what)
        -- pointwise ops keep it; the view back restores the Shard
        local y, back
        local work = function()
          y = v * 2 + v
          back = y:view(a, b, c)
        end
        if keeps then silent(what .. " pointwise and view back", work) else work() end
        if keeps then
          is(y.placements[1], v.placements[1], what)
          is(back.placements[1], S(2), what)
        end
        assert.is_true(H.same(back:full_tensor(), x * 2 + x), what)
        assert.is_true(H.same(y:full_tensor(), (x * 2 + x):view(a * b, c)), what)
      end
    end)
  end

  it("keeps _StridedShard through transpose and unsqueeze, and gathers it for other ops", function()
    local mesh = dt.init_device_mesh("cpu", {n})
    local x = H.global({3, 2 * n + 1, 4}, "float64")
    local v = H.dist(x, mesh, {S(2)}):view(3 * (2 * n + 1), 4)
    local t
    silent("transpose", function() t = v:t():unsqueeze(1) end)
    is(t.placements[1], SS(3, 3), "transpose")
    assert.is_true(H.same(t:full_tensor(), x:view(-1, 4):t():unsqueeze(1)))
    -- sum and matmul do not know it: replicated first, values still those of one device
    H.close(v:sum(1), x:view(-1, 4):sum(1), "sum")
    local w = dt.distribute_tensor(H.global({4, 2}, "float64"), mesh, {R()})
    H.close(v:matmul(w), x:view(-1, 4):matmul(w:full_tensor()), "matmul")
  end)

  it("replicates a dim it cannot keep (a sharded dim split across output dims)", function()
    local mesh = dt.init_device_mesh("cpu", {n})
    local x = H.global({2, 6, 4}, "float32")
    local v = H.dist(x, mesh, {S(2)}):view(4, 3, 4) -- 2*6 -> 4*3 cuts the 6
    assert.is_true(H.same(v:full_tensor(), x:view(4, 3, 4)))
  end)
end)

describe("redistribute with _StridedShard", function()
  local rng = H.prng(77)
  for _, mm in ipairs(meshes()) do
    local name, mesh = mm[1], mm[2]
    it("to and from Replicate and Shard, bitwise (" .. name .. ")", function()
      for case = 1, 12 do
        local a, b, c = rng.int(1, 4), rng.int(0, 7), rng.int(1, 5)
        local x = H.global({a, b, c}, "float64")
        local flat = x:view(a * b, c)
        local what = ("case %d (%d, %d, %d) on %s"):format(case, a, b, c, name)
        local v = sharded(x, mesh):view(a * b, c)
        local strided = {SS(1, a)}
        if mesh.ndim == 2 then strided[2] = S(2) end
        local d = dt.distribute_tensor(flat, mesh, strided)
        assert.is_true(H.same(d:full_tensor(), flat), what .. " distribute_tensor")
        if b > 1 then -- the view kept the shard: the same local elements
          assert.is_true(H.same(d:to_local(), v:to_local()), what .. " the view's shards")
        end
        local targets = {{R()}, {S(1)}, {S(2)}}
        if mesh.ndim == 2 then targets = {{R(), R()}, {S(1), S(2)}, {S(2), R()}, {R(), S(1)}} end
        for _, to in ipairs(targets) do
          local r = d:redistribute(mesh, to)
          assert.is_true(H.same(r:full_tensor(), flat), what .. " -> " .. H.placement_string(to))
          local back = r:redistribute(mesh, strided)
          assert.is_true(H.same(back:to_local(), d:to_local()), what .. " back from " .. H.placement_string(to))
        end
        -- from_local with the view's shards gives the same DTensor
        local fl = dt.from_local(d:to_local(), mesh, strided, {shape = {a * b, c}})
        assert.is_true(H.same(fl:full_tensor(), flat), what .. " from_local")
      end
    end)
  end

  it("gathers a _StridedShard with one all_gather of its bytes", function()
    local mesh = dt.init_device_mesh("cpu", {n})
    local x = H.global({4, 2 * n, 3}, "float32")
    local v = H.dist(x, mesh, {S(2)}):view(8 * n, 3)
    local c = dt.comm_debug(function() v:redistribute(mesh, {R()}) end)
    if n > 1 then
      assert.are.equal(1, #c.ops)
      assert.are.equal("all_gather", c.ops[1].name)
    end
  end)

  it("refuses what a _StridedShard cannot do in place, on every rank", function()
    local mesh = dt.init_device_mesh("cpu", {n})
    local v = H.dist(H.global({2, 2 * n, 2}, "float32"), mesh, {S(2)}):view(4 * n, 2)
    H.fails("_StridedShard", function() v:uniform_() end)
    H.fails("_StridedShard", function() v[1] = 3 end)
    H.fails("_StridedShard", function() dt.visualize_sharding(v) end)
  end)
end)

-- Nested: a dim sharded on two mesh dims, one of them a _StridedShard.  Its Shards chunk the
-- split blocks, its _StridedShards the inside of each block (FSDP + TP).
local function meshes2()
  if n == 4 then return {{"2x2", {2, 2}}, {"4x1", {4, 1}}, {"1x4", {1, 4}}} end
  if n == 2 then return {{"2x1", {2, 1}}, {"1x2", {1, 2}}} end
  return {}
end

local function names(c)
  local t = {}
  for _, o in ipairs(c.ops) do t[#t + 1] = o.name end
  return table.concat(t, " ")
end

describe("nested _StridedShard (FSDP + TP)", function()
  local rng = H.prng(2024)
  for _, mm in ipairs(meshes2()) do
    local name, mesh = mm[1], dt.init_device_mesh("cpu", mm[2])
    it("flattening a dim sharded on both mesh dims moves nothing, and views back (" .. name .. ")", function()
      -- {input placements of (a, b, c), flattened (a * b, c) placements when a, b > 1}
      local layouts = {
        {{S(2), S(1)}, function(a) return {SS(1, a), S(1)} end},
        {{S(1), S(2)}, function(a) return {S(1), SS(1, a)} end},
        {{S(2), S(2)}, function(a) return {SS(1, a), SS(1, a)} end},
      }
      for case = 1, 18 do
        local a, b, c = rng.int(2, 6), rng.int(2, 7), rng.int(0, 3)
        if case % 6 == 0 then a, b = 4, 4 end -- even
        local lay = layouts[(case - 1) % 3 + 1]
        local x = H.global({a, b, c}, case % 2 == 0 and "float64" or "int64")
        local what = ("case %d (%d, %d, %d) %s on %s"):format(case, a, b, c, H.placement_string(lay[1]), name)
        local d = H.dist(x, mesh, lay[1])
        local v, y, back, t
        silent(what .. " flatten", function() v = d:flatten(1, 2) end)
        for m, p in ipairs(lay[2](a)) do is(v.placements[m], p, what) end
        assert.is_true(H.same(v:full_tensor(), x:view(a * b, c)), what)
        assert.is_true(H.same(v:to_local(), d:to_local():flatten(1, 2)), what .. " the local view")
        local rep = dt.distribute_tensor(x:view(a * b, c), mesh, {R(), R()})
        silent(what .. " pointwise, transpose and view back", function()
          y = v * 2 + v + rep - rep
          t = y:t()
          back = y:view(a, b, c)
        end)
        for m = 1, 2 do
          is(y.placements[m], v.placements[m], what)
          is(back.placements[m], lay[1][m], what)
        end
        assert.is_true(H.same(y:full_tensor(), (x * 2 + x):view(a * b, c)), what)
        assert.is_true(H.same(t:full_tensor(), (x * 2 + x):view(a * b, c):t()), what)
        assert.is_true(H.same(back:full_tensor(), x * 2 + x), what)
        -- other ops gather it: the single-device values; random ops draw the one-device bits
        H.close(v:to("float64"):sum(1), x:view(a * b, c):to("float64"):sum(1), what .. " sum")
        local probs = (v:to("float32") * 0 + 0.5)
        dt.manual_seed(case)
        local drawn = dt.bernoulli(probs)
        dt.manual_seed(case)
        assert.is_true(H.same(drawn:full_tensor(), dt.bernoulli(probs:full_tensor())), what .. " bernoulli")
      end
    end)

    it("redistributes to and from Replicate and Shard, bitwise (" .. name .. ")", function()
      for case = 1, 10 do
        local k, b, c = rng.int(1, 5), rng.int(0, 6), rng.int(1, 3)
        if case % 5 == 0 then k, b = 4, 4 end
        local x = H.global({k * b, c}, "float32")
        local what = ("case %d (%d, %d) k = %d on %s"):format(case, k * b, c, k, name)
        for _, from in ipairs({{SS(1, k), S(1)}, {S(1), SS(1, k)}, {SS(1, k), SS(1, k)}}) do
          local d = dt.distribute_tensor(x, mesh, from)
          local w = what .. " " .. H.placement_string(from)
          assert.is_true(H.same(d:full_tensor(), x), w .. " distribute_tensor")
          local fl = dt.from_local(d:to_local(), mesh, from, {shape = {k * b, c}})
          assert.is_true(H.same(fl:full_tensor(), x), w .. " from_local")
          for _, to in ipairs({{R(), R()}, {S(1), R()}, {R(), S(1)}, {S(1), S(1)}, {S(2), S(1)}, {SS(1, k), R()}}) do
            local r = d:redistribute(mesh, to)
            assert.is_true(H.same(r:full_tensor(), x), w .. " -> " .. H.placement_string(to))
            assert.is_true(H.same(r:redistribute(mesh, from):to_local(), d:to_local()), w .. " back from " ..
              H.placement_string(to))
          end
        end
      end
    end)
  end

  if n == 4 then
    it("is FSDP over TP: each rank's rows of its TP shard, no data moved from TP", function()
      local mesh = dt.init_device_mesh("cpu", {2, 2}, {"dp", "tp"})
      local dp, tp = mesh:get_coordinate()[1], mesh:get_coordinate()[2]
      local x = H.global({8, 3}, "float32")
      local f
      local c = dt.comm_debug(function() f = H.dist(x, mesh, {R(), S(1)}):redistribute(mesh, {SS(1, 2), S(1)}) end)
      assert.are.equal(0, #c.ops)
      assert.is_true(H.same(f:to_local(), x:narrow(1, 1 + 4 * tp + 2 * dp, 2)))
      assert.are.equal("(_StridedShard(dim=1, sf=2), Shard(1))", tostring(f.placements[1]):gsub(".*", function()
        return "(" .. tostring(f.placements[1]) .. ", " .. tostring(f.placements[2]) .. ")"
      end))
      assert.is_truthy(tostring(f):find("placements=(_StridedShard(dim=1, sf=2), Shard(1))", 1, true))
      assert.is_true(f.placements[1] == SS(1, 2) and f.placements[2] == S(1))
      c = dt.comm_debug(function() f = f:redistribute(mesh, {R(), R()}) end)
      assert.are.equal("all_gather", names(c)) -- both mesh dims in one
      assert.is_true(H.same(f:to_local(), x))
    end)
  end
end)

describe("two-level _StridedShard (two sharded dims flattened into one)", function()
  local rng = H.prng(9696)
  it("moves nothing, holds the flattened local shard, gathers and views back (2x2)", function()
    if n ~= 4 then return end
    local mesh = dt.init_device_mesh("cpu", {2, 2})
    for case = 1, 16 do
      -- (a, b, c, e) with two dims sharded on different mesh dims, flattened whole: even
      -- (each sharded dim a multiple of 2), in either mesh-dim order
      local shape = {2 * rng.int(1, 3), 2 * rng.int(1, 3), 2 * rng.int(1, 2), rng.int(1, 3)}
      local d1, d2 = rng.int(1, 3), rng.int(1, 3)
      if d2 == d1 then d2 = d1 % 3 + 1 end
      local numel = shape[1] * shape[2] * shape[3] * shape[4]
      local x = H.global(shape, case % 2 == 0 and "float64" or "int64")
      local what = ("case %d (%s) {S(%d), S(%d)}"):format(case, table.concat(shape, ", "), d1, d2)
      local d = H.dist(x, mesh, {S(d1), S(d2)})
      local v, back
      silent(what .. " flatten", function() v = d:flatten() end)
      -- a Shard of the leading dim, else a _StridedShard of the product of the dims before it
      local function factor(dim)
        local k = 1
        for q = 1, dim - 1 do k = k * shape[q] end
        return k == 1 and S(1) or SS(1, k)
      end
      is(v.placements[1], factor(d1), what)
      is(v.placements[2], factor(d2), what)
      local coord = mesh:get_coordinate()
      local want = H.expected_local(x, mesh, {S(d1), S(d2)}, coord):contiguous():view(-1)
      assert.is_true(H.same(v:to_local(), want), what .. " the local shard")
      assert.is_true(H.same(v:full_tensor(), x:view(numel)), what .. " full_tensor")
      -- distribute_tensor with those placements holds the same shard
      assert.is_true(H.same(H.dist(x:view(numel), mesh, v.placements):to_local(), want), what .. " distribute_tensor")
      silent(what .. " view back", function() back = v:view(table.unpack(shape)) end)
      is(back.placements[1], S(d1), what)
      is(back.placements[2], S(d2), what)
      assert.is_true(H.same(back:to_local(), d:to_local()), what .. " view back")
      -- redistribute to Replicate and back, to a Shard and back
      local r = v:redistribute(mesh, {R(), R()})
      assert.is_true(H.same(r:to_local(), x:view(numel)), what .. " to Replicate")
      local again = r:redistribute(mesh, v.placements)
      assert.is_true(H.same(again:to_local(), want), what .. " from Replicate")
      local s = v:redistribute(mesh, {S(1), R()})
      assert.is_true(H.same(s:full_tensor(), x:view(numel)), what .. " to Shard")
      assert.is_true(H.same(s:redistribute(mesh, v.placements):to_local(), want), what .. " from Shard")
      -- pointwise ops keep it
      local y
      silent(what .. " pointwise", function() y = v * 2 + v end)
      is(y.placements[1], v.placements[1], what)
      assert.is_true(H.same(y:full_tensor(), (x * 2 + x):view(numel)), what .. " pointwise")
    end
  end)

  it("gathers an uneven inner dim first, as PyTorch refuses it", function()
    if n ~= 4 then return end
    local mesh = dt.init_device_mesh("cpu", {2, 2})
    local x = H.global({4, 3, 6}, "float32")
    local v = H.dist(x, mesh, {S(3), S(2)}):flatten()
    assert.is_true(H.same(v:full_tensor(), x:view(72)))
    assert.is_true(H.same(v:view(4, 3, 6):full_tensor(), x))
  end)
end)

describe("Shard(d) <-> _StridedShard(d, k)", function()
  local rng = H.prng(99)
  it("is one all_to_all when k is a multiple of the shard count, bitwise", function()
    local mesh = dt.init_device_mesh("cpu", {n})
    for case = 1, 10 do
      local k, b, c = n * rng.int(1, 3), rng.int(0, 5), rng.int(1, 3)
      local x = H.global({k * b, c}, "float64")
      local what = ("case %d (%d, %d) k = %d"):format(case, k * b, c, k)
      local s, ss = H.dist(x, mesh, {S(1)}), nil
      local c1 = dt.comm_debug(function() ss = s:redistribute(mesh, {SS(1, k)}) end)
      assert.is_true(H.same(ss:full_tensor(), x), what)
      assert.is_true(H.same(ss:to_local(), dt.distribute_tensor(x, mesh, {SS(1, k)}):to_local()), what)
      local back
      local c2 = dt.comm_debug(function() back = ss:redistribute(mesh, {S(1)}) end)
      assert.is_true(H.same(back:to_local(), s:to_local()), what)
      if n > 1 then
        assert.are.equal("all_to_all", names(c1), what)
        assert.are.equal("all_to_all", names(c2), what)
      end
    end
  end)

  it("goes through Replicate otherwise, with the same values", function()
    local mesh = dt.init_device_mesh("cpu", {n})
    local x = H.global({6 * n, 2}, "float32")
    local ss = H.dist(x, mesh, {S(1)}):redistribute(mesh, {SS(1, 3)})
    assert.is_true(H.same(ss:full_tensor(), x))
    assert.is_true(H.same(ss:redistribute(mesh, {S(1)}):to_local(), H.dist(x, mesh, {S(1)}):to_local()))
  end)
end)
