-- dt.compile(fn, {dynamic = true}) on DTensors, on the meshes of this world (1-4 ranks):
-- random programs and tensor-parallel training steps called with random batch sizes (0,
-- uneven shards included) give eager's values, placements and generator position bitwise;
-- a replay at a new global size re-derives the local shapes from the recorded decisions.
-- The GPT demo's step with a changing batch stays equal to eager; its Lua library reads the
-- batch size (embedding, cross_entropy) and its node list changes with the batch's shards,
-- so its sizes stay static, which f:stats() reports.
local H = dofile((debug.getinfo(1, "S").source:match("^@(.*[/\\])") or "./") .. "dtensor_helpers.lua")
local F = dt.nn.functional

local function same_value(a, b)
  return H.placement_string(a.placements) == H.placement_string(b.placements) and H.same(a:to_local(), b:to_local())
end

local function dynamic_replays(f)
  local n = 0
  for _, g in ipairs(f:stats().per_graph) do
    if g.dynamic then n = n + g.replays end
  end
  return n
end

-- Steps that read no size into Lua (a read would keep the sizes static).
local function steps(mesh)
  local function any_placements(g)
    local p = {}
    for d = 1, mesh.ndim do p[d] = g.int(1, 3) == 1 and dt.Replicate() or dt.Shard(g.int(1, 2)) end
    return p
  end
  return {
    function(v, g) return v[g.int(1, #v)] + v[g.int(1, #v)] end,
    function(v, g) return v[g.int(1, #v)] * 0.5 - v[g.int(1, #v)] end,
    function(v, g) return v[g.int(1, #v)]:relu() end,
    function(v, g) return v[g.int(1, #v)]:redistribute(mesh, any_placements(g)) end,
    function(v, g) return F.dropout(v[g.int(1, #v)], 0.25, true) end,
    function(v, g) return v[g.int(1, #v)] - v[g.int(1, #v)]:sum(1, true) end,
    function(v, g) return v[g.int(1, #v)]:softmax(2) end,
    function(v, g) return v[g.int(1, #v)]:mean(2, true) * v[g.int(1, #v)] end,
  }
end

describe("dt.compile dynamic = true on DTensors", function()
  it("random programs over random batch sizes equal eager bitwise (values, placements, generator)", function()
    local g = H.prng(777)
    local replays = 0
    for _, mm in ipairs(H.meshes()) do
      local name, mesh = mm[1], mm[2]
      local list = steps(mesh)
      for case = 1, 3 do
        local c, nsteps, seed = g.int(1, 5), g.int(1, 6), g.int(1, 100000)
        local p1, p2 = H.placements(g, mesh, 2), H.placements(g, mesh, 2)
        local fn = function(x, y)
          local pg = H.prng(seed)
          local v = {x, y}
          for _ = 1, nsteps do v[#v + 1] = pg.pick(list)(v, pg) end
          return v[#v], v[#v - 1]:full_tensor()
        end
        local f = dt.compile(fn, {dynamic = true})
        for call = 1, 6 do
          local r = call <= 2 and 4 + call or g.int(0, 11)
          local x, y = H.dist(H.values({r, c}, "float32"), mesh, p1), H.dist(H.values({r, c}, "float32") * 0.5, mesh, p2)
          local what = name .. " case " .. case .. " call " .. call .. " rows " .. r
          dt.manual_seed(call)
          local a, af = fn(x, y)
          local off = dt.get_rng_state().offset
          dt.manual_seed(call)
          local b, bf = f(x, y)
          assert.are.equal(off, dt.get_rng_state().offset, what .. ": generator")
          assert.is_true(same_value(a, b), what)
          assert.is_true(H.same(af, bf), what .. ": full_tensor")
        end
        replays = replays + dynamic_replays(f)
      end
    end
    assert.is_true(replays > 0, "some calls replayed a dynamic graph")
  end)

  it("a tensor-parallel MLP training step (forward, backward, SGD) over random batch sizes equals eager", function()
    local g = H.prng(99)
    local replays = 0
    for _, mm in ipairs(H.meshes()) do
      local name, mesh = mm[1], mm[2]
      local tp = mesh.ndim -- the last mesh dim shards the hidden layer, the first the batch
      local function make()
        local W1, W2 = H.values({5, 8}, "float64") * 0.3, H.values({8, 3}, "float64") * 0.2
        local c1, c2 = {}, {}
        for d = 1, mesh.ndim do c1[d], c2[d] = dt.Replicate(), dt.Replicate() end
        c1[tp], c2[tp] = dt.Shard(2), dt.Shard(1)
        local ps = {H.dist(W1, mesh, c1):requires_grad_(), H.dist(W2, mesh, c2):requires_grad_()}
        local opt = dt.optim.SGD(ps, {lr = 0.1})
        return ps, require("tests.spec.support.spec_helpers").mse_step(function(x) return x:matmul(ps[1]):tanh():matmul(ps[2]) end, opt)
      end
      local p1, eager = make()
      local p2, step = make()
      local f = dt.compile(step, {dynamic = true})
      local xp = {}
      for d = 1, mesh.ndim do xp[d] = dt.Replicate() end
      if mesh.ndim > 1 then xp[1] = dt.Shard(1) end
      for call = 1, 7 do
        local B = call <= 2 and 5 + call or g.int(0, 13)
        local x = H.dist(H.values({B, 5}, "float64") * 0.1, mesh, xp)
        local y = H.dist(H.values({B, 3}, "float64") * 0.05, mesh, xp)
        local a, b = eager(x, y), f(x, y)
        assert.is_true(same_value(a, b) or B == 0, name .. " loss, batch " .. B)
      end
      for i = 1, 2 do assert.is_true(same_value(p1[i], p2[i]), name .. " parameter " .. i) end
      replays = replays + dynamic_replays(f)
      for i, pg in ipairs(f:stats().per_graph) do
        if pg.dynamic then
          local path = os.tmpname()
          assert.matches("float64{s0,8}", f:graph({index = i, file = path}), 1, true)
          os.remove(path)
        end
      end
    end
    assert.is_true(replays > 0, "some calls replayed a dynamic graph")
  end)

  it("to_local keeps the sizes static (a shard's local sizes are not symbols) and still equals eager", function()
    local mesh = dt.init_device_mesh("cpu", {dt.world_size()})
    local fn = function(x) return dt.from_local(x:to_local():exp(), mesh, {dt.Shard(1)}, {run_check = false}) end
    local f = dt.compile(fn, {dynamic = true})
    for _, r in ipairs {5, 9, 7} do
      local x = H.dist(H.values({r * dt.world_size(), 2}, "float64"), mesh, {dt.Shard(1)})
      assert.is_true(same_value(fn(x), f(x)), "rows " .. r)
    end
    assert.are.equal(3, f:stats().graphs)
    assert.matches("to_local at .*: a shard's local sizes differ by rank", f:stats().static_sizes)
  end)

  it("the GPT demo's step with a changing batch equals eager; its sizes stay static and f:stats() says why", function()
    local gpt = dofile((debug.getinfo(1, "S").source:match("^@(.*[/\\])") or "./") .. "../../examples/gpt_model.lua")
    local n = dt.world_size()
    local dp, tp = 1, n
    if n == 4 then dp, tp = 2, 2 elseif n == 3 then dp, tp = 3, 1 end
    local V, L = 11, 8
    local mesh = dt.init_device_mesh("cpu", {dp, tp}, {"dp", "tp"})
    local R, S = dt.Replicate(), dt.Shard
    local pos = dt.distribute_tensor(dt.arange(1, L + 1):reshape(1, L), mesh, {R, R})
    local function copy()
      dt.manual_seed(1)
      local model = gpt.GPT(V, L, {layers = 1, width = 16, heads = 2, dropout = 0.1})
      dt.distribute_module(model, mesh, gpt.partition)
      local opt = dt.optim.AdamW(model:parameters(), {lr = dt.tensor(3e-3, {dtype = "float64"})})
      return model, gpt.train_step(model, opt, pos)
    end
    local me, e = copy()
    local mc, c = copy()
    local compiled
    for i, B in ipairs {6, 4, 7, 4, 5} do
      dt.manual_seed(100 + i)
      local x = dt.randint(1, V + 1, {B, L}, {device_mesh = mesh, placements = {S(1), R}})
      local y = dt.randint(1, V + 1, {B, L}, {device_mesh = mesh, placements = {S(1), R}})
      dt.manual_seed(200 + i)
      local a = e(x, y)
      dt.manual_seed(200 + i)
      local b = (compiled or c)(x, y)
      assert.is_true(dt.equal(a:to_local(), b:to_local()), "loss of step " .. i)
      if i == 1 then compiled = dt.compile(c, {dynamic = true}) end
    end
    local pe, pc = me:parameters(), mc:parameters()
    for i = 1, #pe do assert.is_true(dt.equal(pe[i]:to_local(), pc[i]:to_local()), "parameter " .. i) end
    local st = compiled:stats()
    assert.are.equal(4, st.graphs + st.replays)
    for _, pg in ipairs(st.per_graph) do assert.is_false(pg.dynamic) end
    assert.is_string(st.static_sizes) -- why: a size read (ids:numel()) or nodes that differ by batch
  end)
end)
