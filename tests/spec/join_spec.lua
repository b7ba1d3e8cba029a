-- dt.cat and dt.stack: shapes, values, dtype promotion, non-contiguous inputs, errors.

local h = dofile((debug.getinfo(1, "S").source:match("^@(.*/)") or "./") .. "view_helpers.lua")
local err = h.err

describe("cat", function()
  it("joins along dim 1 by default and along any dim", function()
    local a, b = dt.tensor({{1, 2}, {3, 4}}), dt.tensor({{5, 6}})
    assert.are.same({{1, 2}, {3, 4}, {5, 6}}, dt.cat({a, b}):totable())
    assert.are.same({{1, 2, 1, 2}, {3, 4, 3, 4}}, dt.cat({a, a}, 2):totable())
    assert.are.same({{1, 2, 9}, {3, 4, 9}}, dt.cat({a, dt.full({2, 1}, 9)}, -1):totable())
    assert.are.same({1, 2, 3}, dt.cat({dt.tensor({1}), dt.tensor({2, 3})}):totable())
    assert.is_false(dt.cat({a}):shares_storage(a)) -- always a new tensor
  end)

  it("promotes dtypes across inputs", function()
    local i, f, d = dt.tensor({1, 2}), dt.tensor({0.5}), dt.tensor({0.25}, {dtype = "float64"})
    local r = dt.cat({i, f})
    assert.are.equal("float32", r.dtype)
    assert.are.same({1, 2, 0.5}, r:totable())
    assert.are.equal("float64", dt.cat({f, d}).dtype)
    assert.are.equal("int64", dt.cat({i, dt.tensor({true})}).dtype)
    assert.are.same({1, 2, 1}, dt.cat({i, dt.tensor({true})}):totable())
    assert.are.equal("int32", dt.cat({dt.tensor({1}, {dtype = "uint8"}), dt.tensor({2}, {dtype = "int32"})}).dtype)
    assert.are.equal("float32", dt.cat({dt.tensor({1}, {dtype = "bfloat16"}), dt.tensor({2}, {dtype = "float16"})}).dtype)
  end)

  it("reads non-contiguous inputs", function()
    local a = dt.tensor({{1, 2, 3}, {4, 5, 6}}):t() -- {3,2}
    assert.are.same({{1, 4}, {2, 5}, {3, 6}, {1, 4}, {2, 5}, {3, 6}}, dt.cat({a, a}):totable())
    assert.are.same({{1, 4, 1}, {2, 5, 2}, {3, 6, 3}}, dt.cat({a, a:narrow(2, 1, 1)}, 2):totable())
  end)

  it("skips 1-d empty inputs, keeps empty slabs", function()
    local a = dt.tensor({{1, 2}})
    assert.are.same({{1, 2}}, dt.cat({dt.zeros(0), a}):totable())
    assert.are.same({1, 2}, dt.cat({a, dt.zeros(0, 2)}):size())
    assert.are.same({0}, dt.cat({dt.zeros(0), dt.zeros(0)}):size())
  end)

  it("reports shape mismatches with the input index and shapes", function()
    local a, b = dt.zeros(2, 3), dt.zeros(2, 4)
    assert.matches("cat: tensor 2 has shape {2,4} but tensor 1 has shape {2,3} (sizes must match except in dim 1)",
      err(dt.cat, {a, b}), 1, true)
    assert.matches("cat: tensor 2 has shape {3} but tensor 1 has shape {2,3}", err(dt.cat, {a, dt.zeros(3)}), 1, true)
    assert.matches("cat: dim 3 out of range for a 2-d tensor", err(dt.cat, {a, a}, 3), 1, true)
    assert.matches("cat: expected a non-empty list of tensors", err(dt.cat, {}), 1, true)
    assert.matches("cat: element 2 of the list is a number, not a tensor", err(dt.cat, {a, 3}), 1, true)
    assert.matches("cat: expects a list of tensors, got a tensor", err(dt.cat, a), 1, true)
    assert.matches("cat: zero-dimensional tensors cannot be concatenated", err(dt.cat, {dt.tensor(1)}), 1, true)
  end)
end)

describe("stack", function()
  it("adds a new dim at the given place", function()
    local a, b = dt.tensor({1, 2, 3}), dt.tensor({4, 5, 6})
    assert.are.same({{1, 2, 3}, {4, 5, 6}}, dt.stack({a, b}):totable())
    assert.are.same({{1, 4}, {2, 5}, {3, 6}}, dt.stack({a, b}, 2):totable())
    assert.are.same({{1, 4}, {2, 5}, {3, 6}}, dt.stack({a, b}, -1):totable())
    assert.are.same({2}, dt.stack({dt.tensor(1), dt.tensor(2)}):size())
    local m = dt.tensor({{1, 2}, {3, 4}})
    local s = dt.stack({m, m:t()}, 2) -- {2,2,2}
    assert.are.same({{{1, 2}, {1, 3}}, {{3, 4}, {2, 4}}}, s:totable())
  end)

  it("promotes dtypes", function()
    local s = dt.stack({dt.tensor({1}, {dtype = "int32"}), dt.tensor({1.5}, {dtype = "float64"})})
    assert.are.equal("float64", s.dtype)
    assert.are.same({{1}, {1.5}}, s:totable())
  end)

  it("reports mismatched shapes and bad dims", function()
    assert.matches("stack: tensor 2 has shape {2} but tensor 1 has shape {3} (all shapes must be equal)",
      err(dt.stack, {dt.zeros(3), dt.zeros(2)}), 1, true)
    assert.matches("stack: dim 3 out of range for a 1-d tensor (dims are 1-based: 1..2",
      err(dt.stack, {dt.zeros(3), dt.zeros(3)}, 3), 1, true)
  end)
end)

-- dt.cat and dt.stack as documented, with their errors.
do
  local S = require("tests.spec.support.spec_helpers")
  local err, fails, close, tmpname = S.err, S.fails, S.close, S.tmpname

  describe("cat and stack: dims, promotion, errors", function()
    it("dt.cat, dt.stack", function()
      assert.are.same({1, 1, 0, 0, 0}, dt.cat({dt.ones(2), dt.zeros(3)}):totable())
      assert.are.same({{1, 1, 0}, {1, 1, 0}}, dt.cat({dt.ones(2, 2), dt.zeros(2, 1)}, 2):totable())
      assert.are.equal("float32", dt.cat({dt.ones(2, {dtype = "int64"}), dt.zeros(1)}).dtype)
      assert.are.same({{1, 1}, {0, 0}}, dt.stack({dt.ones(2), dt.zeros(2)}):totable())
      assert.are.same({{1, 0}, {1, 0}}, dt.stack({dt.ones(2), dt.zeros(2)}, 2):totable())
      fails("cat: tensor 2 has shape {3,3} but tensor 1 has shape {2,2}", dt.cat, {dt.ones(2, 2), dt.zeros(3, 3)})
      fails("stack: tensor 2 has shape {3} but tensor 1 has shape {2}", dt.stack, {dt.ones(2), dt.zeros(3)})
      fails("cat: expected a non-empty list of tensors", dt.cat, {})
    end)
  end)
end
