-- Backward rules where PyTorch's choice matters: at kinks, ties and zeros, which the op-table
-- gradient check (finite differences, values jittered away from kinks) cannot see.  Each
-- expected gradient is written out by hand from torch's derivative formulas.

-- the gradient of sum(f(x) * w) (w = ones by default) with respect to x
local function grad(values, f, w)
  local x = dt.tensor(values, {dtype = "float64"}):requires_grad_()
  local y = f(x)
  local L = w and (y * dt.tensor(w, {dtype = "float64"})):sum() or y:sum()
  L:backward()
  return x.grad:totable()
end

local function same(want, got, what)
  assert.are.same(want, got, what)
end

describe("backward rules at kinks", function()
  it("relu'(0) = 0, abs'(0) = 0, leaky_relu'(0) = the slope", function()
    same({0, 0, 1}, grad({-1, 0, 2}, function(x) return x:relu() end))
    same({-1, 0, 1}, grad({-2, 0, 3}, function(x) return x:abs() end))
    same({0.25, 0.25, 1}, grad({-2, 0, 3}, function(x) return dt.F.leaky_relu(x, 0.25) end))
  end)

  it("clamp passes the gradient at its bounds, hardtanh does not", function()
    same({1, 1, 1, 0, 0}, grad({-1, 0, 1, 2, -3}, function(x) return x:clamp(-1, 1) end))
    same({1, 0, 1}, grad({0, -1, 1}, function(x) return x:clamp(0) end))
    same({1, 1, 0}, grad({0, -1, 1}, function(x) return x:clamp(nil, 0) end))
    same({0, 0, 0}, grad({-1, 0, 1}, function(x) return x:clamp(1, -1) end), "min > max: the result is max")
    same({0, 1, 0, 0}, grad({-1, 0, 1, 2}, function(x) return x:hardtanh(-1, 1) end))
  end)

  it("gelu'(0) = 1/2 in both forms", function()
    same({0.5}, grad({0}, function(x) return dt.F.gelu(x) end))
    same({0.5}, grad({0}, function(x) return dt.F.gelu(x, {approximate = "tanh"}) end))
  end)

  it("pow at 0: no nan from 0 * inf or log(0)", function()
    same({0, 4}, grad({0, 2}, function(x) return x ^ 2 end))
    same({0, 0}, grad({0, 2}, function(x) return x ^ 0 end), "t ^ 0: zeros")
    same({0, 0}, grad({0, 2}, function(x) return x:pow(dt.tensor({0, 0}, {dtype = "float64"})) end))
    -- d/db a^b at a = 0, b >= 0 is 0 (torch's limit); 0 ^ t the same for t >= 0
    local a = dt.tensor({0, 0}, {dtype = "float64"})
    same({0, 0}, grad({2, 0}, function(b) return a:pow(b) end))
    same({0, 0}, grad({1, 0}, function(t) return dt.pow(0, t) end))
  end)
end)

describe("backward rules at ties and zeros", function()
  it("amax/amin share the gradient evenly among ties", function()
    same({0, 0.5, 0.5, 0}, grad({1, 3, 3, 2}, function(x) return x:amax() end))
    same({{0, 0.5, 0.5}, {0.5, 0.5, 0}}, grad({{1, 3, 3}, {2, 2, 0}}, function(x) return x:amax(2) end))
    same({{0.5, 0, 0.5}, {0, 0, 1}}, grad({{1, 3, 1}, {2, 2, 0}}, function(x) return x:amin(2) end))
    same({1 / 3, 1 / 3, 1 / 3}, grad({7, 7, 7}, function(x) return x:max() end), "max() without a dim is amax")
  end)

  it("max/min over a dim send the gradient to the index they return (the first of ties)", function()
    local x = {{1, 3, 3}, {2, 2, 0}}
    same({{0, 1, 0}, {1, 0, 0}}, grad(x, function(t) return (t:max(2)) end))
    same({{1, 0, 0}, {0, 0, 1}}, grad(x, function(t) return (t:min(2)) end))
    same({{0, 2, 0}, {0, 0, 0}}, grad(x, function(t) return (t:max(2, true)) end, {{2}, {0}}), "keepdim")
    -- the indices stay 1-based for Lua, and the saved 0-based ones untouched
    local t = dt.tensor(x, {dtype = "float64"}):requires_grad_()
    local v, i = t:max(1)
    same({2, 1, 1}, i:totable())
    v:sum():backward()
    same({{0, 1, 1}, {1, 0, 0}}, t.grad:totable())
  end)

  it("prod: the product of the others, with one zero or several", function()
    same({12, 8, 6}, grad({2, 3, 4}, function(x) return x:prod() end))
    same({0, 6, 0}, grad({2, 0, 3}, function(x) return x:prod() end), "one zero")
    same({0, 0, 0}, grad({0, 2, 0}, function(x) return x:prod() end), "two zeros")
    same({{0, 3, 0}, {12, 8, 6}, {0, 0, 0}},
      grad({{1, 0, 3}, {2, 3, 4}, {0, 5, 0}}, function(x) return x:prod(2) end), "along a dim")
  end)

  it("norm at zero: 0, as torch (no nan)", function()
    for _, p in ipairs {1, 2, 3, 1.5, math.huge} do
      same({0, 0, 0}, grad({0, 0, 0}, function(x) return x:norm(p) end), "p = " .. p)
    end
    same({0.6, -0.8}, grad({3, -4}, function(x) return x:norm() end))
    same({0, -0.5, 0.5}, grad({1, -3, 3}, function(x) return x:norm(math.huge) end), "inf: ties share")
  end)

  it("where and masked_fill route the gradient by the mask", function()
    local c = dt.tensor({true, false, true})
    same({2, 0, 4}, grad({1, 1, 1}, function(a) return dt.where(c, a, 0) end, {2, 3, 4}))
    same({0, 3, 0}, grad({1, 1, 1}, function(b) return dt.where(c, 0, b) end, {2, 3, 4}))
    same({0, 3, 0}, grad({1, 1, 1}, function(x) return x:masked_fill(c, 9) end, {2, 3, 4}))
  end)
end)

describe("backward rules of in-place ops", function()
  it("mul_ uses self as it was before the write; add_ scales by alpha", function()
    local x = dt.tensor({1, 2}, {dtype = "float64"}):requires_grad_()
    local w = dt.tensor({3, 5}, {dtype = "float64"}):requires_grad_()
    local y = x * 2
    y:mul_(w)
    y:add_(w, 10)
    y:sum():backward()
    same({6, 10}, x.grad:totable())
    same({12, 14}, w.grad:totable(), "d/dw = x*2 before the write, + alpha")
  end)

  it("copy_, fill_ and zero_ give self a zero gradient, copy_'s src the gradient", function()
    local x = dt.tensor({1, 2}, {dtype = "float64"}):requires_grad_()
    local s = dt.tensor({7}, {dtype = "float32"}):requires_grad_()
    local y = x * 1
    y:copy_(s)
    y:sum():backward()
    same({0, 0}, x.grad:totable())
    assert.are.equal("float32", s.grad.dtype)
    same({2}, s.grad:totable(), "broadcast src: summed back")
    for _, f in ipairs {function(t) return t:fill_(3) end, function(t) return t:zero_() end} do
      local z = dt.tensor({1, 2}, {dtype = "float64"}):requires_grad_()
      local t = z * 1
      f(t)
      t:sum():backward()
      same({0, 0}, z.grad:totable())
    end
  end)
end)
