-- Acceptance of issue 6 (random numbers), its SPMD items: every rank runs this file
-- (dtlua -n 1..4, mpirun -np 2/4).  Every random op on every test mesh and placement is in
-- random_dtensor_spec.lua; here, the issue's own example.
local D = dt.distributed
local rank, n = dt.rank(), dt.world_size()

-- every rank's copy of a float64 1-d tensor, as a list of tables
local function everyone(t)
  local g = D.all_gather(t:to("float64"):reshape(1, t:numel()))
  return g:totable()
end

describe("issue 6: dt.manual_seed(s, {sync = true}) broadcasts from rank 0", function()
  it("gives every rank rank 0's seed and offset 0, so draws agree", function()
    dt.manual_seed(1000 + rank, {sync = true})
    assert.are.same({seed = 1000, offset = 0}, dt.get_rng_state())
    local all = everyone(dt.rand(5))
    for r = 2, n do assert.are.same(all[1], all[r]) end
    dt.manual_seed(1000)
    assert.are.same(all[1], dt.rand(5):to("float64"):totable())
  end)

  it("without sync each rank keeps its own seed; a non-boolean sync is an error", function()
    dt.manual_seed(1000 + rank)
    assert.are.equal(1000 + rank, dt.initial_seed())
    dt.manual_seed(5, {})
    assert.are.equal(5, dt.initial_seed())
    local ok, e = pcall(dt.manual_seed, 5, {sync = "yes"})
    assert.is_false(ok)
    assert.matches("manual_seed: option sync must be a boolean, got string", e, 1, true)
  end)
end)

describe("issue 6: the state after the op is equal on all ranks", function()
  it("the same seed gives the same plain-tensor draws and the same (seed, offset) everywhere", function()
    dt.manual_seed(7)
    local a = dt.randn(4, 6)
    local ints = dt.randint(0, 100, {7})
    local st = dt.get_rng_state()
    local all = everyone(a:flatten())
    for r = 2, n do assert.are.same(all[1], all[r]) end
    local alli = everyone(ints)
    for r = 2, n do assert.are.same(alli[1], alli[r]) end
    local states = D.all_gather(dt.tensor({st.seed, st.offset}, {dtype = "int64"})):totable()
    for r = 0, n - 1 do
      assert.are.same({7, st.offset}, {states[2 * r + 1], states[2 * r + 2]})
    end
    assert.are.equal(24 + 8, st.offset) -- 24 words rounded to 24, then 7 rounded up to 8
  end)
end)

describe("issue 6: a DTensor draw is the single-device draw", function()
  it("dt.manual_seed(7); dt.randn(4, 6) equals the full tensor of the same randn sharded {'S2'} on any mesh", function()
    dt.manual_seed(7)
    local plain = dt.randn(4, 6)
    local meshes = {dt.init_device_mesh("cpu", {n})}
    if n == 4 then meshes[2] = dt.init_device_mesh("cpu", {2, 2}) end
    for _, m in ipairs(meshes) do
      local p = {"S2"}
      for d = 2, m.ndim do p[d] = "S1" end
      dt.manual_seed(7)
      local x = dt.randn({4, 6}, {device_mesh = m, placements = p})
      assert.is_true(dt.equal(plain, x:full_tensor()))
      assert.are.same({seed = 7, offset = 24}, dt.get_rng_state())
    end
  end)
end)
