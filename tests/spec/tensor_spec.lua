-- The Tensor userdata: properties (size, stride, dim, numel, dtype, device, #t), printing,
-- item/totable, errors raised as Lua values, and its memory released by __gc and <close>.
local S = require("tests.spec.support.spec_helpers")
local err, fails, close, tmpname = S.err, S.fails, S.close, S.tmpname

describe("tensor properties", function()
  local t = dt.tensor({{1, 2, 3}, {4, 5, 6}}, {dtype = "float32"})
  it("t:size() (table), t:size(d), t:dim(), t:numel(), t.dtype, t.device", function()
    assert.are.same({2, 3}, t:size())
    assert.are.equal(2, t:size(1))
    assert.are.equal(3, t:size(-1))
    assert.are.equal(2, t:dim())
    assert.are.equal(6, t:numel())
    assert.are.equal("float32", t.dtype)
    assert.are.equal("cpu", t.device)
    fails("size: dim 3 out of range for a 2-d tensor", t.size, t, 3)
    fails("size: dim 0 is invalid", t.size, t, 0)
  end)

  it("t:stride(), t:is_contiguous(), #t (size of dim 1)", function()
    assert.are.same({3, 1}, t:stride())
    assert.are.equal(1, t:stride(2))
    assert.are.same({1, 3}, t:t():stride())
    assert.is_true(t:is_contiguous())
    assert.is_false(t:t():is_contiguous())
    assert.are.equal(2, #t)
    assert.are.equal(3, #t:t())
    fails("#: a 0-d tensor has no length", function() return #dt.tensor(1) end)
  end)

  it("tostring(t) (PyTorch-like printing with summarisation of large tensors)", function()
    assert.are.equal("tensor([[1., 2., 3.],\n        [4., 5., 6.]])", tostring(t))
    assert.are.equal("tensor(3)", tostring(dt.tensor(3)))
    assert.are.equal("tensor([1., 2.], dtype=float64)", tostring(dt.tensor({1, 2}, {dtype = "float64"})))
    assert.are.equal("tensor([ True, False])", tostring(dt.tensor({true, false})))
    assert.are.equal("tensor([   0,    1,    2,  ..., 9997, 9998, 9999])", tostring(dt.arange(10000)))
    assert.are.equal("tensor([], size=(0, 3))", tostring(dt.zeros(0, 3)))
  end)

  it("t:item(), t:totable()", function()
    assert.are.equal(5, dt.tensor(5):item())
    assert.are.equal(2.5, dt.tensor({2.5}):item())
    assert.are.equal(true, dt.tensor(true):item())
    assert.are.same({{1, 2, 3}, {4, 5, 6}}, t:totable())
    assert.are.same({true, false}, dt.tensor({true, false}):totable())
    fails("item: a tensor with 2 elements cannot be converted to a number", function() return dt.ones(2):item() end)
  end)
end)

describe("bad input and memory", function()
  it('pcall(function() return dt.ones(2,3) + dt.ones(4) end) returns false and "add: shapes {2,3} and {4} cannot broadcast"', function()
    local ok, e = pcall(function() return dt.ones(2,3) + dt.ones(4) end)
    assert.is_false(ok)
    assert.matches("add: shapes {2,3} and {4} cannot broadcast$", e)
  end)

  it("memory is freed by __gc and by <close> variables", function()
    assert.are.equal("Tensor", getmetatable(dt.ones(1))) -- protected: only the debug library reaches __gc
    local mt = debug.getmetatable(dt.ones(1))
    assert.are.equal("function", type(mt.__gc))
    assert.are.equal("function", type(mt.__close))
    local t = dt.ones(4)
    do
      local c <close> = t
    end
    fails("", function() return t:sum() end) -- closed: using it is an error, not a crash
    mt.__gc(t) -- idempotent
    collectgarbage()
    collectgarbage()
  end)
end)
