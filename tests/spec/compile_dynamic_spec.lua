-- dt.compile(fn, {dynamic = true}) on plain tensors: a call that misses its guards only by
-- sizes records a graph general over them; later sizes replay it bitwise equal to eager
-- (training steps, random ops and the generator included); sizes 0 and 1 and sizes Lua reads
-- stay static (a guard: the graph re-records), f:graph() shows the symbols and f:stats() the
-- replays per shape.
local H = require("tests.spec.support.spec_helpers")

local function mlp_pair()
  local function make()
    dt.manual_seed(3)
    local model = dt.nn.Sequential(dt.nn.Linear(4, 8), dt.nn.Tanh(), dt.nn.Linear(8, 2))
    return model, H.mse_step(model, dt.optim.SGD(model:parameters(), {lr = 0.1}))
  end
  local m1, eager = make()
  local m2, step = make()
  return m1, eager, m2, step
end

local function dynamic_graph(f)
  for i, g in ipairs(f:stats().per_graph) do
    if g.dynamic then return i, g end
  end
end

describe("dt.compile dynamic = true (plain tensors)", function()
  it("an MLP's training step over random batch sizes (0, 1 and uneven included) equals eager bitwise", function()
    local g = H.prng(11)
    local m1, eager, m2, step = mlp_pair()
    local f = dt.compile(step, {dynamic = true})
    local sizes = {16, 9, 0, 1, 5}
    for _ = 1, 12 do sizes[#sizes + 1] = g.int(0, 40) end
    for i, B in ipairs(sizes) do
      local x, y = dt.randn(B, 4), dt.randn(B, 2)
      local a, b = eager(x, y), f(x, y)
      assert.is_true(dt.equal(a, b) or (a:item() ~= a:item() and b:item() ~= b:item()), "loss at call " .. i .. ", batch " .. B)
    end
    for i, p in ipairs(m1:parameters()) do assert.is_true(dt.equal(p, m2:parameters()[i]), "parameter " .. i) end
    local k, dg = dynamic_graph(f)
    assert.is_truthy(k, "a dynamic graph")
    local st = f:stats()
    assert.is_true(st.graphs <= 5) -- 16, 9 (-> dynamic), 0 and 1 (specialised) and nothing else
    local replayed = 0
    for _, sh in ipairs(dg.shapes) do
      assert.is_true(sh.sizes[1] >= 2)
      replayed = replayed + sh.replays
    end
    assert.are.equal(dg.replays, replayed)
    assert.is_true(dg.replays >= 8)
    local text = f:graph({index = k})
    assert.matches("dynamic: s0 = argument 1 dim 1", text, 1, true)
    assert.matches("expand(%17, [s0, 2])", text, 1, true)
    assert.matches("div(%18, 2*s0)", text, 1, true) -- the mean's backward: n = 2 * batch
    assert.matches("float32{s0,8}", text, 1, true)
  end)

  it("random ops draw bitwise as eager at each size and leave the generator where eager does", function()
    local w = dt.randn(3, 5)
    local fn = function(x)
      local h = x:matmul(w)
      local r = dt.rand_like(h) + dt.nn.functional.dropout(h, 0.25)
      return r:reshape(-1), h:sum(1)
    end
    local f = dt.compile(fn, {dynamic = true})
    for _, B in ipairs {4, 7, 2, 9, 13, 7} do
      local x = dt.randn(B, 3)
      dt.manual_seed(B)
      local a, as = fn(x)
      local ea = dt.get_rng_state().offset
      dt.manual_seed(B)
      local b, bs = f(x)
      assert.are.equal(ea, dt.get_rng_state().offset)
      assert.is_true(dt.equal(a, b) and dt.equal(as, bs), "batch " .. B)
      assert.is_true(dt.equal(dt.rand(3), (function() dt.manual_seed(B); fn(x); return dt.rand(3) end)()))
    end
    local _, dg = dynamic_graph(f)
    assert.are.equal(4, dg.replays)
    assert.matches("(rng, words by its size)", f:graph(), 1, true)
  end)

  it("two arguments with equal sizes share a symbol; a call where they differ misses and records", function()
    local f = dt.compile(function(x, y) return x * y + 1 end, {dynamic = true})
    f(dt.ones(4, 3), dt.ones(4, 3))
    f(dt.ones(6, 3), dt.ones(6, 3))
    assert.matches("float32{s0,3}", f:graph(), 1, true)
    local a = f(dt.ones(5, 3) * 2, dt.ones(5, 3) * 3)
    assert.is_true(dt.equal(a, dt.ones(5, 3) * 7))
    assert.are.equal(2, f:stats().graphs)
    assert.are.equal(1, f:stats().replays)
    local b = f(dt.ones(5, 3) * 2, dt.ones(1, 3) * 3) -- broadcasting: another graph
    assert.is_true(dt.equal(b, dt.ones(5, 3) * 7))
    assert.are.equal(3, f:stats().graphs)
  end)

  it("a Lua branch on a size is a guard: the sizes stay static, another size re-records through its branch", function()
    local fn = function(x)
      if x:size(1) > 4 then return x * 2 end
      return x + 1
    end
    local f = dt.compile(fn, {dynamic = true})
    for _, B in ipairs {3, 6, 2, 8, 3} do
      local x = dt.randn(B, 2)
      assert.is_true(dt.equal(fn(x), f(x)), "batch " .. B)
    end
    local st = f:stats()
    assert.are.equal(4, st.graphs)
    assert.are.equal(1, st.replays)
    assert.is_nil((dynamic_graph(f)))
    assert.matches("Lua read a size that changed at .*compile_dynamic_spec.lua", st.static_sizes)
    assert.matches("static sizes: Lua read a size", f:graph())
  end)

  it("a size read of a tensor the graph made keeps the sizes static, and says where", function()
    local fn = function(x)
      local h = x * 2
      return h:reshape(h:size(1), -1)
    end
    local f = dt.compile(fn, {dynamic = true})
    for _, B in ipairs {3, 6, 5} do
      local x = dt.randn(B, 2, 2)
      assert.is_true(dt.equal(fn(x), f(x)))
    end
    assert.are.equal(3, f:stats().graphs)
    assert.matches("size of a tensor the graph made at .*compile_dynamic_spec.lua", f:stats().static_sizes)
  end)

  it("sizes read of a dim that does not change are guarded constants; the changing dim is still a symbol", function()
    local fn = function(x) return x:reshape(-1, x:size(2) * 2) end
    local f = dt.compile(fn, {dynamic = true})
    for _, B in ipairs {4, 6, 8, 10} do
      local x = dt.randn(B, 3)
      assert.is_true(dt.equal(fn(x), f(x)))
    end
    assert.are.equal(2, f:stats().replays)
    assert.matches("reshape(%0, [-1, 6])", f:graph(), 1, true)
  end)

  it("an error at a replayed size names the op, and the graph replays after it", function()
    local f = dt.compile(function(x) return x:reshape(-1, 6) + 1 end, {dynamic = true})
    f(dt.ones(4, 3))
    f(dt.ones(6, 3))
    local ok, err = pcall(f, dt.ones(5, 3))
    assert.is_false(ok)
    assert.matches("reshape", tostring(err))
    assert.is_true(dt.equal(f(dt.ones(8, 3)), dt.ones(4, 6) * 2))
    assert.are.equal(2, f:stats().graphs)
  end)

  it("without dynamic each size records its own graph (today's default)", function()
    local f = dt.compile(function(x) return x + 1 end)
    for _, B in ipairs {2, 3, 4} do f(dt.ones(B)) end
    assert.are.equal(3, f:stats().graphs)
    assert.is_nil((dynamic_graph(f)))
    assert.is_nil(f:stats().static_sizes)
  end)
end)
