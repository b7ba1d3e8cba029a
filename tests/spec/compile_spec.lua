-- dt.compile on plain tensors: a replayed graph gives what eager execution gives, bitwise,
-- over random programs (random ops and in-place ops included; the generator ends where eager
-- leaves it), guards record new graphs, what a graph cannot capture is an error naming the
-- Lua line, and f:graph() / f:stats() describe what was recorded.
local H = require("tests.spec.support.spec_helpers")

local function rng_state()
  local s = dt.get_rng_state()
  return s.seed, s.offset
end

local function same(a, b)
  return a.dtype == b.dtype and tostring(a:size()) == tostring(b:size()) and dt.equal(a, b)
end

-- A random program over two inputs of shape {r, c}: a list of steps, each reading earlier
-- values (1-based positions in `vals`) and appending its result.
local STEPS = {
  function(v, g) return v[g.int(1, #v)] + v[g.int(1, #v)] end,
  function(v, g) return v[g.int(1, #v)] * v[g.int(1, #v)] end,
  function(v, g) return v[g.int(1, #v)] - 1.5 end,
  function(v, g) return v[g.int(1, #v)]:relu() end,
  function(v, g) return v[g.int(1, #v)]:tanh() end,
  function(v, g) return v[g.int(1, #v)]:exp():clamp(-3, 3) end,
  function(v, g) return dt.rand(v[1]:size()) end,
  function(v, g) return dt.randn(v[1]:size()) * v[g.int(1, #v)] end,
  function(v, g) return dt.nn.functional.dropout(v[g.int(1, #v)], 0.3, true) end,
  function(v, g) return v[g.int(1, #v)]:sum(1, true):expand(v[1]:size()) end,
  function(v, g) return v[g.int(1, #v)]:t():contiguous():t() end,
  function(v, g) return v[g.int(1, #v)]:clone():add_(v[g.int(1, #v)]) end,
  function(v, g) return v[g.int(1, #v)]:softmax(-1) end,
  function(v, g) local a = v[g.int(1, #v)]; return a:matmul(a:t()):sum(2, true):expand(a:size()) end,
}

local function program(seed, nsteps)
  return function(x, y)
    local g = H.prng(seed)
    local v = {x, y}
    for _ = 1, nsteps do v[#v + 1] = g.pick(STEPS)(v, g) end
    return v[#v], v[#v - 1]
  end
end

describe("dt.compile on plain tensors", function()
  it("replays random programs bitwise equal to eager, the generator included", function()
    local g = H.prng(20240)
    for case = 1, 25 do
      local r, c = g.int(0, 5), g.int(1, 5)
      local fn = program(1000 + case, g.int(1, 12))
      local f = dt.compile(fn)
      dt.manual_seed(case)
      local x, y = dt.randn(r, c), dt.randn(r, c)
      for call = 1, 3 do -- the capture, then two replays
        local seed = 77 * case + call
        dt.manual_seed(seed)
        local e1, e2 = fn(x, y)
        local after = {rng_state()}
        local next_eager = dt.rand(4)
        dt.manual_seed(seed)
        local c1, c2 = f(x, y)
        local s, o = rng_state()
        assert.are.same(after, {s, o}, "case " .. case .. " call " .. call .. ": the generator")
        assert.is_true(same(e1, c1) and same(e2, c2), "case " .. case .. " call " .. call)
        assert.is_true(dt.equal(next_eager, dt.rand(4)), "case " .. case .. ": the following eager draw")
      end
      local st = f:stats()
      assert.are.equal(1, st.graphs)
      assert.are.equal(2, st.replays)
    end
  end)

  it("writes in place into arguments as eager does, and reads outside tensors by reference", function()
    local w = dt.tensor({{1, 2}, {3, 4}}, {dtype = "float32"})
    local f = dt.compile(function(x) x:mul_(2); return x + w end)
    local x = dt.ones(2, 2)
    local r1 = f(x)
    assert.are.same({{3, 4}, {5, 6}}, r1:totable())
    assert.are.same({{2, 2}, {2, 2}}, x:totable())
    w:add_(10) -- an in-place update of the outside tensor is seen by the replay
    local r2 = f(x)
    assert.are.same({{4 + 11, 4 + 12}, {4 + 13, 4 + 14}}, r2:totable())
    assert.are.same({{4, 4}, {4, 4}}, x:totable())
    assert.are.equal(1, f:stats().replays)
  end)

  it("returns arguments, repeated values and Lua constants as eager does", function()
    local f = dt.compile(function(x, k) local y = x * k; return y, x, y, k, "tag" end)
    local x = dt.arange(3):float()
    f(x, 2)
    local y, x2, y2, k, tag = f(x, 2)
    assert.are.same({0, 2, 4}, y:totable())
    assert.are.equal(x, x2)
    assert.are.equal(y, y2)
    assert.are.equal(2, k)
    assert.are.equal("tag", tag)
  end)

  it("records a new graph when a guard misses: shape, dtype, a constant, grad mode", function()
    local f = dt.compile(function(x, s) return x * s end)
    local a = dt.ones(2, 3)
    assert.are.same({{2, 2, 2}, {2, 2, 2}}, f(a, 2):totable())
    f(a, 2)
    assert.are.same({{3, 3, 3}, {3, 3, 3}}, f(a, 3):totable()) -- a Lua number is a constant of the graph
    f(dt.ones(4), 2)
    f(dt.ones(2, 3, {dtype = "float64"}), 2)
    f(a:t(), 2) -- other strides
    dt.no_grad(function() f(a, 2) end)
    local st = f:stats()
    assert.are.equal(6, st.graphs)
    assert.are.equal(5, st.guard_misses)
    assert.are.equal(1, st.replays)
    assert.are.equal(6, st.captures)
  end)

  it("tells arguments that share storage apart (a guard)", function()
    local f = dt.compile(function(a, b) a:add_(1); return b * 2 end)
    local x, y = dt.zeros(3), dt.zeros(3)
    assert.are.same({2, 2, 2}, f(x, x):totable()) -- b is a: it sees the write
    assert.are.same({0, 0, 0}, f(x:clone():zero_(), y):totable()) -- apart: a new graph
    assert.are.same({4, 4, 4}, f(x, x):totable()) -- x holds 1, then 2: replays the first graph
    assert.are.same({0, 0, 0}, f(dt.zeros(3), y):totable())
    local st = f:stats()
    assert.are.equal(2, st.graphs)
    assert.are.equal(2, st.replays)
  end)

  it("runs eagerly with one warning after max_graphs graphs", function()
    local out = H.run([[-e "local f = dt.compile(function(x) return x + 1 end, {max_graphs = 2})
      for n = 1, 4 do assert(f(dt.ones(n)):sum():item() == 2 * n) end
      local s = f:stats(); print(s.graphs, s.eager_calls)"]])
    assert.matches("missed its guards after 2 graphs", out, 1, true)
    assert.matches("2\t2", out, 1, true)
    local _, n = out:gsub("warning: compile", "")
    assert.are.equal(1, n)
  end)

  it("replays operations that record autograd nodes through the front door, with the same gradients", function()
    local fn = function(x, w) return (x:matmul(w)):tanh():sum() end
    local f = dt.compile(fn)
    local x = dt.randn(3, 4)
    local w1 = dt.randn(4, 2, {requires_grad = true})
    local w2 = dt.tensor(w1:detach(), {requires_grad = true})
    fn(x, w1):backward()
    f(x, w2)
    w2.grad = nil
    local l = f(x, w2)
    l:backward()
    assert.is_true(dt.equal(w1.grad, w2.grad))
  end)

  it("refuses what it cannot capture, naming the Lua line", function()
    local x = dt.ones(2)
    local cases = {
      {function(t) if t:sum():item() > 0 then return t end return -t end, "t:item()"},
      {function(t) local s = tostring(t); return s end, "tostring(t)"},
      {function(t) local b = dt.equal(t, t); return b end, "comparison"},
      {function(t) local l = t:totable(); return l end, "totable"},
      {function(t) dt.manual_seed(1); return dt.rand(2) + t end, "manual_seed"},
    }
    for _, c in ipairs(cases) do
      local line = debug.getinfo(c[1], "S").linedefined
      local e = H.err(dt.compile(c[1]), x)
      assert.matches("compile: ", e, 1, true)
      assert.matches(c[2], e, 1, true)
      assert.matches("compile_spec.lua:" .. line, e, 1, true)
    end
    local g = dt.compile(function(t) local y = t * 1; y:requires_grad_(); return y end)
    assert.matches("requires_grad_", H.err(g, dt.ones(2)), 1, true)
    assert.matches("return value 1 is a table", H.err(dt.compile(function(t) return {t} end), x), 1, true)
    assert.matches("compile: dynamic must be a boolean, got string", H.err(dt.compile, function() end, {dynamic = "yes"}), 1, true)
    assert.matches("expected a function", H.err(dt.compile, 3), 1, true)
    assert.matches("max_graphs must be", H.err(dt.compile, function() end, {max_graphs = 0}), 1, true)
    assert.matches("compile: bucket_cap_mb must be 0..1e6, got -1", H.err(dt.compile, function() end, {bucket_cap_mb = -1}), 1, true)
    assert.matches("compile: bucket_cap_mb must be a number, got string", H.err(dt.compile, function() end, {bucket_cap_mb = "x"}), 1, true)
    -- a failed capture leaves nothing recording: eager ops and later captures work
    local f = dt.compile(function(t) return t + 1 end)
    assert.are.same({2, 2}, f(x):totable())
    assert.are.same({2, 2}, f(x):totable())
  end)

  it("prints the graph with ops, shapes and lines, and as Graphviz; removes dead code", function()
    local line = debug.getinfo(1, "l").currentline
    local f = dt.compile(function(x, y)
      local unused = x:exp() -- dead: nothing reads it
      local z = x:matmul(y)
      return z:relu() + dt.rand(z:size())
    end)
    assert.matches("nothing recorded yet", H.err(f.graph, f), 1, true)
    f(dt.ones(2, 3), dt.ones(3, 4))
    local text = dt.with_output and nil
    text = f:graph({file = H.tmpname(".txt")})
    assert.matches("graph(%0, %1)", text, 1, true)
    assert.matches("%2 = exp(%0)  float32{2,3}  [dead]  -- ", text, 1, true)
    assert.matches("%%3 = matmul%(%%0, %%1%)  float32{2,4}  %-%- [^\n]*compile_spec.lua:" .. (line + 3), text)
    assert.matches("rand%(0, 1%)  float32{2,4} %(rng %+0, 8 words%)", text)
    assert.matches("return %6", text, 1, true)
    local dot = f:graph({dot = true, file = H.tmpname(".dot")})
    assert.matches("^digraph compiled {", dot)
    assert.matches("n1 -> n2;", dot, 1, true)
    assert.matches("style=dashed", dot, 1, true)
    local st = f:stats()
    assert.are.equal(5, st.per_graph[1].nodes)
    assert.are.equal(1, st.per_graph[1].dead)
    -- the replay skips the dead node: same result, generator as eager
    dt.manual_seed(9)
    local a = f(dt.ones(2, 3), dt.ones(3, 4))
    dt.manual_seed(9)
    local ones23, ones34 = dt.ones(2, 3), dt.ones(3, 4)
    local e = ones23:matmul(ones34):relu() + dt.rand(2, 4)
    assert.is_true(dt.equal(a, e))
    -- peak bytes: outputs released after their last use hold less than all of them
    assert.is_true(st.per_graph[1].peak_bytes <= st.per_graph[1].peak_bytes_unreleased)
    assert.is_true(st.per_graph[1].peak_bytes > 0)
  end)

  describe("a training step (forward, backward, optimizer step) as one graph", function()
    local nn = dt.nn
    local function make(opt_kind, opts, dtype)
      dt.manual_seed(0)
      local model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 3))
      if dtype then model:to(dtype) end
      return model, dt.optim[opt_kind](model:parameters(), opts)
    end
    local function step_of(model, opt) return H.mse_step(function(x) return model(x) end, opt) end
    local function same_params(m1, m2)
      for i, p in ipairs(m1:parameters()) do
        local q = m2:parameters()[i]
        if not (dt.equal(p, q) and dt.equal(p.grad, q.grad)) then return false end
      end
      return true
    end

    it("replays SGD steps bitwise equal to eager: losses, parameters, gradients", function()
      local m1, o1 = make("SGD", {lr = 0.1, weight_decay = 0.01})
      local m2, o2 = make("SGD", {lr = 0.1, weight_decay = 0.01})
      local eager, f = step_of(m1, o1), dt.compile(step_of(m2, o2))
      dt.manual_seed(1)
      local x, y = dt.randn(6, 4), dt.randn(6, 3)
      for i = 1, 5 do
        assert.is_true(dt.equal(eager(x, y), f(x, y)), "step " .. i)
        assert.is_true(same_params(m1, m2), "step " .. i)
      end
      local st = f:stats()
      assert.are.equal(1, st.graphs)
      assert.are.equal(4, st.replays)
      local text = f:graph({file = H.tmpname(".txt")})
      assert.matches("set_grad(%2, None)", text, 1, true) -- zero_grad
      assert.matches("set_grad%(%%%d+, %%%d+%)", text) -- backward's .grad
      assert.matches("add_(%2, ", text, 1, true) -- the update
    end)

    it("replays momentum SGD once its buffers exist, and refuses state made inside", function()
      local m1, o1 = make("SGD", {lr = 0.05, momentum = 0.9})
      local m2, o2 = make("SGD", {lr = 0.05, momentum = 0.9})
      local eager, s2 = step_of(m1, o1), step_of(m2, o2)
      dt.manual_seed(2)
      local x, y = dt.randn(6, 4), dt.randn(6, 3)
      local e = H.err(dt.compile(step_of(make("SGD", {lr = 0.05, momentum = 0.9}))), x, y)
      assert.matches("compile: the tensor made by clone at [^\n]*spec_helpers.lua:%d+ is kept in Lua after the call", e)
      eager(x, y)
      s2(x, y) -- one eager step: the momentum buffers exist
      local f = dt.compile(s2)
      for i = 1, 4 do
        assert.is_true(dt.equal(eager(x, y), f(x, y)), "step " .. i)
        assert.is_true(same_params(m1, m2), "step " .. i)
      end
    end)

    it("replays Adam and AdamW once their state exists, bitwise equal to eager: the step count stays a tensor", function()
      local function lr64(v) return dt.tensor(v, {dtype = "float64"}) end
      local cases = {
        {"Adam", {lr = 0.01}}, {"AdamW", {lr = 0.02, weight_decay = 0.1}},
        {"Adam", {lr = 0.01, weight_decay = 0.05, amsgrad = true}}, {"AdamW", {lr = 0.01, maximize = true}},
        {"Adam", {lr = 0.003, betas = {0.5, 0.75}}, "float64"},
        {"AdamW", {lr = lr64(3e-3), weight_decay = 0.01}}, {"Adam", {lr = lr64(0.02), weight_decay = 0.1}, "float64"},
        {"AdamW", {lr = lr64(0.01), weight_decay = 0.2, amsgrad = true}, "float64"},
        {"AdamW", {lr = lr64(0.01), weight_decay = 0.2, fused = false}}, {"Adam", {lr = 0.01, fused = false}},
      }
      for _, c in ipairs(cases) do
        local what = c[1] .. " " .. (c[3] or "float32")
        local m1, o1 = make(c[1], c[2], c[3])
        local m2, o2 = make(c[1], c[2], c[3])
        local eager, s2 = step_of(m1, o1), step_of(m2, o2)
        dt.manual_seed(3)
        local x, y = dt.randn(6, 4):to(c[3] or "float32"), dt.randn(6, 3):to(c[3] or "float32")
        local e = H.err(dt.compile(step_of(make(c[1], c[2], c[3]))), x, y)
        assert.matches("compile: ", e, 1, true) -- a first step makes the state inside: refused
        eager(x, y)
        s2(x, y)
        local f = dt.compile(s2)
        for i = 1, 5 do
          assert.is_true(dt.equal(eager(x, y), f(x, y)), what .. " step " .. i)
          assert.is_true(same_params(m1, m2), what .. " step " .. i)
          assert.is_true(dt.equal(o1:state_of(m1:parameters()[1]).step, o2:state_of(m2:parameters()[1]).step), what)
        end
        assert.are.equal(1, f:stats().graphs, what)
        assert.are.equal(4, f:stats().replays, what)
        -- fused (the default): one adam_step_ node per parameter, which computes the bias
        -- corrections from the step tensor; fused = false: the composed ops
        local _, fused = f:graph({file = os.tmpname()}):gsub("\n%s*adam_step_%(", "")
        assert.are.equal(c[2].fused == false and 0 or #m2:parameters(), fused, what)
      end
    end)

    it("tells code whether a graph records (dt.is_compiling)", function()
      local seen
      local f = dt.compile(function(t) seen = dt.is_compiling(); return t + 1 end)
      assert.is_false(dt.is_compiling())
      f(dt.ones(2))
      assert.is_true(seen)
      assert.is_false(dt.is_compiling())
    end)

    it("replays a forward whose backward runs eagerly after it, with eager's gradients", function()
      local m1 = make("SGD", {lr = 0.1})
      local m2 = make("SGD", {lr = 0.1})
      local f = dt.compile(function(x) return m2(x):sum() end)
      local x = dt.randn(3, 4)
      for _ = 1, 3 do
        m1:zero_grad()
        m2:zero_grad()
        m1(x):sum():backward()
        f(x):backward()
        assert.is_true(same_params(m1, m2))
      end
    end)
  end)

  it("runs a nested compiled function inline while the outer one records", function()
    local inner = dt.compile(function(x) return x * 3 end)
    local outer = dt.compile(function(x) return inner(x) + 1 end)
    local x = dt.ones(2)
    assert.are.same({4, 4}, outer(x):totable())
    assert.are.same({4, 4}, outer(x):totable())
    assert.matches("mul", outer:graph({file = H.tmpname(".txt")}), 1, true)
    assert.are.equal(0, inner:stats().graphs)
  end)
end)
