-- Random ops on DTensors (the RNG tracker region): for every op, dtype, random
-- shapes (sizes 0..7, uneven) and random placements on the meshes of this world (1-d, 2-d,
-- permuted, nested Shard, meshes without some ranks), the full tensor is bitwise the
-- single-device draw made at the same (seed, offset) with plain tensors, and the generator
-- state after the op is the plain op's, equal on every rank of the world (off-mesh ranks
-- included).  Cases come from a PRNG seeded alike on every rank.
local H = dofile((debug.getinfo(1, "S").source:match("^@(.*[/\\])") or "./") .. "dtensor_helpers.lua")
local F = dt.nn.functional
local n = dt.world_size()

local FLOATS = {"float32", "float64", "bfloat16", "float16"}
local INTS = {"int64", "int32", "uint8"}

local function meshes()
  local list = H.meshes()
  if n == 2 then list[#list + 1] = {"1-d of rank 1 only", dt.DeviceMesh("cpu", {1})} end
  return list
end

local function random_shape(rng)
  local shape = {}
  for d = 1, rng.int(1, 3) do shape[d] = rng.int(0, 7) end
  return shape
end

-- One placement per mesh dim: Replicate or Shard of a random dim (negative dims too, and the
-- same dim on several mesh dims: nested sharding); Partial(op) when allowed.
local function random_placements(rng, mesh, ndim, partial_ops)
  local p = {}
  for m = 1, mesh.ndim do
    local k = rng.int(1, partial_ops and 4 or 3)
    if k == 1 then p[m] = dt.Replicate()
    elseif k == 4 then p[m] = dt.Partial(rng.pick(partial_ops))
    else
      local d = rng.int(1, ndim)
      if rng.int(1, 4) == 1 then d = d - ndim - 1 end
      p[m] = dt.Shard(d)
    end
  end
  return p
end

local function normalised(p, ndim) -- what the result's placements read back as
  local out = {}
  for m, q in ipairs(p) do out[m] = q:is_shard() and q.dim < 0 and dt.Shard(q.dim + ndim + 1) or q end
  return out
end

local function replicate_partial(p)
  local out = {}
  for m, q in ipairs(p) do out[m] = q:is_partial() and dt.Replicate() or q end
  return out
end

local function same_state(a, b) return a.seed == b.seed and a.offset == b.offset end

local state_agrees = H.rng_states_agree -- every rank of the world holds the same (seed, offset)

-- A fresh position: a random seed and a random offset (a multiple of 4), alike on all ranks.
local function fresh_state(rng)
  dt.set_rng_state({seed = rng.int(0, 1000000) * 7919, offset = 4 * rng.int(0, 5000)})
end

-- Runs plain(), then restores the state: the single-device draw and the state after it.
local function reference(plain)
  return dt.fork_rng(function()
    local r = table.pack(plain())
    return r, dt.get_rng_state()
  end)
end

-- Checks a DTensor result against the plain one (full tensor bitwise on mesh ranks), its
-- placements, and the state after the op against the plain op's, on every rank.  The
-- collectives run before any assertion, so a failure on one rank cannot desynchronise them.
local function check(what, d, ref, ref_state, placements)
  assert.is_true(dt.is_dtensor(d), what)
  local on_mesh = d.device_mesh:get_coordinate() ~= nil
  local same_values = on_mesh and H.same(d:full_tensor(), ref)
  local agrees = state_agrees()
  if placements then
    assert.are.equal(H.placement_string(placements), H.placement_string(d.placements), what .. ": placements")
  end
  assert.are.same(ref:size(), d:size(), what .. ": global shape")
  if on_mesh then
    assert.is_true(same_values, what .. ": full_tensor differs from the single-device draw")
  else
    assert.are.equal(0, d:to_local():numel(), what .. ": off-mesh local")
  end
  assert.is_true(same_state(dt.get_rng_state(), ref_state), what .. ": state after the op differs from the plain op's")
  assert.is_true(agrees, what .. ": ranks' states differ after the op")
end

local function describe_case(name, mesh, shape, dtype, p)
  return string.format("%s on %s, shape {%s}, %s, %s", name, mesh, table.concat(shape, ","), dtype, H.placement_string(p))
end

-- Every rank holds the global tensor: each chunks its own (no communication; any mesh).
local function distribute(g, mesh, p) return dt.distribute_tensor(g, mesh, p, {src_rank = false}) end

-- A DTensor input of the global tensor g with placements p (Partial as distribute_tensor
-- makes it: sum on coordinate 0, the value everywhere for avg/max/min), and the global value
-- a mesh rank reads back.
local function input(g, mesh, p)
  local x = distribute(g, mesh, p)
  local full = mesh:get_coordinate() and x:full_tensor() or g
  return x, full
end

local function probabilities(shape, dtype)
  return H.global(shape, "float64"):div(199):to(dtype) -- in [0, 1], exact in every float dtype's rounding
end

-- For each mesh of this world and each dtype: fn(rng, what, mesh, dtype, shape, placements)
-- with a random shape (shape_fn(rng) when given) and random placements (Partial ones with
-- the ops of partial_ops, when given).
local function each_case(seed, name, dtypes, partial_ops, fn, shape_fn)
  local rng = H.prng(seed)
  for _, mm in ipairs(meshes()) do
    for _, dtype in ipairs(dtypes) do
      local shape = (shape_fn or random_shape)(rng)
      local p = random_placements(rng, mm[2], #shape, partial_ops)
      fn(rng, describe_case(name, mm[1], shape, dtype, p), mm[2], dtype, shape, p)
    end
  end
end

-- The plain op's results and the state after it, from a fresh position left current.
local function at_fresh_state(rng, plain)
  fresh_state(rng)
  return reference(plain)
end

local function replicated(mesh)
  local rep = {}
  for m = 1, mesh.ndim do rep[m] = dt.Replicate() end
  return rep
end

describe("random DTensor factories", function()
  it("rand and randn on every mesh and placement equal the single-device draw", function()
    for i, op in ipairs {"rand", "randn"} do
      each_case(60 + i, op, FLOATS, nil, function(rng, what, mesh, dtype, shape, p)
        local ref, st = at_fresh_state(rng, function() return dt[op](shape, {dtype = dtype}) end)
        check(what, dt[op](shape, {device_mesh = mesh, placements = p, dtype = dtype}), ref[1], st, normalised(p, #shape))
      end)
    end
  end)

  it("randint in every integer dtype; the 2-argument form, 64-bit ranges, float dtypes as for plain tensors", function()
    each_case(63, "randint", INTS, nil, function(rng, what, mesh, dtype, shape, p)
      local lo = dtype == "uint8" and 0 or rng.int(-50, 5)
      local hi = lo + rng.int(1, dtype == "uint8" and 200 or 100000)
      local ref, st = at_fresh_state(rng, function() return dt.randint(lo, hi, shape, {dtype = dtype}) end)
      check(what, dt.randint(lo, hi, shape, {device_mesh = mesh, placements = p, dtype = dtype}), ref[1], st,
            normalised(p, #shape))
    end)
    each_case(64, "randint forms", {"int64"}, nil, function(rng, what, mesh, _, shape, p)
      local opts = {device_mesh = mesh, placements = p}
      local ref, st = at_fresh_state(rng, function() return dt.randint(9, shape) end)
      check(what .. " randint(high)", dt.randint(9, shape, opts), ref[1], st)
      ref, st = reference(function() return dt.randint(-(1 << 40), 1 << 40, shape) end) -- 2 words per element
      check(what .. " 64-bit range", dt.randint(-(1 << 40), 1 << 40, shape, opts), ref[1], st)
      ref, st = reference(function() return dt.randint(0, 100, shape, {dtype = "bfloat16"}) end)
      opts.dtype = "bfloat16"
      check(what .. " bfloat16", dt.randint(0, 100, shape, opts), ref[1], st)
    end)
  end)

  it("rand_like and randn_like keep a DTensor's placements (Partial becomes Replicate)", function()
    for i, op in ipairs {"rand_like", "randn_like"} do
      each_case(64 + i, op, FLOATS, {"sum", "max"}, function(rng, what, mesh, dtype, shape, p)
        local x = distribute(dt.zeros(shape, {dtype = dtype}), mesh, p)
        local ref, st = at_fresh_state(rng, function() return dt[op](dt.zeros(shape, {dtype = dtype})) end)
        check(what, dt[op](x), ref[1], st, replicate_partial(normalised(p, #shape)))
      end)
    end
  end)

  it("randperm on a mesh is replicated and equals the plain permutation", function()
    local rng = H.prng(67)
    for _, mm in ipairs(meshes()) do
      local k, rep = rng.int(0, 40), replicated(mm[2])
      local ref, st = at_fresh_state(rng, function() return dt.randperm(k) end)
      check("randperm(" .. k .. ") on " .. mm[1], dt.randperm(k, {device_mesh = mm[2]}), ref[1], st, rep)
      ref, st = reference(function() return dt.randperm(k, {dtype = "int32"}) end)
      check("randperm int32 on " .. mm[1], dt.randperm(k, {device_mesh = mm[2], placements = rep, dtype = "int32"}),
            ref[1], st, rep)
    end
  end)
end)

describe("random ops on DTensor inputs", function()
  it("uniform_ and normal_ fill in place, keep the placements (Partial too), full_tensor is the draw", function()
    for i, op in ipairs {"uniform_", "normal_"} do
      each_case(70 + i, op, FLOATS, {"sum", "max", "min"}, function(rng, what, mesh, dtype, shape, p)
        local a, b = rng.int(-3, 0), rng.int(1, 4)
        local x = distribute(dt.full(shape, 5, {dtype = dtype}), mesh, p)
        local ref, st = at_fresh_state(rng, function()
          local t = dt.full(shape, 5, {dtype = dtype})
          return t[op](t, a, b)
        end)
        check(what, op == "uniform_" and x:uniform_(a, b) or dt.normal_(x, a, b), ref[1], st, normalised(p, #shape))
        if mesh:get_coordinate() then -- in place: x itself holds the draw
          assert.is_true(H.same(x:full_tensor(), ref[1]), what .. ": x itself")
        end
      end)
    end
  end)

  it("uniform_ on Partial(sum): the draw on coordinate 0 of the Partial dims, zeros elsewhere", function()
    if n < 2 then return end
    local mesh = dt.init_device_mesh("cpu", {n})
    local x = distribute(dt.zeros(5, 3), mesh, {dt.Partial("sum")})
    local ref = at_fresh_state(H.prng(73), function() return dt.zeros(5, 3):uniform_() end)[1]
    x:uniform_()
    local coord = mesh:get_coordinate()[1]
    assert.is_true(H.same(x:to_local(), coord == 0 and ref or dt.zeros(5, 3)))
    assert.are.equal("Partial(sum)", tostring(x.placements[1]))
  end)

  it("uniform_ on Partial(avg) writes the draw on every rank (the average is the draw)", function()
    local rng = H.prng(74)
    for _, mm in ipairs(meshes()) do
      local mesh, p = mm[2], replicated(mm[2])
      p[1] = dt.Partial("avg")
      local x = distribute(dt.zeros(4, 3, {dtype = "float64"}), mesh, p)
      local ref, st = at_fresh_state(rng, function() return dt.zeros(4, 3, {dtype = "float64"}):uniform_() end)
      x:uniform_()
      assert.is_true(same_state(dt.get_rng_state(), st) and state_agrees(), mm[1])
      if mesh:get_coordinate() then
        assert.is_true(H.same(x:to_local(), ref[1]), mm[1] .. ": local")
        assert.is_true(dt.allclose(x:full_tensor(), ref[1], 1e-12, 0), mm[1] .. ": full") -- avg of equal values
      end
    end
  end)

  it("bernoulli of DTensor probabilities follows their placements (Partial redistributed first)", function()
    each_case(75, "bernoulli", FLOATS, {"sum", "max", "min"}, function(rng, what, mesh, dtype, shape, p)
      local probs, full = input(probabilities(shape, dtype), mesh, p)
      local ref, st = at_fresh_state(rng, function() return dt.bernoulli(full) end)
      local d = rng.int(1, 2) == 1 and dt.bernoulli(probs) or probs:bernoulli()
      check(what, d, ref[1], st, replicate_partial(normalised(p, #shape)))
    end)
  end)

  it("x:bernoulli(p) with a scalar p: x's shape, dtype and placements (Partial -> Replicate)", function()
    each_case(76, "bernoulli(p)", FLOATS, {"sum", "avg"}, function(rng, what, mesh, dtype, shape, p)
      local x = distribute(dt.zeros(shape, {dtype = dtype}), mesh, p)
      local prob = rng.int(0, 10) / 10
      local ref, st = at_fresh_state(rng, function() return dt.zeros(shape, {dtype = dtype}):bernoulli(prob) end)
      check(what .. " p = " .. prob, x:bernoulli(prob), ref[1], st, replicate_partial(normalised(p, #shape)))
    end)
  end)

  it("dropout: output and mask follow x (Partial -> Replicate); the backward reuses the mask", function()
    each_case(77, "dropout", FLOATS, {"sum", "max"}, function(rng, what, mesh, dtype, shape, p)
      local x, full = input(H.global(shape, dtype), mesh, p)
      local prob = rng.pick {0, 0.1, 0.5, 0.9, 1}
      what = what .. " p = " .. prob
      local ref, st = at_fresh_state(rng, function() return dt._dropout(full, prob) end)
      local y, keep = dt._dropout(x, prob)
      local want = replicate_partial(normalised(p, #shape))
      check(what .. " output", y, ref[1], st, want)
      check(what .. " mask", keep, ref[2], st, want)
      -- the backward: grad with the output's placements, or Partial(sum) on a mesh dim
      local gp = {}
      for m, q in ipairs(want) do gp[m] = (q:is_replicate() and rng.int(1, 2) == 1) and dt.Partial("sum") or q end
      local grad, gfull = input(H.global(shape, dtype):add(1), mesh, gp)
      local back = dt._dropout_backward(grad, keep, prob)
      check(what .. " backward", back, dt._dropout_backward(gfull, ref[2], prob), st)
      if mesh:get_coordinate() and prob < 1 then -- where the forward kept, the backward passes
        assert.is_true(dt.equal(back:full_tensor():ne(0), keep:full_tensor()), what .. ": masks disagree")
      end
    end)
  end)

  it("F.dropout on DTensors: training draws like dt._dropout, eval and p = 0 return x", function()
    each_case(78, "F.dropout", {"float32"}, {"sum"}, function(rng, what, mesh, dtype, shape, p)
      local x, full = input(H.global(shape, dtype), mesh, p)
      local ref, st = at_fresh_state(rng, function() return F.dropout(full, 0.3) end)
      check(what, F.dropout(x, 0.3, true), ref[1], st, replicate_partial(normalised(p, #shape)))
      assert.are.equal(x, F.dropout(x, 0.3, false))
      assert.are.equal(x, F.dropout(x, 0))
    end)
  end)

  it("multinomial: input redistributed to Replicate, output Replicate, the plain draw", function()
    local function weights_shape(rng) return rng.int(1, 2) == 1 and {rng.int(1, 7)} or {rng.int(0, 4), rng.int(1, 7)} end
    each_case(79, "multinomial", FLOATS, {"sum", "max"}, function(rng, what, mesh, dtype, shape, p)
      local w = H.global(shape, "float64"):remainder(7):add(1):to(dtype) -- positive weights
      local x, full = input(w, mesh, p)
      local k, repl = rng.int(1, shape[#shape]), rng.int(1, 2) == 1
      local ref, st = at_fresh_state(rng, function() return full:multinomial(k, repl) end)
      check(what, x:multinomial(k, repl), ref[1], st, replicated(mesh))
    end, weights_shape)
  end)

  it("a rank outside the mesh advances its offset like the mesh ranks", function()
    if n < 2 then return end
    local mesh = dt.DeviceMesh("cpu", {n - 1}) -- only the last rank
    fresh_state(H.prng(79))
    local before = dt.get_rng_state()
    local x = dt.rand({6, 5}, {device_mesh = mesh, placements = {dt.Shard(1)}})
    x:normal_()
    local _, keep = dt._dropout(x, 0.5)
    dt.randint(0, 5, {3}, {device_mesh = mesh})
    assert.is_true(state_agrees())
    local words = 32 + 32 + 32 + 4 -- three ops over 30 elements (rounded to 32), then 3 -> 4
    assert.are.equal(before.offset + words, dt.get_rng_state().offset)
    assert.are.same({6, 5}, keep:size())
  end)
end)

describe("errors of random ops on DTensors, on every rank, leaving the state alone", function()
  local mesh = dt.init_device_mesh("cpu", {n})
  local function fails(pattern, fn, ...)
    local before = dt.get_rng_state()
    local ok, e = pcall(fn, ...)
    assert.is_false(ok)
    assert.matches(pattern, tostring(e), 1, true)
    assert.is_true(same_state(before, dt.get_rng_state()))
  end

  it("bad dtypes", function()
    fails("randint: values in [0, 1000) do not fit dtype bfloat16", dt.randint, 0, 1000, {4},
          {device_mesh = mesh, dtype = "bfloat16"})
    fails("rand: dtype must be a floating dtype", dt.rand, {4}, {device_mesh = mesh, dtype = "int32"})
    local xi = distribute(dt.zeros(4, {dtype = "int64"}), mesh, {dt.Shard(1)})
    fails("uniform_: the tensor must be a floating dtype", function() return xi:uniform_() end)
    fails("dropout: input must be a floating dtype", dt._dropout, xi, 0.5)
    fails("multinomial: probabilities must be a floating dtype", function() return xi:multinomial(1) end)
  end)

  it("bad placements", function()
    fails("randint: Shard(3) on mesh dim 1 is out of range for a 2-d tensor", dt.randint, 0, 5, {3, 4},
          {device_mesh = mesh, placements = {dt.Shard(3)}})
    fails("randn: Shard(-3) on mesh dim 1 is out of range for a 2-d tensor", dt.randn, {3, 4},
          {device_mesh = mesh, placements = {dt.Shard(-3)}})
    fails("randint: low must be an integer, got number", dt.randint, 0.5, 5, {3}, {device_mesh = mesh})
    fails("randint: factories take Shard and Replicate placements only", dt.randint, 0, 5, {3},
          {device_mesh = mesh, placements = {dt.Partial()}})
    fails("randperm: gives a replicated DTensor", dt.randperm, 5, {device_mesh = mesh, placements = {dt.Shard(1)}})
    fails("randperm: n must be >= 0, got -1", dt.randperm, -1, {device_mesh = mesh})
  end)

  it("probabilities outside [0, 1]", function()
    local x = distribute(dt.ones(5, 2), mesh, {dt.Shard(1)})
    fails("dropout: probability p must be in [0, 1], got 1.5", dt._dropout, x, 1.5)
    fails("dropout: p must be a number in [0, 1], got -0.1", F.dropout, x, -0.1)
    fails("bernoulli: probability must be in [0, 1], got 1.5", function() return x:bernoulli(1.5) end)
    -- one bad value, on the last rank's shard only: every rank raises
    local probs = distribute(dt.tensor({0.5, 0.5, 0.5, 0.5, 2}), mesh, {dt.Shard(1)})
    fails("bernoulli: ", dt.bernoulli, probs)
    local w = distribute(dt.tensor({1, 2, -1}, {dtype = "float32"}), mesh, {dt.Shard(1)})
    fails("multinomial: ", function() return w:multinomial(1) end)
  end)

  it("dt.explain describes a random op without running it", function()
    local x = distribute(dt.ones(4), mesh, {dt.Partial()})
    local before = dt.get_rng_state()
    local text = dt.explain("bernoulli", x)
    assert.matches("bernoulli((Partial(sum))): a random op, no strategy choice", text, 1, true)
    assert.matches("-> output (Replicate())", text, 1, true)
    assert.is_true(same_state(before, dt.get_rng_state()))
  end)
end)

-- manual_seed {sync = true}, the state equal on all ranks after each op, a DTensor draw equal to
-- the single-device draw; every dtype each op supports; errors naming the call.
do

  local D = dt.distributed
  local rank, n = dt.rank(), dt.world_size()

  -- every rank's copy of a float64 1-d tensor, as a list of tables
  local function everyone(t)
    local g = D.all_gather(t:to("float64"):reshape(1, t:numel()))
    return g:totable()
  end

  describe("dt.manual_seed(s, {sync = true}) broadcasts from rank 0", function()
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

  describe("the state after the op is equal on all ranks", function()
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

  describe("a DTensor draw is the single-device draw", function()
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
        assert.is_true(dt.equal(plain, dt.full_tensor(x))) -- the function form, as doc/random.md writes it
        assert.is_true(dt.equal(plain, x:full_tensor()))
        assert.are.same({seed = 7, offset = 24}, dt.get_rng_state())
      end
      local ok, e = pcall(dt.full_tensor, plain)
      assert.is_false(ok)
      assert.matches("full_tensor: expected a DTensor, got a plain tensor", e, 1, true)
    end)
  end)

  -- ---- Every dtype, odd offsets, the current mesh, errors (every rank runs them alike) ----
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

  describe("every dtype each op supports, on every test mesh and random placements", function()
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

  describe("errors of DTensor random calls name the call", function()
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
end
