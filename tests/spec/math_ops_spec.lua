-- The math family on plain tensors: the semantics the op-table cases do not reach (torch's
-- half-to-even rounding and decimals, nan_to_num's per-dtype defaults, lerp's exact ends,
-- logsumexp with infinities, all/any on empty tensors, the scans' dtypes, var_mean's pair,
-- masked_fill_ in place), the gradients gelu and remainder now take through erf and floor,
-- and the errors, which name the op and the values.
local S = require "tests.spec.support.spec_helpers"

local function t(v, dtype) return dt.tensor(v, {dtype = dtype or "float64"}) end
local nan, inf = 0 / 0, math.huge

describe("rounding and sign", function()
  it("rounds half to even, with decimals scaled as torch", function()
    assert.are.same({-2, -0.0, 0, 2, 2, 4}, t({-2.5, -0.5, 0.5, 1.5, 2.5, 3.5}):round():totable())
    assert.are.same({1.23, 123.5, -0.12}, t({1.2345, 123.5, -0.125}):round(2):totable())
    assert.are.same({1200, 1200, 0}, t({1234.5, 1250, 49}):round({decimals = -2}):totable())
    S.close(0.4, t({0.45}, "float32"):round(1):item(), 1e-7) -- float32: 0.45 * 10 rounds to 4.5 first
  end)

  it("floor, ceil, trunc keep integers as they are and follow C on floats", function()
    local x = t({-1.5, -0.25, 0.75, 2})
    assert.are.same({-2, -1, 0, 2}, x:floor():totable())
    assert.are.same({-1, 0, 1, 2}, x:ceil():totable())
    assert.are.same({-1, 0, 0, 2}, x:trunc():totable())
    local i = dt.tensor({-3, 0, 7}, {dtype = "int32"})
    for _, name in ipairs {"floor", "ceil", "trunc", "round"} do
      assert.are.same({"int32", {-3, 0, 7}}, {i[name](i).dtype, i[name](i):totable()}, name)
    end
    assert.are.same({"int32", {-1, 0, 1}}, {i:sign().dtype, i:sign():totable()})
  end)

  it("sign keeps NaN and zero; the tests see NaN and infinities", function()
    local x = t({-2, 0, 3, nan, inf, -inf})
    local s = x:sign():totable()
    assert.are.same({-1, 0, 1}, {s[1], s[2], s[3]})
    assert.is_true(s[4] ~= s[4])
    assert.are.same({1, -1}, {s[5], s[6]})
    assert.are.same({false, false, false, true, false, false}, x:isnan():totable())
    assert.are.same({false, false, false, false, true, true}, x:isinf():totable())
    assert.are.same({true, true, true, false, false, false}, x:isfinite():totable())
    assert.are.same({true, true}, dt.tensor({1, 2}):isfinite():totable()) -- integers are finite
  end)

  it("has zero gradients (torch's), and erf has 2/sqrt(pi) exp(-x^2)", function()
    for _, name in ipairs {"floor", "ceil", "round", "trunc", "sign"} do
      local x = t({-1.3, 0.2, 2.7}):requires_grad_()
      x[name](x):sum():backward()
      assert.are.same({0, 0, 0}, x.grad:totable(), name)
    end
    local x = t({-1, 0, 0.5}):requires_grad_()
    x:erf():sum():backward()
    S.close({2 / math.sqrt(math.pi) * math.exp(-1), 2 / math.sqrt(math.pi), 2 / math.sqrt(math.pi) * math.exp(-0.25)},
            x.grad:totable(), 1e-15)
  end)
end)

describe("nan_to_num", function()
  it("replaces NaN by 0 and infinities by the dtype's extremes unless given", function()
    local v = {nan, inf, -inf, 1.5}
    assert.are.same({0, 1.7976931348623157e308, -1.7976931348623157e308, 1.5}, t(v):nan_to_num():totable())
    assert.are.same({0, 3.4028234663852886e38, -3.4028234663852886e38, 1.5}, t(v, "float32"):nan_to_num():totable())
    assert.are.same({0, 65504, -65504, 1.5}, t(v, "float16"):nan_to_num():totable())
    assert.are.same({0, 3.3895313892515355e38, -3.3895313892515355e38, 1.5}, t(v, "bfloat16"):nan_to_num():totable())
    assert.are.same({-1, 9, -9, 1.5}, t(v):nan_to_num(-1, 9, -9):totable())
    assert.are.same({0, 7, -1.7976931348623157e308, 1.5}, dt.nan_to_num(t(v), {posinf = 7}):totable())
  end)

  it("passes the gradient where x is finite", function()
    local x = t({nan, 2, inf, -3}):requires_grad_()
    x:nan_to_num(0, 5, -5):sum():backward()
    assert.are.same({0, 1, 0, 1}, x.grad:totable())
  end)
end)

describe("lerp, addcmul, addcdiv", function()
  it("lerp is exact at both ends and broadcasts a tensor weight", function()
    local a, b = t({0.1, -3, 1e16}), t({0.7, 5, 1})
    assert.are.same(a:totable(), dt.lerp(a, b, 0):totable())
    assert.are.same(b:totable(), dt.lerp(a, b, 1):totable())
    assert.are.same({{0.25, 2.5}, {0.75, 7.5}}, dt.lerp(t({0, 0}), t({1, 10}), t({{0.25}, {0.75}})):totable())
    assert.are.same({-1, 3}, t({1, 1}):lerp(t({0, 2}), 2):totable()) -- beyond the ends too
  end)

  it("addcmul/addcdiv promote as torch and take value", function()
    local s, a, b = t({1, 2}), t({2, 3}), t({4, 6})
    assert.are.same({9, 20}, dt.addcmul(s, a, b):totable())
    assert.are.same({5, 11}, s:addcmul(a, b, 0.5):totable())
    assert.are.same({2, 3}, s:addcdiv(a, b, {value = 2}):totable())
    local i = dt.tensor({1, 2}, {dtype = "int32"})
    local r = dt.addcmul(i, i, i, 3)
    assert.are.same({"int32", {4, 14}}, {r.dtype, r:totable()})
    assert.are.equal("float64", dt.addcmul(i, s, i).dtype)
  end)
end)

describe("logsumexp, all, any", function()
  it("logsumexp is stable and follows its infinities", function()
    S.close(1000 + math.log(2), t({1000, 1000}):logsumexp(1):item(), 1e-12)
    assert.are.same(-inf, t({-inf, -inf}):logsumexp(1):item())
    assert.are.same(inf, t({-inf, inf, 3}):logsumexp(1):item())
    assert.is_true(t({nan, inf}):logsumexp(1):item() ~= t({nan, inf}):logsumexp(1):item())
    assert.are.same({-inf}, dt.zeros(0, 3, {dtype = "float64"}):logsumexp({1, 2}, true):reshape({1}):totable())
    assert.are.equal("float32", dt.tensor({1, 2}):logsumexp(1).dtype) -- integers promote
    local x = t({{1, 2}, {3, 4}}):requires_grad_()
    x:logsumexp(2):sum():backward()
    local e = 1 / (1 + math.exp(1))
    S.close({{e, 1 - e}, {e, 1 - e}}, x.grad:totable(), 1e-15)
  end)

  it("all/any give bools, over every dim or one; empty: true / false", function()
    local x = t({{1, 0, 2}, {3, 4, 5}})
    assert.are.same({false, true}, {x:all():item(), x:any():item()})
    assert.are.same({false, true}, x:all(2):totable())
    assert.are.same({{true}, {true}}, x:any(2, true):totable())
    assert.are.same({true, false}, {dt.zeros(0):all():item(), dt.zeros(0):any():item()})
    assert.is_true(t({nan}):all():item()) -- NaN is nonzero, as in torch
    assert.are.equal("bool", dt.tensor({1, 2}):any(1).dtype)
  end)
end)

describe("cumsum, cumprod, var_mean", function()
  it("scan along a dim; integers and bool accumulate in int64, or in the dtype asked", function()
    local x = dt.tensor({{1, 2, 3}, {4, 5, 6}}, {dtype = "int32"})
    local c = x:cumsum(2)
    assert.are.same({"int64", {{1, 3, 6}, {4, 9, 15}}}, {c.dtype, c:totable()})
    assert.are.same({{1, 2, 3}, {4, 10, 18}}, x:cumprod(1):totable())
    assert.are.same({"float64", {1, 3, 6}}, {dt.cumsum(dt.tensor({1, 2, 3}), -1, {dtype = "float64"}).dtype,
                                             dt.tensor({1, 2, 3}):cumsum(1, "float64"):totable()})
    assert.are.same({1, 1, 2}, dt.tensor({true, false, true}):cumsum(1):totable())
    assert.are.same({3}, dt.tensor(3.0):cumsum(1):reshape({1}):totable()) -- a 0-d tensor
  end)

  it("cumprod's gradient is exact beside zeros", function()
    local x = t({2, 0, 3, 0, 5}):requires_grad_()
    x:cumprod(1):sum():backward()
    -- d/dx_k sum_j prod_{i<=j} x_i: x_2 (the first zero) gets 2 + 2*3; the second zero 2*0*3 = 0
    assert.are.same({1, 8, 0, 0, 0}, x.grad:totable())
  end)

  it("var_mean returns torch's pair and its gradient is var's plus mean's", function()
    local x = t({{1, 2, 4}, {3, 5, 9}})
    local v, m = x:var_mean(2)
    S.close({7 / 3, 28 / 3}, v:totable(), 1e-14)
    S.close({7 / 3, 17 / 3}, m:totable(), 1e-14)
    local v0, m0 = dt.var_mean(x, nil, {correction = 0, keepdim = true})
    assert.are.same({{1, 1}, {1, 1}}, {v0:size(), m0:size()})
    local xg = x:clone():requires_grad_()
    local a, b = xg:var_mean(1);
    (a:sum() + b:sum() * 2):backward()
    local xr = x:clone():requires_grad_();
    (xr:var(1):sum() + xr:mean(1):sum() * 2):backward()
    S.close(xr.grad:reshape({6}):totable(), xg.grad:reshape({6}):totable(), 1e-14)
  end)
end)

describe("masked_fill_", function()
  it("writes in place, returns self, and its gradient skips the filled elements", function()
    local x = t({1, 2, 3, 4})
    assert.are.equal(x, x:masked_fill_(x:gt(2), -1))
    assert.are.same({1, 2, -1, -1}, x:totable())
    local v = t({{1, 2}, {3, 4}})
    v:select(1, 2):masked_fill_(t({true, false}, "bool"), 0) -- through a view, into its base
    assert.are.same({{1, 2}, {0, 4}}, v:totable())
    local leaf = t({1, 2, 3}):requires_grad_()
    local y = leaf * 1
    y:masked_fill_(dt.tensor({false, true, false}), 9)
    y:sum():backward()
    assert.are.same({1, 0, 1}, leaf.grad:totable())
  end)
end)

describe("gradients through erf and floor", function()
  it("gelu's gradient is Phi(x) + x phi(x), also at 0 and far out", function()
    local xs = {-6, -1, 0, 0.5, 6}
    local x = t(xs):requires_grad_()
    dt.F.gelu(x):sum():backward()
    local want = {}
    for k, v in ipairs(xs) do
      local phi = math.exp(-v * v / 2) / math.sqrt(2 * math.pi)
      want[k] = 0.5 * (1 + t({v / math.sqrt(2)}):erf():item()) + v * phi
    end
    S.close(want, x.grad:totable(), 1e-15)
  end)

  it("remainder's gradient for b is -floor(a / b), also where the remainder is 0", function()
    local a, b = t({7, -7, 6, 5.5}):requires_grad_(), t({2, 2, 3, -2}):requires_grad_()
    a:remainder(b):sum():backward()
    assert.are.same({1, 1, 1, 1}, a.grad:totable())
    assert.are.same({-3, 4, -2, 3}, b.grad:totable())
    local c = t({3, -4}):requires_grad_()
    dt.remainder(7, c):sum():backward() -- 7 % c: -floor(7 / c)
    assert.are.same({-2, 2}, c.grad:totable())
  end)
end)

describe("errors name the op and the values", function()
  it("refuses what torch refuses", function()
    S.fails("round: decimals (1) need a floating-point tensor, got int64", function() return dt.tensor({1}):round(1) end)
    S.fails("round: decimals must be an integer, got number", function() return t({1}):round(0.5) end)
    S.fails("floor: not supported for bool tensors", function() return dt.tensor({true}):floor() end)
    S.fails("lerp: expected dtype float64 for end but got dtype float32", function() return dt.lerp(t({1}), t({1}, "float32"), 0.5) end)
    S.fails("lerp: expects floating-point tensors, got int64 for start", function() return dt.lerp(dt.tensor({1}), dt.tensor({2}), 0.5) end)
    S.fails("lerp: weight must be a number or a tensor, got string", function() return dt.lerp(t({1}), t({2}), "x") end)
    S.fails("addcdiv: integer division is not supported", function() local i = dt.tensor({1}) return dt.addcdiv(i, i, i) end)
    S.fails("addcmul: for integral input tensors, value must not be a floating point number, got 0.5",
            function() local i = dt.tensor({1}) return dt.addcmul(i, i, i, 0.5) end)
    S.fails("addcmul: shapes", function() return dt.addcmul(t({1, 2}), t({1, 2, 3}), t({1})) end)
    S.fails("logsumexp: dim is required", function() return t({1}):logsumexp() end)
    S.fails("cumsum: dim must be an integer, got no value", function() return t({1}):cumsum() end)
    S.fails("cumprod: dim 3 out of range", function() return t({1}):cumprod(3) end)
    S.fails("var_mean: input dtype int64 is not floating point", function() return dt.tensor({1, 2}):var_mean() end)
    S.fails("all: dim 2 out of range", function() return t({1}):all(2) end)
    S.fails("nan_to_num: posinf must be a number, got string", function() return t({1}):nan_to_num(0, "big") end)
    S.fails("masked_fill_: mask must be a bool tensor", function() return t({1}):masked_fill_(t({1}), 0) end)
    S.fails("masked_fill_: cannot write in place into a tensor whose elements overlap",
            function() return t({1}):expand({3}):masked_fill_(dt.tensor({true, false, true}), 0) end)
    S.fails("Partial: unknown reduce op 'median' (expected sum, avg, max, min or prod)", function() return dt.Partial("median") end)
  end)
end)
