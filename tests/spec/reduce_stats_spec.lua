local R = require "tests.spec.reduce_ref"

local shape = {4, 6}
local flat, t = R.fixture(shape, 3)

describe("var / std / norm", function()
  it("var and std default to the unbiased estimate (correction 1)", function()
    for _, dtype in ipairs(R.float_dtypes) do
      local x = t(dtype)
      R.close(x:var():item(), R.var(1)(flat), R.tol[dtype])
      R.close(x:std():item(), math.sqrt(R.var(1)(flat)), R.tol[dtype])
      assert.are.equal(dtype, x:std().dtype)
    end
  end)

  it("take dims, keepdim, correction and unbiased", function()
    local x = t("float64")
    for _, d in ipairs({1, 2, -1}) do
      R.close(x:var(d):totable(), (R.reduce(flat, shape, {d}, false, R.var(1))), 1e-12)
      R.close(x:var(d, {correction = 0}):totable(), (R.reduce(flat, shape, {d}, false, R.var(0))), 1e-12)
      R.close(x:var(d, {unbiased = false, keepdim = true}):totable(),
        (R.reduce(flat, shape, {d}, true, R.var(0))), 1e-12)
      R.close(dt.var(x, d, true):totable(), (R.reduce(flat, shape, {d}, true, R.var(1))), 1e-12)
    end
    R.close(x:var({correction = 2}):item(), R.var(2)(flat), 1e-12)
    R.close(x:var(false):item(), R.var(0)(flat), 1e-12) -- torch.var(x, False)
    R.close(x:std(false, 2):totable(), (R.reduce(flat, shape, {2}, false, function(l)
      return math.sqrt(R.var(0)(l)) end)), 1e-12)
    R.close(x:std({1, 2}, {correction = 0}):item(), math.sqrt(R.var(0)(flat)), 1e-12)
  end)

  it("are accurate for large offsets (no cancellation)", function()
    local l = {}
    for i = 1, 1000 do l[i] = 1e4 + (i % 7) end
    R.close(dt.tensor(l, {dtype = "float32"}):var():item(), R.var(1)(l), 1e-5)
  end)

  it("give nan when the correction leaves no degrees of freedom", function()
    local v = dt.tensor({3.0}):var():item()
    assert.is_true(v ~= v)
    local e = dt.zeros(0):var():item()
    assert.is_true(e ~= e)
  end)

  it("norm: p = 2 by default, 1, inf, -inf, 0, general p, and 'fro'", function()
    for _, dtype in ipairs(R.float_dtypes) do
      local x = t(dtype)
      R.close(x:norm():item(), R.norm(2)(flat), R.tol[dtype])
      R.close(x:norm(1):item(), R.norm(1)(flat), R.tol[dtype])
      R.close(x:norm(math.huge):item(), R.norm(math.huge)(flat), R.tol[dtype])
      R.close(x:norm(3):item(), R.norm(3)(flat), R.tol[dtype])
    end
    local x = t("float64")
    R.close(x:norm("fro"):item(), R.norm(2)(flat), 1e-12)
    R.close(x:norm("inf"):item(), R.norm(math.huge)(flat), 1e-12)
    local mn = math.huge
    for _, v in ipairs(flat) do mn = math.min(mn, math.abs(v)) end
    R.close(x:norm(-math.huge):item(), mn, 1e-12)
    local nz = 0
    for _, v in ipairs(flat) do if v ~= 0 then nz = nz + 1 end end
    R.close(x:norm(0):item(), nz, 0)
    R.close(x:norm(0.5):item(), R.norm(0.5)(flat), 1e-12)
  end)

  it("norm along dims with keepdim", function()
    local x = t("float32")
    R.close(x:norm(2, 2):totable(), (R.reduce(flat, shape, {2}, false, R.norm(2))), 1e-5)
    R.close(x:norm(1, -2, true):totable(), (R.reduce(flat, shape, {1}, true, R.norm(1))), 1e-5)
    R.close(dt.norm(x, nil, {1, 2}):item(), R.norm(2)(flat), 1e-5)
    assert.are.equal(0, dt.zeros(0):norm():item())
  end)

  it("raise clear errors", function()
    local i = dt.tensor({1, 2, 3})
    assert.matches("var: input dtype int64 is not floating point; use :to('float32')", R.error_of(i.var, i), 1, true)
    assert.matches("std: input dtype int64 is not floating point", R.error_of(i.std, i), 1, true)
    assert.matches("norm: input dtype int64 is not floating point", R.error_of(i.norm, i), 1, true)
    local x = t("float32")
    assert.matches("norm: unknown p 'nuc'", R.error_of(x.norm, x, "nuc"), 1, true)
    assert.matches("norm: p must be a number, got boolean", R.error_of(x.norm, x, true), 1, true)
    assert.matches("option 'correction' must be a number, got string",
      R.error_of(x.var, x, 1, {correction = "a"}), 1, true)
    assert.matches("var: dim 3 out of range for a 2-d tensor", R.error_of(x.var, x, 3), 1, true)
  end)
end)

-- var/std (correction), norm (p = 1, 2, inf), against closed forms.
do
  local S = require("tests.spec.support.spec_helpers")
  local err, fails, close, tmpname = S.err, S.fails, S.close, S.tmpname

  describe("var std norm: corrections, p-norms, keepdim", function()
    local a = dt.tensor({{1, 5, 3}, {4, 2, 6}}, {dtype = "float64"})

    it("var std norm", function()
      assert.are.equal(3.5, a:var():item()) -- unbiased (correction 1), as torch
      assert.are.same({4, 4}, a:var(2):totable())
      close({8 / 3, 8 / 3}, a:var(2, {correction = 0}):totable(), 1e-15)
      close(math.sqrt(3.5), a:std():item(), 1e-15)
      close({{math.sqrt(4.5), math.sqrt(4.5), math.sqrt(4.5)}}, a:std(1, true):totable(), 1e-15)
      close(math.sqrt(91), a:norm():item(), 1e-13)
      assert.are.equal(21, a:norm(1):item())
      close({math.sqrt(35), math.sqrt(56)}, a:norm(2, 2):totable(), 1e-13)
      assert.are.equal(6, a:norm(math.huge):item())
      fails("var: keepdim must be a boolean or an options table, got string", a.var, a, 2, "x")
    end)
  end)
end
