-- Autograd from Lua on one device (doc/autograd.md): tensor fields, the factories'
-- requires_grad option, accumulation, retain_graph, the version counter, hooks, retain_grad,
-- detach, grad modes, dt.autograd.grad, dt.autograd.Function and dt.utils.checkpoint.
-- Every gradient is compared with one computed by hand.

local function err(f, ...)
  local ok, e = pcall(f, ...)
  if ok then error("expected an error, got none", 2) end
  return tostring(e)
end

local function close(want, got, tol)
  tol = tol or 1e-5
  local g = type(got) == "table" and got or got:totable()
  assert.are.equal(#want, #g, "length")
  for i = 1, #want do
    if type(want[i]) == "table" then
      close(want[i], g[i], tol)
    else
      assert(math.abs(want[i] - g[i]) <= tol * (1 + math.abs(want[i])),
             string.format("element %d: want %.7g, got %.7g", i, want[i], g[i]))
    end
  end
end

local function leaf(values) return dt.tensor(values, {requires_grad = true}) end

describe("autograd fields", function()
  it("requires_grad, is_leaf, grad_fn and grad of leaves and of computed tensors", function()
    local x = dt.tensor({1.0, 2.0})
    assert.is_false(x.requires_grad)
    assert.is_true(x.is_leaf)
    assert.is_nil(x.grad_fn)
    assert.is_nil(x.grad)
    assert.are.equal(x, x:requires_grad_())
    assert.is_true(x.requires_grad)
    local y = x * 3
    assert.is_true(y.requires_grad)
    assert.is_false(y.is_leaf)
    assert.are.equal("mul", y.grad_fn)
    assert.are.equal("sum", y:sum().grad_fn)
    x:requires_grad_(false)
    assert.is_false(x.requires_grad)
    x.requires_grad = true
    assert.is_true(x.requires_grad)
  end)

  it("t.grad can be set to a tensor of the same shape and dtype, and cleared with nil", function()
    local x = leaf({1.0, 2.0})
    x.grad = dt.tensor({5.0, 6.0})
    assert.are.same({5, 6}, x.grad:totable())
    ;(x * 2):sum():backward()
    assert.are.same({7, 8}, x.grad:totable()) -- accumulates into what was set
    x.grad = nil
    assert.is_nil(x.grad)
    assert.matches("t.grad = g: g's shape differs", err(function() x.grad = dt.zeros(3) end), 1, true)
    assert.matches("dtype float64 differs from the tensor's float32",
                   err(function() x.grad = dt.zeros(2, {dtype = "float64"}) end), 1, true)
  end)

  it("requires_grad_ refuses integer and boolean tensors, and a computed tensor cannot stop requiring grad", function()
    assert.matches("requires_grad_: only floating-point tensors can require gradients (this one is int64)",
                   err(function() dt.tensor({1, 2}):requires_grad_() end), 1, true)
    assert.matches("(this one is bool)", err(function() dt.tensor({true}):requires_grad_() end), 1, true)
    local y = leaf({1.0}) * 2
    assert.matches("requires_grad_: a tensor computed by a recorded op (grad_fn mul) cannot stop requiring grad",
                   err(function() y:requires_grad_(false) end), 1, true)
    dt.tensor({1, 2}):requires_grad_(false) -- nothing to refuse
  end)
end)

describe("the factories' requires_grad option", function()
  local o = {requires_grad = true}
  local x = dt.ones(2, 3)
  local FACTORIES = {
    tensor = function() return dt.tensor({{1.0, 2.0}}, o) end,
    ["tensor (a copy)"] = function() return dt.tensor(x, o) end,
    zeros = function() return dt.zeros(2, 3, o) end,
    ones = function() return dt.ones({2, 3}, o) end,
    full = function() return dt.full({2}, 1.5, o) end,
    empty = function() return dt.empty(2, o) end,
    arange = function() return dt.arange(0, 3, 0.5, o) end,
    eye = function() return dt.eye(2, o) end,
    rand = function() return dt.rand(2, o) end,
    randn = function() return dt.randn(2, 2, o) end,
    randint = function() return dt.randint(0, 5, {2}, {dtype = "float32", requires_grad = true}) end,
    randperm = function() return dt.randperm(3, {dtype = "float64", requires_grad = true}) end,
    zeros_like = function() return dt.zeros_like(x, o) end,
    ones_like = function() return dt.ones_like(x, o) end,
    empty_like = function() return dt.empty_like(x, o) end,
    full_like = function() return dt.full_like(x, 2, o) end,
    rand_like = function() return dt.rand_like(x, o) end,
    randn_like = function() return dt.randn_like(x, o) end,
  }
  for name, make in pairs(FACTORIES) do
    it(name .. " makes a leaf that requires grad", function()
      local t = make()
      assert.is_true(t.requires_grad)
      assert.is_true(t.is_leaf)
      ;(t * 2):sum():backward()
      local want = dt.full_like(t, 2):totable()
      assert.are.same(want, t.grad:totable())
    end)
  end

  it("requires_grad = false is the default; a non-boolean is an error naming the factory", function()
    assert.is_false(dt.zeros(2, {requires_grad = false}).requires_grad)
    assert.is_false(dt.ones(2).requires_grad)
    assert.matches("zeros: option requires_grad must be a boolean, got number",
                   err(dt.zeros, 2, {requires_grad = 1}), 1, true)
  end)

  it("an integer or boolean dtype with requires_grad is an error naming the factory", function()
    local cases = {
      {"tensor", "int64", function() return dt.tensor({1, 2}, o) end},
      {"tensor", "bool", function() return dt.tensor({true}, o) end},
      {"arange", "int64", function() return dt.arange(3, o) end},
      {"full", "int64", function() return dt.full({2}, 3, o) end},
      {"zeros", "int32", function() return dt.zeros(2, {dtype = "int32", requires_grad = true}) end},
      {"eye", "int64", function() return dt.eye(2, {dtype = "int64", requires_grad = true}) end},
      {"randint", "int64", function() return dt.randint(0, 3, {2}, o) end},
      {"randperm", "int64", function() return dt.randperm(3, o) end},
      {"zeros_like", "int32", function() return dt.zeros_like(dt.ones(2, {dtype = "int32"}), o) end},
      {"full_like", "int64", function() return dt.full_like(dt.ones(2, {dtype = "int64"}), 1, o) end},
    }
    for _, c in ipairs(cases) do
      assert.matches(c[1] .. ": requires_grad = true needs a floating-point dtype, got " .. c[2], err(c[3]), 1, true)
    end
  end)
end)

describe("backward", function()
  it("computes gradients by the chain rule: y = sum(x * x * 3 + x) gives 6x + 1", function()
    local x = leaf({1.0, -2.0, 0.5})
    local y = (x * x * 3 + x):sum()
    y:backward()
    close({7, -11, 4}, x.grad)
  end)

  it("mm, view, reshape, sub, neg: hand-computed gradients of both operands", function()
    local a = leaf({{1.0, 2.0}, {3.0, 4.0}})
    local b = leaf({{1.0, -1.0}, {2.0, 0.5}})
    local y = (-(a:mm(b) - a)):reshape(4):view(2, 2):sum()
    y:backward()
    -- d/da sum(a @ b) = ones @ b^T = row sums of b, per row; minus the -a term: -(rowsum(b) - 1)
    close({{-(1 - 1) + 1, -(2 + 0.5) + 1}, {-(1 - 1) + 1, -(2 + 0.5) + 1}}, a.grad)
    -- d/db sum(a @ b) = a^T @ ones = column sums of a, per row of b
    close({{-4, -4}, {-6, -6}}, b.grad)
  end)

  it("gradients accumulate into .grad across backward calls", function()
    local x = leaf({1.0, 2.0})
    for _ = 1, 3 do (x * x):sum():backward() end
    close({6, 12}, x.grad)
    x.grad = nil
    ;(x * 5):sum():backward()
    close({5, 5}, x.grad)
  end)

  it("a tensor used twice gets the sum of both paths", function()
    local x = leaf({3.0})
    local y = x * x + x * 2
    y:sum():backward()
    close({8}, x.grad)
  end)

  it("retain_graph keeps the graph for another backward; without it a second backward is an error", function()
    local x = leaf({1.0, 2.0})
    local y = (x * x):sum()
    y:backward({retain_graph = true})
    y:backward()
    close({4, 8}, x.grad)
    assert.matches("backward: mul's saved values were freed by an earlier backward through this graph; pass " ..
                   "{retain_graph = true} to the first backward, or run the forward again", err(function() y:backward() end),
                   1, true)
  end)

  it("a non-scalar output needs its gradient; with it, it is a vector-Jacobian product", function()
    local x = leaf({1.0, 2.0})
    local y = x * x
    assert.matches("backward: a gradient can be implicitly created only for an output of one element (output 1 " ..
                   "has shape {2}); pass its gradient", err(function() y:backward() end), 1, true)
    y:backward(dt.tensor({1.0, 10.0}))
    close({2, 40}, x.grad)
    assert.matches("gradient of output 1: a gradient of shape {3} for a value of shape {2}",
                   err(function() (x * x):backward(dt.ones(3)) end), 1, true)
  end)

  it("dt.autograd.backward takes a list of outputs and their gradients", function()
    local x = leaf({1.0, 2.0})
    local y1, y2 = (x * 2):sum(), x * x
    dt.autograd.backward({y1, y2}, {nil, dt.tensor({1.0, 1.0})})
    close({4, 6}, x.grad)
  end)

  it("a tensor that does not require grad has no graph to run backward on", function()
    assert.matches("backward: output 1 does not require grad and has no grad_fn",
                   err(function() dt.ones(1):backward() end), 1, true)
  end)
end)

describe("in-place ops and the version counter", function()
  it("modifying a tensor a recorded op saved raises at backward, naming the in-place op and the op", function()
    local x = leaf({1.0, 2.0})
    local a = x * 1
    local w = dt.tensor({3.0, 4.0}) -- saved by mul though it needs no grad
    local y = (a * w):sum()
    w:add_(1)
    assert.matches("backward: a tensor that mul saved for backward was modified by an in-place op (add_) after it " ..
                   "was saved (its version is 1, mul saved version 0)", err(function() y:backward() end), 1, true)
  end)

  it("an in-place op on a computed tensor is recorded and differentiable", function()
    local x = leaf({1.0, 2.0})
    local a = x * 2
    a:mul_(3)
    assert.are.equal("mul_", a.grad_fn)
    a:sum():backward()
    close({6, 6}, x.grad)
  end)

  it("an in-place op on a leaf that requires grad is an error, allowed under no_grad", function()
    local x = leaf({1.0, 2.0})
    assert.matches("add_: a leaf tensor that requires grad is used in an in-place op (do it inside dt.no_grad, or " ..
                   "on a clone)", err(function() x:add_(1) end), 1, true)
    dt.no_grad(function() x:add_(1) end)
    assert.are.same({2, 3}, x:totable())
    assert.is_true(x.is_leaf)
  end)
end)

describe("hooks and retain_grad", function()
  it("a hook sees the gradient and may replace it; :remove() takes it away", function()
    local x = leaf({1.0, 2.0})
    local seen
    local h = x:register_hook(function(g) seen = g:totable(); return g * 10 end)
    ;(x * x):sum():backward()
    assert.are.same({2, 4}, seen)
    close({20, 40}, x.grad)
    h:remove()
    x.grad = nil
    ;(x * x):sum():backward()
    close({2, 4}, x.grad)
  end)

  it("a hook on a computed tensor changes what flows on to the leaves", function()
    local x = leaf({1.0, 2.0})
    local z = x * 3
    z:register_hook(function(g) return g + 1 end)
    ;(z * 2):sum():backward() -- dz = 2, hooked to 3, dx = 3 * 3
    close({9, 9}, x.grad)
    assert.matches("register_hook: cannot register a hook on a tensor that does not require grad",
                   err(function() dt.ones(1):register_hook(function() end) end), 1, true)
    assert.matches("hook: a gradient hook must return nil or a tensor, not string",
                   err(function() local y = leaf({1.0}); y:register_hook(function() return "no" end); y:sum():backward() end),
                   1, true)
  end)

  it("queue_callback runs after every node of the backward, in the order queued, once", function()
    local x = leaf({1.0, 2.0})
    local order = {}
    x:register_hook(function()
      dt.autograd.queue_callback(function() order[#order + 1] = "first, grad " .. tostring(x.grad ~= nil) end)
      dt.autograd.queue_callback(function() order[#order + 1] = "second" end)
      order[#order + 1] = "hook"
    end)
    ;(x * x):sum():backward()
    assert.are.same({"hook", "first, grad true", "second"}, order)
    close({2, 4}, x.grad)
    ;(x * 3):sum():backward() -- a new backward: only its own callbacks
    assert.are.same({"hook", "first, grad true", "second", "hook", "first, grad true", "second"}, order)
    local y, ran = leaf({3.0}), false -- autograd.grad runs them too
    local z = y * y
    z:register_hook(function() dt.autograd.queue_callback(function() ran = true end) end)
    close({6}, dt.autograd.grad(z:sum(), y))
    assert.is_true(ran)
    assert.matches("queue_callback: no backward is running (call it from a hook or a custom backward)",
                   err(dt.autograd.queue_callback, function() end), 1, true)
    assert.matches("queue_callback: expected a function, got number",
                   err(dt.autograd.queue_callback, 3), 1, true)
  end)

  it("a failing backward drops its callbacks; a callback's error is backward's", function()
    local ran = false
    local y = leaf({1.0})
    y:register_hook(function()
      dt.autograd.queue_callback(function() ran = true end)
      error("hook failed")
    end)
    assert.matches("hook failed", err(function() (y * 2):sum():backward() end), 1, true)
    assert.is_false(ran)
    local z = leaf({1.0})
    z:register_hook(function() dt.autograd.queue_callback(function() error("callback failed") end) end)
    assert.matches("callback failed", err(function() (z * 2):sum():backward() end), 1, true)
    ;(leaf({1.0}) * 2):sum():backward() -- the next backward is clean
  end)

  it("retain_grad keeps the gradient of a computed tensor; others have none", function()
    local x = leaf({1.0, 2.0})
    local z, w = x * 2, x * 3
    z:retain_grad()
    assert.is_true(z.retains_grad)
    ;(z * z + w):sum():backward()
    close({4, 8}, z.grad) -- 2z
    assert.is_nil(w.grad)
    close({8 + 3, 16 + 3}, x.grad)
  end)
end)

describe("detach", function()
  it("detach() shares the data without history; detach_() makes the tensor itself a leaf", function()
    local x = leaf({1.0, 2.0})
    local y = x * 2
    local d = y:detach()
    assert.is_false(d.requires_grad)
    assert.is_true(d.is_leaf)
    dt.no_grad(function() d:add_(1) end)
    assert.are.same({3, 5}, y:totable()) -- same storage
    y:detach_()
    assert.is_false(y.requires_grad)
    assert.is_true(y.is_leaf)
    assert.is_nil(y.grad_fn)
    -- a detached value cuts the graph: only the direct path reaches x
    local z = (x * x):detach() * x
    z:sum():backward()
    close({1, 4}, x.grad)
  end)
end)

describe("grad modes", function()
  it("no_grad(fn, ...) runs fn without recording, returns its results and restores the mode", function()
    local x = leaf({1.0})
    local y, enabled, extra = dt.no_grad(function(a, b) return x * a, dt.is_grad_enabled(), b end, 2, "b")
    assert.is_false(enabled)
    assert.are.equal("b", extra)
    assert.is_false(y.requires_grad)
    assert.is_true(dt.is_grad_enabled())
  end)

  it("enable_grad inside no_grad records; set_grad_enabled(flag, fn) picks the mode", function()
    local x = leaf({2.0})
    local y = dt.no_grad(function() return dt.enable_grad(function() return x * x end) end)
    assert.are.equal("mul", y.grad_fn)
    assert.is_false(dt.set_grad_enabled(false, function() return (x * x).requires_grad end))
    assert.is_true(dt.set_grad_enabled(true, function() return (x * x).requires_grad end))
    assert.is_true(dt.is_grad_enabled())
  end)

  it("the <close> forms switch until the end of the scope, nested", function()
    local x = leaf({1.0})
    do
      local _ <close> = dt.no_grad()
      assert.is_false(dt.is_grad_enabled())
      assert.is_false((x * 2).requires_grad)
      do
        local _ <close> = dt.enable_grad()
        assert.is_true((x * 2).requires_grad)
      end
      assert.is_false(dt.is_grad_enabled())
      do
        local _ <close> = dt.set_grad_enabled(true)
        assert.is_true(dt.is_grad_enabled())
      end
    end
    assert.is_true(dt.is_grad_enabled())
    do
      local _ <close> = dt.set_grad_enabled(false)
      assert.is_false(dt.is_grad_enabled())
    end
    assert.is_true(dt.is_grad_enabled())
  end)

  it("an error inside fn, or inside a <close> scope, restores the mode", function()
    assert.matches("inside no_grad", err(dt.no_grad, function() error("inside no_grad", 0) end), 1, true)
    assert.is_true(dt.is_grad_enabled())
    dt.no_grad(function()
      assert.matches("inside", err(dt.enable_grad, function() error("inside", 0) end), 1, true)
      assert.is_false(dt.is_grad_enabled())
      err(dt.set_grad_enabled, true, function() error("x") end)
      assert.is_false(dt.is_grad_enabled())
    end)
    err(function()
      local _ <close> = dt.no_grad()
      error("in scope")
    end)
    assert.is_true(dt.is_grad_enabled())
    assert.matches("bad argument #1 to 'set_grad_enabled' (boolean expected",
                   err(function() dt.set_grad_enabled(1) end), 1, true)
  end)
end)

describe("dt.autograd.grad", function()
  it("returns the gradients of the inputs without touching .grad", function()
    local a, b = leaf({1.0, 2.0}), leaf({3.0, 4.0})
    local y = (a * b + a):sum()
    local g = dt.autograd.grad(y, {a, b})
    close({4, 5}, g[1])
    close({1, 2}, g[2])
    assert.is_nil(a.grad)
    assert.is_nil(b.grad)
    local ga = dt.autograd.grad((a * a):sum(), a) -- one input: one tensor
    close({2, 4}, ga)
  end)

  it("an input the outputs do not use is an error, or nil with allow_unused", function()
    local a, b = leaf({1.0}), leaf({2.0})
    assert.matches("autograd.grad: input 2 was not used to compute the outputs (pass {allow_unused = true} to get nil for it)",
                   err(dt.autograd.grad, (a * 2):sum(), {a, b}), 1, true)
    local g = dt.autograd.grad((a * 2):sum(), {a, b}, {allow_unused = true})
    close({2}, g[1])
    assert.is_nil(g[2])
  end)

  it("takes grad_outputs for a non-scalar output, and retain_graph", function()
    local a = leaf({1.0, 2.0})
    local y = a * a
    local g1 = dt.autograd.grad(y, {a}, {dt.tensor({1.0, 3.0})}, {retain_graph = true})
    close({2, 12}, g1[1])
    local g2 = dt.autograd.grad(y, {a}, {dt.ones(2)})
    close({2, 4}, g2[1])
  end)
end)

describe("dt.autograd.Function", function()
  -- y = x * x * k for a number k: dy/dx = 2 k x
  local Square = dt.autograd.Function {
    name = "Square",
    forward = function(ctx, x, k)
      ctx.grad_on_in_forward = dt.is_grad_enabled()
      ctx:save_for_backward(x)
      ctx.k = k
      return x * x * k
    end,
    backward = function(ctx, g)
      local x = table.unpack(ctx.saved_tensors)
      return g * x * (2 * ctx.k), nil
    end,
  }

  it("runs forward without recording and gives its outputs the Function as grad_fn", function()
    local x = leaf({1.0, 2.0, 3.0})
    local y = Square.apply(x, 3)
    assert.are.equal("Square", y.grad_fn)
    assert.is_false(y.is_leaf)
    close({3, 12, 27}, y)
    ;(y * 2):sum():backward()
    close({12, 24, 36}, x.grad)
    local y2 = Square(x, 1) -- F(...) is F.apply(...)
    y2:sum():backward()
    close({14, 28, 42}, x.grad)
  end)

  it("forward runs with grad mode off; needs_input_grad says which arguments need a gradient", function()
    local needs, grad_on
    local F = dt.autograd.Function {
      forward = function(ctx, a, b, c)
        needs, grad_on = ctx.needs_input_grad, dt.is_grad_enabled()
        return a * b * c
      end,
      backward = function(ctx, g) return g, g, nil end,
    }
    local a, b = leaf({1.0}), dt.tensor({2.0})
    local y = F.apply(a, b, 5)
    assert.is_false(grad_on)
    assert.are.same({true, false, false}, needs)
    assert.are.equal("Function", y.grad_fn) -- the default name
    y:sum():backward()
    close({1}, a.grad)
    assert.is_nil(b.grad)
  end)

  it("with no input requiring grad (or under no_grad) nothing is recorded", function()
    local called = false
    local F = dt.autograd.Function {forward = function(_, a) return a * 2 end,
                                    backward = function(_, g) called = true; return g end}
    assert.is_false(F.apply(dt.ones(2)).requires_grad)
    assert.is_false(dt.no_grad(function() return F.apply(leaf({1.0})) end).requires_grad)
    assert.is_false(called)
  end)

  it("several outputs: one gradient each, zeros where none flowed (or nil with set_materialize_grads(false))", function()
    local got
    local function two_outputs(materialize)
      return dt.autograd.Function {
        name = "TwoOut",
        forward = function(ctx, x)
          if not materialize then ctx:set_materialize_grads(false) end
          return x * 2, x * 3
        end,
        backward = function(_, g1, g2)
          got = {g1 and g1:totable() or "nil", g2 and g2:totable() or "nil"}
          return (g1 or 0) * 2 + (g2 and g2 * 3 or 0)
        end,
      }
    end
    local x = leaf({1.0, 2.0})
    local a, b = two_outputs(true).apply(x)
    a:sum():backward()
    assert.are.same({{1, 1}, {0, 0}}, got)
    close({2, 2}, x.grad)
    x.grad = nil
    local _, d = two_outputs(false).apply(x)
    d:sum():backward()
    assert.are.same({"nil", {1, 1}}, got)
    close({3, 3}, x.grad)
    assert.are.equal("TwoOut", b.grad_fn)
  end)

  it("non-tensor arguments and results pass through; an input returned as is gets a new history", function()
    local F = dt.autograd.Function {
      name = "Passthrough",
      forward = function(_, s, x, t) return x, s .. "!", t end,
      backward = function(_, gx) return nil, gx * 7 end,
    }
    local x = leaf({1.0, 2.0})
    local y, s, t = F.apply("hi", x, {1})
    assert.are.equal("hi!", s)
    assert.are.same({1}, t)
    assert.are_not.equal(x, y)
    assert.is_true(x.is_leaf) -- x keeps its own history
    assert.are.equal("Passthrough", y.grad_fn)
    y:sum():backward()
    close({7, 7}, x.grad)
  end)

  it("mark_non_differentiable leaves an output without grad_fn", function()
    local F = dt.autograd.Function {
      forward = function(ctx, x)
        local idx = dt.tensor({1.0})
        ctx:mark_non_differentiable(idx)
        return x * 2, idx
      end,
      backward = function(_, g) return g * 2 end,
    }
    local y, idx = F.apply(leaf({1.0}))
    assert.are.equal("Function", y.grad_fn)
    assert.is_false(idx.requires_grad)
  end)

  it("an error inside backward comes back from backward naming the Function", function()
    local Bad = dt.autograd.Function {name = "Bad", forward = function(_, x) return x * 2 end,
                                      backward = function() error("boom", 0) end}
    local x = leaf({1.0})
    assert.matches("Bad: error in backward: boom", err(function() Bad.apply(x):sum():backward() end), 1, true)
    -- the engine is left usable
    ;(x * 2):sum():backward()
    close({2}, x.grad)
  end)

  it("a wrong gradient from backward is an error naming the Function", function()
    local function returning(v)
      return dt.autograd.Function {name = "Wrong", forward = function(_, x) return x * 2 end,
                                   backward = function() return v end}
    end
    local x = leaf({1.0, 2.0})
    assert.matches("Wrong: error in backward: backward returned a string as the gradient of argument 1",
                   err(function() returning("no").apply(x):sum():backward() end), 1, true)
    assert.matches("input 1 of Wrong: a gradient of shape {3} for a value of shape {2}",
                   err(function() returning(dt.ones(3)).apply(x):sum():backward() end), 1, true)
    local Many = dt.autograd.Function {name = "Many", forward = function(_, a) return a * 1 end,
                                       backward = function(_, g) return g, g end}
    assert.matches("Many: error in backward: backward returned 2 gradients for 1 forward arguments",
                   err(function() Many.apply(x):sum():backward() end), 1, true)
  end)

  it("saved tensors are checked for in-place writes and freed by a backward without retain_graph", function()
    local x = leaf({1.0, 2.0})
    local w = dt.tensor({3.0, 4.0})
    local y = Square.apply(x * w, 1)
    y:sum():backward({retain_graph = true})
    close({18, 64}, x.grad) -- 2 (x w) w
    y:sum():backward()
    assert.matches("backward: Square's saved values were freed by an earlier backward through this graph",
                   err(function() y:sum():backward() end), 1, true)
    local a = x * 1
    local z = Square.apply(a, 1)
    dt.no_grad(function() a:add_(1) end)
    assert.matches("a tensor that Square saved for backward was modified by an in-place op (add_)",
                   err(function() z:sum():backward() end), 1, true)
  end)

  it("checks its definition and save_for_backward's arguments", function()
    assert.matches("autograd.Function: backward must be a function, got nil",
                   err(dt.autograd.Function, {forward = function() end}), 1, true)
    local F = dt.autograd.Function {name = "SaveNumber", forward = function(ctx, x) ctx:save_for_backward(x, 3); return x end,
                                    backward = function(_, g) return g end}
    assert.matches("SaveNumber: save_for_backward: argument 2 is a number; save tensors only",
                   err(F.apply, leaf({1.0})), 1, true)
  end)

  it("works inside a larger graph: gradients flow through it to earlier ops", function()
    local x = leaf({1.0, 2.0})
    local y = Square.apply(x * 2 + 1, 1) -- (2x + 1)^2: 4 (2x + 1)
    ;(y + x):sum():backward()
    close({4 * 3 + 1, 4 * 5 + 1}, x.grad)
  end)
end)

describe("dt.utils.checkpoint", function()
  -- a small model with a random multiplicative mask (the recomputation must draw the same
  -- numbers) and a parameter used inside fn
  local function model(w1, w2)
    return function(h, scale)
      local a = h:mm(w1) * (dt.rand(h:size(1), 4) * 2) * scale
      return a:mm(w2), a
    end
  end

  it("gives the gradients of the plain forward, random numbers included, and restores the generator", function()
    dt.manual_seed(7)
    local w1, w2 = dt.randn({3, 4}, {requires_grad = true}), dt.randn({4, 2}, {requires_grad = true})
    local x = dt.randn({5, 3}, {requires_grad = true})
    local fn = model(w1, w2)
    local state = dt.get_rng_state()
    local out, a = fn(x, 0.5)
    ;(out:sum() + (a * a):sum()):backward()
    local gx, g1, g2 = x.grad:totable(), w1.grad:totable(), w2.grad:totable()
    local after_plain = dt.get_rng_state()
    x.grad, w1.grad, w2.grad = nil, nil, nil

    dt.set_rng_state(state)
    local cout, ca = dt.utils.checkpoint(fn, x, 0.5)
    assert.are.equal("checkpoint", cout.grad_fn)
    assert.are.same(out:totable(), cout:totable())
    assert.are.same(after_plain, dt.get_rng_state())
    local loss = cout:sum() + (ca * ca):sum()
    loss:backward()
    assert.are.same(after_plain, dt.get_rng_state()) -- backward put the generator back where it was
    close(gx, x.grad)
    close(g1, w1.grad)
    close(g2, w2.grad)
  end)

  it("with dt.F.dropout inside: the same mask in the recomputation, the plain forward's gradients", function()
    local w = dt.randn({6, 6}, {requires_grad = true})
    local x = dt.randn({4, 6}, {requires_grad = true})
    local function block(h) return dt.F.dropout(h:mm(w), 0.5):mm(w) end
    dt.manual_seed(3)
    local out = block(x)
    out:sum():backward()
    local gx, gw = x.grad:totable(), w.grad:totable()
    x.grad, w.grad = nil, nil
    dt.manual_seed(3)
    local cout = dt.utils.checkpoint(block, x)
    assert.are.same(out:totable(), cout:totable())
    cout:sum():backward()
    close(gx, x.grad)
    close(gw, w.grad) -- another mask would give other gradients
  end)

  it("keeps no intermediate values: fn runs again in backward, with grad mode on", function()
    local runs, modes = 0, {}
    local x = leaf({1.0, 2.0})
    local y = dt.utils.checkpoint(function(t)
      runs = runs + 1
      modes[runs] = dt.is_grad_enabled()
      return t * t * t
    end, x)
    assert.are.equal(1, runs)
    y:sum():backward()
    assert.are.equal(2, runs)
    assert.are.same({false, true}, modes)
    close({3, 12}, x.grad) -- 3 x^2
  end)

  it("several tensor arguments, some not requiring grad, nil and other values between; errors in fn", function()
    local a, b = leaf({1.0, 2.0}), dt.tensor({3.0, 4.0})
    local y, tag = dt.utils.checkpoint(function(p, none, q, k) assert(none == nil); return p * q * k, "t" end, a, nil, b, 2)
    assert.are.equal("t", tag)
    y:sum():backward()
    close({6, 8}, a.grad)
    assert.is_nil(b.grad)
    local fail = false
    local z = dt.utils.checkpoint(function(p) if fail then error("recompute failed", 0) end return p * 2 end, a)
    fail = true
    assert.matches("checkpoint: error in backward: recompute failed", err(function() z:sum():backward() end), 1, true)
    assert.is_true(dt.is_grad_enabled())
    assert.matches("checkpoint: expected a function, got number", err(dt.utils.checkpoint, 3, a), 1, true)
  end)
end)
