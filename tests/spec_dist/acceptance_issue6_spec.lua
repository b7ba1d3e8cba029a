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
      assert.is_true(dt.equal(plain, dt.full_tensor(x))) -- the function form, as the issue writes it
      assert.is_true(dt.equal(plain, x:full_tensor()))
      assert.are.same({seed = 7, offset = 24}, dt.get_rng_state())
    end
    local ok, e = pcall(dt.full_tensor, plain)
    assert.is_false(ok)
    assert.matches("full_tensor: expected a DTensor, got a plain tensor", e, 1, true)
  end)
end)

-- ---- Items checked by the acceptance review (tests every rank runs alike) ----
local H = dofile((debug.getinfo(1, "S").source:match("^@(.*[/\\])") or "./") .. "dtensor_helpers.lua")

local states_agree = H.rng_states_agree

-- The plain call at `state`, then the DTensor call at the same state: the full tensor (on
-- mesh ranks) is bitwise the plain result and every rank ends where the plain op ended.
local function same_draw(what, state, plain, dist)
  dt.set_rng_state(state)
  local ref = plain()
  local after = dt.get_rng_state()
  dt.set_rng_state(state)
  local d = dist()
  local on_mesh = d.device_mesh:get_coordinate() ~= nil
  local full = on_mesh and d:full_tensor() -- collectives before any assertion
  local agree = states_agree()
  if on_mesh then assert.is_true(H.same(full, ref), what .. ": full tensor differs from the plain draw") end
  assert.are.same(after, dt.get_rng_state(), what .. ": state after the op")
  assert.is_true(agree, what .. ": ranks' states differ")
end

describe("issue 6 (review): every dtype each op supports, on every test mesh and random placements", function()
  it("randint in float and bool dtypes, randperm in float and narrow int dtypes, bernoulli(p) on int/bool tensors", function()
    local rng = H.prng(6061)
    for _, mm in ipairs(H.meshes()) do
      local mesh = mm[2]
      for _, dtype in ipairs(H.DTYPES) do
        local shape = H.shape_of(rng, rng.int(1, 3), 0, 6)
        local p = H.placements(rng, mesh, #shape, false)
        local what = string.format("%s on %s, {%s}, %s", dtype, mm[1], table.concat(shape, ","), H.placement_string(p))
        local st = {seed = rng.int(0, 99999), offset = 4 * rng.int(0, 100)}
        local hi = dtype == "bool" and 2 or 100
        same_draw("randint " .. what, st, function() return dt.randint(0, hi, shape, {dtype = dtype}) end,
                  function() return dt.randint(0, hi, shape, {device_mesh = mesh, placements = p, dtype = dtype}) end)
        same_draw("bernoulli(0.4) " .. what, st, function() return dt.zeros(shape, {dtype = dtype}):bernoulli(0.4) end,
                  function() return H.dist(dt.zeros(shape, {dtype = dtype}), mesh, p):bernoulli(0.4) end)
        if dtype ~= "bool" then
          local k = rng.int(0, 60)
          same_draw("randperm(" .. k .. ") " .. what, st, function() return dt.randperm(k, {dtype = dtype}) end,
                    function() return dt.randperm(k, {device_mesh = mesh, dtype = dtype}) end)
        end
        if dtype:match("float") then
          local x = H.dist(dt.zeros(shape, {dtype = "float64"}), mesh, p)
          same_draw("rand_like(dtype=) " .. what, st, function() return dt.rand_like(dt.zeros(shape), {dtype = dtype}) end,
                    function() return dt.rand_like(x, {dtype = dtype}) end)
        end
      end
    end
  end)

  it("an offset that is not a multiple of 4 (set_rng_state) still gives the plain draw", function()
    local rng = H.prng(6062)
    for _, mm in ipairs(H.meshes()) do
      local mesh = mm[2]
      for _, off in ipairs({1, 3, 6}) do
        local shape = H.shape_of(rng, 2, 1, 7)
        local p = H.placements(rng, mesh, 2, false)
        local what = string.format("offset %d on %s, {%s}, %s", off, mm[1], table.concat(shape, ","), H.placement_string(p))
        local st = {seed = 77, offset = off}
        same_draw("rand " .. what, st, function() return dt.rand(shape) end,
                  function() return dt.rand(shape, {device_mesh = mesh, placements = p}) end)
        same_draw("randn float64 " .. what, st, function() return dt.randn(shape, {dtype = "float64"}) end,
                  function() return dt.randn(shape, {device_mesh = mesh, placements = p, dtype = "float64"}) end)
        same_draw("randint 64-bit " .. what, st, function() return dt.randint(0, 1 << 40, shape) end,
                  function() return dt.randint(0, 1 << 40, shape, {device_mesh = mesh, placements = p}) end)
      end
    end
  end)

  it("factories take the current mesh (mesh:use()) when opts give placements only", function()
    local mesh = dt.init_device_mesh("cpu", {n})
    dt.manual_seed(21)
    local ref, refp = dt.randn(5, 3), dt.randperm(6)
    dt.manual_seed(21)
    local x, p
    do
      local _ <close> = mesh:use()
      x = dt.randn({5, 3}, {placements = {"S1"}})
      p = dt.randperm(6, {placements = {"R"}})
    end
    assert.are.equal(mesh, x.device_mesh)
    assert.is_true(H.same(x:full_tensor(), ref))
    assert.is_true(H.same(p:full_tensor(), refp))
  end)
end)

describe("issue 6 (review): errors of DTensor random calls name the call", function()
  local mesh = dt.init_device_mesh("cpu", {n})
  local function fails_alone(pattern, f, ...) -- the error, and the state left alone
    local before = dt.get_rng_state()
    H.fails(pattern, f, ...)
    assert.are.same(before, dt.get_rng_state())
  end

  it("rand_like / randn_like with an integer dtype name themselves, not rand", function()
    local xi = H.dist(dt.zeros(4, {dtype = "int32"}), mesh, {"S1"})
    fails_alone("rand_like: dtype must be a floating dtype (float32, float64, bfloat16, float16), got int32", dt.rand_like, xi)
    fails_alone("randn_like: dtype must be a floating dtype (float32, float64, bfloat16, float16), got int64",
                dt.randn_like, H.dist(dt.zeros(4), mesh, {"S1"}), {dtype = "int64"})
  end)

  it("an unknown dtype on a mesh factory names the factory", function()
    fails_alone("rand: option dtype: unknown dtype 'foo'", dt.rand, {4}, {device_mesh = mesh, dtype = "foo"})
    fails_alone("randint: option dtype: must be a string", dt.randint, 0, 3, {4}, {device_mesh = mesh, dtype = 5})
    fails_alone("randperm: option dtype: unknown dtype 'i8'", dt.randperm, 4, {device_mesh = mesh, dtype = "i8"})
    -- the other mesh factories name themselves too
    for _, name in ipairs {"zeros", "ones", "empty"} do
      fails_alone("bad argument #2 to '" .. name .. "' (option dtype: unknown dtype 'foo'", dt[name], {4}, {device_mesh = mesh, dtype = "foo"})
    end
    fails_alone("bad argument #3 to 'full' (option dtype: unknown dtype 'foo'", dt.full, {4}, 1, {device_mesh = mesh, dtype = "foo"})
  end)
end)
