-- _StridedShard, SPMD (dtlua -n 1..4; doc/dtensor.md "_StridedShard"): flattening a
-- non-leading sharded dim moves no data and gives _StridedShard(dim, split_factor); pointwise
-- ops keep it, views back to the original shape restore the plain Shard, redistribute to and
-- from it and full_tensor give the single-device values bitwise -- random shapes (even,
-- uneven, zero-size), 1-d meshes and a 2x2 mesh, collectives counted with dt.comm_debug.
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
      H.fails("one of them a _StridedShard", dt.distribute_tensor, dt.zeros(8, 2), m2, {SS(1, 2), S(1)})
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
