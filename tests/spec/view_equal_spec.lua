-- t:equal(u) and t:allclose(u, rtol, atol): Lua booleans.

local h = dofile((debug.getinfo(1, "S").source:match("^@(.*/)") or "./") .. "view_helpers.lua")
local err = h.err

describe("equal", function()
  it("is true for the same shape and values", function()
    local a = dt.tensor({{1, 2}, {3, 4}}, {dtype = "float32"})
    assert.is_true(a:equal(dt.tensor({{1, 2}, {3, 4}}, {dtype = "float32"})))
    assert.is_false(a:equal(dt.tensor({{1, 2}, {3, 5}}, {dtype = "float32"})))
    assert.is_false(a:equal(dt.tensor({1, 2, 3, 4}, {dtype = "float32"}))) -- shape differs
    assert.is_false(a:equal(dt.tensor({{1, 2}}, {dtype = "float32"})))     -- no broadcasting
    assert.is_true(dt.equal(a, a))
    assert.is_true(dt.zeros(0, 2):equal(dt.zeros(0, 2)))
    assert.is_true(dt.tensor(1):equal(dt.tensor(1)))
  end)

  it("compares values across dtypes and layouts", function()
    local a = dt.tensor({{1, 2}, {3, 4}})
    for _, d in ipairs {"float32", "float64", "bfloat16", "float16", "int64", "int32", "uint8"} do
      assert.is_true(a:equal(dt.tensor({{1, 2}, {3, 4}}, {dtype = d})), d)
    end
    assert.is_true(a:t():equal(dt.tensor({{1, 3}, {2, 4}})))
    assert.is_false(a:t():equal(a))
    assert.is_true(dt.tensor({true, false}):equal(dt.tensor({1, 0})))
    assert.is_false(dt.tensor({9007199254740993}):equal(dt.tensor({9007199254740992})))
  end)

  it("treats NaN as unequal", function()
    local n = dt.tensor({0 / 0})
    assert.is_false(n:equal(n))
  end)
end)

describe("allclose", function()
  it("uses |a - b| <= atol + rtol * |b| with rtol 1e-5, atol 1e-8 by default", function()
    local a = dt.tensor({1.0, 100.0}, {dtype = "float64"})
    assert.is_true(a:allclose(dt.tensor({1.0 + 5e-6, 100.0 + 5e-4}, {dtype = "float64"})))
    assert.is_false(a:allclose(dt.tensor({1.0 + 2e-5, 100.0}, {dtype = "float64"})))
    assert.is_true(a:allclose(dt.tensor({1.1, 100}, {dtype = "float64"}), 0.2))
    assert.is_true(a:allclose(dt.tensor({1.5, 100}, {dtype = "float64"}), 0, 0.5))
    assert.is_false(a:allclose(dt.tensor({1.5, 100}, {dtype = "float64"}), 0, 0.4))
    assert.is_true(a:allclose(dt.tensor({1.5, 100}, {dtype = "float64"}), {atol = 0.5}))
    assert.is_true(dt.allclose(a, a))
  end)

  it("broadcasts like torch.allclose", function()
    local a = dt.tensor({{1, 1}, {1, 1}})
    assert.is_true(a:allclose(dt.tensor({1.0})))
    assert.is_true(a:allclose(dt.tensor(1.0)))
    assert.is_false(a:allclose(dt.tensor({1.0, 2.0})))
    assert.matches("allclose: shapes {2,2} and {3} cannot broadcast", err(function() return a:allclose(dt.zeros(3)) end),
      1, true)
  end)

  it("NaN is close to nothing unless equal_nan; equal infinities are close", function()
    local n = dt.tensor({0 / 0, 1})
    assert.is_false(n:allclose(n))
    assert.is_true(n:allclose(n, {equal_nan = true}))
    local i = dt.tensor({1 / 0, -1 / 0})
    assert.is_true(i:allclose(i))
    assert.is_false(i:allclose(dt.tensor({1 / 0, 1 / 0})))
    assert.is_false(dt.tensor({1e30}):allclose(dt.tensor({1 / 0})))
  end)

  it("rejects negative tolerances", function()
    assert.matches("allclose: rtol and atol must be non-negative",
      err(function() return dt.zeros(1):allclose(dt.zeros(1), -1) end), 1, true)
  end)
end)

-- equal/allclose with rtol and atol.
do
  local S = require("tests.spec.support.spec_helpers")
  local err, fails, close, tmpname = S.err, S.fails, S.close, S.tmpname

  describe("equal and allclose: tolerances, shapes", function()
    it("t:equal(u) (boolean), t:allclose(u, rtol, atol)", function()
      local a = dt.tensor({{1, 5}, {4, 2}}, {dtype = "float64"})
      assert.are.equal(true, a:equal(a:clone()))
      assert.are.equal(false, a:equal(a + 1))
      assert.are.equal(false, a:equal(dt.tensor({1, 5, 4, 2}, {dtype = "float64"})))
      assert.are.equal(true, a:allclose(a + 1e-9))
      assert.are.equal(false, a:allclose(a + 1e-3))
      assert.are.equal(true, a:allclose(a + 1e-3, 1e-2, 0))
      assert.are.equal(true, a:allclose(a + 1e-3, 0, 1e-2))
      fails("allclose: shapes {2,2} and {5} cannot broadcast", a.allclose, a, dt.ones(5))
    end)
  end)
end
