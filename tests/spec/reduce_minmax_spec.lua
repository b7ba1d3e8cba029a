local R = require "tests.spec.reduce_ref"

local shape = {3, 4, 5}
local flat, t = R.fixture(shape, 2) -- has ties: indices must be the first occurrence, as torch

describe("amax / amin / max / min / argmax / argmin", function()
  it("give the global value as a 0-d tensor in the input dtype", function()
    for _, dtype in ipairs({"float32", "float64", "bfloat16", "float16", "int64", "int32"}) do
      local l = {} -- integers: the same values times 4
      for i, v in ipairs(flat) do l[i] = dtype:match("int") and math.floor(v * 4) or v end
      local x = dt.tensor(R.nest(l, shape), {dtype = dtype})
      for _, op in ipairs({"max", "amax"}) do
        local m = x[op](x)
        assert.are.equal(0, m:dim())
        assert.are.equal(dtype, m.dtype)
        assert.are.equal(R.max(l), m:item())
      end
      assert.are.equal(R.min(l), x:min():item())
      assert.are.equal(R.min(l), x:amin():item())
      assert.are.equal(R.argmax(l), x:argmax():item())
      assert.are.equal(R.argmin(l), x:argmin():item())
    end
  end)

  it("return (values, 1-based int64 indices) along a dim", function()
    local x = t("float32")
    for _, d in ipairs({1, 2, 3, -1}) do
      local v, i = x:max(d)
      R.close(v:totable(), (R.reduce(flat, shape, {d}, false, R.max)), 0)
      assert.are.equal("int64", i.dtype)
      assert.are.same((R.reduce(flat, shape, {d}, false, R.argmax)), i:totable())
      local vn, inn = dt.min(x, d, true)
      R.close(vn:totable(), (R.reduce(flat, shape, {d}, true, R.min)), 0)
      assert.are.same((R.reduce(flat, shape, {d}, true, R.argmin)), inn:totable())
      assert.are.same((R.reduce(flat, shape, {d}, false, R.argmax)), x:argmax(d):totable())
      assert.are.same((R.reduce(flat, shape, {d}, true, R.argmin)), x:argmin(d, true):totable())
    end
  end)

  it("amax/amin take several dims", function()
    local x = t("float64")
    R.close(x:amax({1, 3}):totable(), (R.reduce(flat, shape, {1, 3}, false, R.max)), 0)
    R.close(dt.amin(x, {-1, -2}, true):totable(), (R.reduce(flat, shape, {2, 3}, true, R.min)), 0)
  end)

  it("work on bool and uint8", function()
    local b = dt.tensor({{false, true}, {false, false}})
    assert.are.equal("bool", b:amax().dtype)
    assert.are.equal(true, b:amax():item())
    assert.are.same({true, false}, b:amax(2):totable())
    assert.are.equal(2, b:argmax():item())
    local u = dt.tensor({3, 250, 7}, {dtype = "uint8"})
    assert.are.equal(250, u:max():item())
    local _, i = u:min(1)
    assert.are.equal(1, i:item())
  end)

  it("propagate nan like torch (the first nan wins)", function()
    local x = dt.tensor({1, 0 / 0, 5, 0 / 0})
    assert.is_true(x:amax():item() ~= x:amax():item())
    assert.are.equal(2, x:argmax():item())
    assert.are.equal(2, x:argmin():item())
    local v, i = x:max(1)
    assert.is_true(v:item() ~= v:item())
    assert.are.equal(2, i:item())
  end)

  it("handle 0-d tensors and keep int64 exact", function()
    local s = dt.tensor(4.5)
    assert.are.equal(4.5, s:max():item())
    local v, i = s:max(1)
    assert.are.equal(4.5, v:item())
    assert.are.equal(1, i:item())
    assert.are.equal(1, s:argmax():item())
    local big = dt.tensor({(1 << 62) + 1, 1 << 62})
    assert.are.equal((1 << 62) + 1, big:max():item())
    assert.are.equal(2, big:argmin():item())
  end)

  it("reduce along a non-zero dim of a tensor with a zero-size dim", function()
    assert.are.same({}, dt.zeros(0, 3):amax(2):totable())
  end)

  it("raise clear errors", function()
    local e = dt.zeros(0, 3)
    assert.matches("max: cannot reduce over a zero-size dim", R.error_of(e.max, e, 1), 1, true)
    assert.matches("^max: cannot reduce over a zero%-size dim", R.error_of(e.max, e)) -- named as called, not amax
    assert.matches("^min: cannot reduce over a zero%-size dim", R.error_of(e.min, e, {keepdim = true}))
    assert.matches("argmax: cannot reduce over a zero-size dim", R.error_of(e.argmax, e), 1, true)
    assert.matches("amin: cannot reduce over a zero-size dim", R.error_of(e.amin, e, {1, 2}), 1, true)
    local x = t("float32")
    assert.matches("max: dim 4 out of range for a 3-d tensor", R.error_of(x.max, x, 4), 1, true)
    assert.matches("max: dim must be an integer, got table", R.error_of(x.max, x, {1, 2}), 1, true)
    assert.matches("argmax: dim must be an integer, got string", R.error_of(x.argmax, x, "x"), 1, true)
  end)
end)

-- max/min with indices, amax/amin, argmax, prod; 1-based indices; zero-size errors.
do
  local S = require("tests.spec.support.spec_helpers")
  local err, fails, close, tmpname = S.err, S.fails, S.close, S.tmpname

  describe("max min amax amin argmax prod: values, 1-based indices, errors", function()
    local a = dt.tensor({{1, 5, 3}, {4, 2, 6}}, {dtype = "float64"})

    it("max min amax amin argmax prod", function()
      assert.are.equal(6, a:max():item())
      local v, i = a:max(2)
      assert.are.same({5, 6}, v:totable())
      assert.are.same({2, 3}, i:totable()) -- 1-based indices
      v, i = a:min(1)
      assert.are.same({1, 2, 3}, v:totable())
      assert.are.same({1, 2, 1}, i:totable())
      assert.are.same({5, 6}, a:amax(2):totable())
      assert.are.equal(1, a:amin({1, 2}):item())
      assert.are.equal(6, a:argmax():item()) -- flat, 1-based
      assert.are.same({2, 3}, a:argmax(2):totable())
      assert.are.same({{2}, {3}}, a:argmax(2, true):totable())
      assert.are.equal("int64", a:argmax(2).dtype)
      assert.are.equal(720, a:prod():item())
      assert.are.same({15, 48}, a:prod(2):totable())
      fails("argmax: cannot reduce over a zero-size dim", function() return dt.zeros(0):argmax() end)
      fails("max: cannot reduce over a zero-size dim", function() return dt.zeros(0):max() end)
      fails("min: cannot reduce over a zero-size dim", function() return dt.zeros(2, 0):min({keepdim = true}) end)
    end)
  end)
end
