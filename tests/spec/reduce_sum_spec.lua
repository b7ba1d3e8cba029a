local R = require "tests.spec.reduce_ref"
local S = require "tests.spec.support.spec_helpers"

local shape = {2, 3, 4}
local flat, t = R.fixture(shape, 1)

describe("sum / mean / prod", function()
  it("reduce every dim to a 0-d tensor in every float dtype", function()
    for _, dtype in ipairs(R.float_dtypes) do
      local x = t(dtype)
      local s = x:sum()
      assert.are.equal(0, s:dim())
      assert.are.equal(dtype, s.dtype)
      R.close(s:item(), R.sum(flat), R.tol[dtype])
      R.close(x:mean():item(), R.mean(flat), R.tol[dtype])
      assert.are.equal(dtype, x:mean().dtype)
    end
  end)

  it("take one dim, positive or negative, with keepdim positional or as an option", function()
    local x = t("float64")
    for _, d in ipairs({1, 2, 3, -1, -2, -3}) do
      R.close(x:sum(d):totable(), (R.reduce(flat, shape, {d}, false, R.sum)), 1e-12)
      R.close(x:mean(d):totable(), (R.reduce(flat, shape, {d}, false, R.mean)), 1e-12)
      R.close(x:prod(d):totable(), (R.reduce(flat, shape, {d}, false, R.prod)), 1e-12)
      local kept, kshape = R.reduce(flat, shape, {d}, true, R.sum)
      assert.are.same(kshape, x:sum(d, true):size())
      R.close(x:sum(d, true):totable(), kept, 1e-12)
      R.close(x:sum(d, {keepdim = true}):totable(), kept, 1e-12)
      R.close(dt.sum(x, d, true):totable(), kept, 1e-12)
    end
  end)

  it("take a table of dims", function()
    local x = t("float32")
    R.close(x:sum({1, 3}):totable(), (R.reduce(flat, shape, {1, 3}, false, R.sum)), 1e-5)
    R.close(x:sum({-1, 2}, true):totable(), (R.reduce(flat, shape, {2, 3}, true, R.sum)), 1e-5)
    R.close(x:mean({1, 2}):totable(), (R.reduce(flat, shape, {1, 2}, false, R.mean)), 1e-5)
    R.close(x:sum({1, 2, 3}):item(), R.sum(flat), 1e-5)
    R.close(x:sum({}):item(), R.sum(flat), 1e-5) -- no dims: every dim, as torch's sum(dim=[])
    assert.are.same({1, 1, 1}, x:sum(nil, true):size())
    assert.are.same({1, 1, 1}, x:sum({keepdim = true}):size())
    R.close(dt.prod(x, {2, 3}):totable(), (R.reduce(flat, shape, {2, 3}, false, R.prod)), 1e-5)
  end)

  it("reduce leading dims of wide rows (the row-accumulating path)", function()
    local wshape = {3, 5, 700} -- rows longer than one 512-column chunk
    local wflat = R.values(3 * 5 * 700, 9)
    for _, dtype in ipairs({"float32", "float64", "float16"}) do
      local x = dt.tensor(R.nest(wflat, wshape), {dtype = dtype})
      for _, dims in ipairs({{1}, {2}, {1, 2}, {-2}}) do
        R.close(x:sum(dims):totable(), (R.reduce(wflat, wshape, dims, false, R.sum)), R.tol[dtype])
        R.close(x:mean(dims, true):totable(), (R.reduce(wflat, wshape, dims, true, R.mean)), R.tol[dtype])
      end
    end
    local e = dt.zeros(0, 20):mean(1):totable()
    assert.are.equal(20, #e)
    assert.is_true(e[20] ~= e[20])
  end)

  it("sum a contiguous float32 tensor in one order: 32 double lanes (i mod 32), folded in halves", function()
    -- +-2^60, 2^30, 1, 2^-20: a double sum absorbs the small ones or not by the order, and the
    -- float32 result shows it (2^60 at 0, -2^60 at 8, 1 at 32 gives 0 here, 1 in 8 lanes)
    local prng, mags = S.prng(32), {2.0 ^ 60, 2.0 ^ 30, 1, 2.0 ^ -20}
    for _, n in ipairs({33, 1, 31, 32, 100, 1000, 4099}) do
      local v = {}
      for i = 1, n do v[i] = mags[prng.int(1, 4)] * (prng.int(0, 1) * 2 - 1) end
      if n == 33 then
        for i = 1, n do v[i] = 0 end
        v[1], v[9], v[33] = 2.0 ^ 60, -2.0 ^ 60, 1
      end
      local x, p = dt.tensor(v, {dtype = "float32"}), {}
      for k = 1, 32 do p[k] = 0.0 end
      for i = 1, n do p[(i - 1) % 32 + 1] = p[(i - 1) % 32 + 1] + v[i] end
      local w = 16
      while w >= 1 do
        for k = 1, w do p[k] = p[k] + p[k + w] end
        w = w // 2
      end
      if n == 33 then assert.are.equal(0, p[1]) end
      assert.are.equal(dt.tensor(p[1]):float():item(), x:sum():item(), "n = " .. n)
      assert.are.equal(dt.tensor(p[1] / n):float():item(), x:mean():item(), "mean, n = " .. n)
    end
  end)

  it("sum over leading dims gives each column the same bits wherever it sits in a row", function()
    local x = dt.randn(37, 4200) * dt.exp(dt.randn(37, 4200) * 4) -- rows wider than one 4096-column item
    local full = x:sum(1)
    for _, c in ipairs({{1, 5}, {3, 17}, {4090, 61}, {4195, 6}}) do -- vector bodies and tails at other columns
      local part = x:narrow(2, c[1], c[2]):contiguous():sum(1)
      assert.is_true(part:equal(full:narrow(1, c[1], c[2])), "columns " .. c[1] .. "+" .. c[2])
    end
    R.close(full:double():totable(), x:double():sum(1):totable(), 1e-3)
  end)

  it("sum integers and bools into int64 exactly", function()
    for _, dtype in ipairs({"int64", "int32", "uint8"}) do
      local x = dt.tensor({{1, 2, 3}, {4, 5, 6}}, {dtype = dtype})
      assert.are.equal("int64", x:sum().dtype)
      assert.are.equal(21, x:sum():item())
      assert.is_true(math.type(x:sum():item()) == "integer")
      assert.are.same({6, 15}, x:sum(2):totable())
      assert.are.same({5, 7, 9}, x:sum(1):totable())
      assert.are.equal(720, x:prod():item())
      assert.are.equal("int64", x:prod(1).dtype)
    end
    local b = dt.tensor({{true, false, true}, {true, true, true}})
    assert.are.equal("int64", b:sum().dtype)
    assert.are.equal(5, b:sum():item())
    assert.are.same({2, 1, 2}, b:sum(1):totable())
    local big = dt.tensor({1 << 62, (1 << 62) - 1, -3})
    assert.are.equal((1 << 62) + (1 << 62) - 4, big:sum():item())
  end)

  it("accept a dtype option for sum and prod", function()
    local x = dt.tensor({1, 2, 3})
    local s = x:sum(nil, {dtype = "float64"})
    assert.are.equal("float64", s.dtype)
    assert.are.equal(6, s:item())
    assert.are.equal("float32", x:prod({dtype = "float32"}).dtype)
  end)

  it("handle 0-d tensors", function()
    local s = dt.tensor(2.5)
    assert.are.equal(2.5, s:sum():item())
    assert.are.equal(2.5, s:sum(1):item())
    assert.are.equal(2.5, s:mean(-1):item())
    assert.are.equal(2.5, s:prod():item())
  end)

  it("give 0, 1 and nan over zero-size dims", function()
    local e = dt.zeros(0, 3)
    assert.are.same({0, 0, 0}, e:sum(1):totable())
    assert.are.same({1, 1, 1}, e:prod(1):totable())
    local m = e:mean(1):totable()
    assert.are.equal(3, #m)
    assert.is_true(m[1] ~= m[1])
    assert.are.same({}, e:sum(2):totable())
    assert.are.equal(0, dt.zeros(0):sum():item())
    assert.is_true(dt.zeros(0):mean():item() ~= dt.zeros(0):mean():item())
  end)

  it("propagate nan and inf", function()
    local x = dt.tensor({1, 0 / 0, 3})
    assert.is_true(x:sum():item() ~= x:sum():item())
    assert.are.equal(math.huge, dt.tensor({1, math.huge}):sum():item())
  end)

  it("raise clear errors", function()
    local x = t("float32")
    assert.matches("sum: dim 4 out of range for a 3-d tensor", R.error_of(x.sum, x, 4), 1, true)
    assert.matches("mean: dim -4 out of range for a 3-d tensor", R.error_of(x.mean, x, -4), 1, true)
    assert.matches("sum: dim 0 is invalid", R.error_of(x.sum, x, 0), 1, true)
    assert.matches("sum: dim 2 appears more than once", R.error_of(x.sum, x, {2, -2}), 1, true)
    assert.matches("sum: dim must be an integer or a table of integers, got string",
      R.error_of(x.sum, x, "a"), 1, true)
    assert.matches("sum: dims must be integers, got string", R.error_of(x.sum, x, {1, "b"}), 1, true)
    assert.matches("sum: keepdim must be a boolean or an options table, got number",
      R.error_of(x.sum, x, 1, 1), 1, true)
    local i = dt.tensor({1, 2})
    assert.matches("mean: input dtype int64 is not floating point; use :to('float32')",
      R.error_of(i.mean, i), 1, true)
    assert.matches("tensor expected, got number", R.error_of(dt.sum, 3), 1, true)
  end)
end)

-- sum/mean over all dims or given dims, keepdim, and their errors.
do
  local S = require("tests.spec.support.spec_helpers")
  local err, fails, close, tmpname = S.err, S.fails, S.close, S.tmpname

  describe("sum and mean: all dims, given dims, keepdim", function()
    local a = dt.tensor({{1, 5, 3}, {4, 2, 6}}, {dtype = "float64"})

    it("dt.ones(2,3):sum(1) reduces the first dim", function()
      assert.are.same({2, 2, 2}, dt.ones(2, 3):sum(1):totable())
    end)

    it("sum mean over all or given dims with keepdim", function()
      assert.are.equal(21, a:sum():item())
      assert.are.same({9, 12}, a:sum(2):totable())
      assert.are.same({{9}, {12}}, a:sum(2, true):totable())
      assert.are.same({{9}, {12}}, a:sum(-1, {keepdim = true}):totable())
      assert.are.equal(21, a:sum({1, 2}):item())
      assert.are.equal(3.5, a:mean():item())
      assert.are.same({2.5, 3.5, 4.5}, a:mean(1):totable())
      assert.are.same({{2.5, 3.5, 4.5}}, a:mean(1, true):totable())
      fails("sum: dim 3 out of range for a 2-d tensor", a.sum, a, 3)
      fails("mean: dim 1 appears more than once", a.mean, a, {1, 1})
      fails("mean: input dtype int64 is not floating point", function() return dt.tensor({1, 2}):mean() end)
    end)
  end)
end
