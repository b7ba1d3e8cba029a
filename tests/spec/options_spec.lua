-- Option tables and dtype arguments are validated wherever they are accepted.
local function err_of(f, ...)
  local ok, err = pcall(f, ...)
  assert.is_false(ok)
  return err
end

describe("options and dtype arguments", function()
  it("refuse a device other than cpu instead of silently using the cpu", function()
    assert.matches("bad argument #2 to '[%w.]*tensor' %(device 'cuda' is not available", err_of(dt.tensor, {1}, {device = "cuda"}))
    assert.matches("bad argument #2 to '[%w.]*rand_like' %(device 'cuda' is not available",
      err_of(dt.rand_like, dt.ones(2), {device = "cuda"}))
    assert.are.equal("cpu", dt.tensor({1}, {device = "cpu"}).device)
  end)

  it("refuse an options argument that is not a table", function()
    assert.matches("bad argument #2 to '[%w.]*rand' %(expected an options table", err_of(dt.rand, 2, "x"))
  end)

  it("name the function when a dtype is unknown", function()
    assert.matches("bad argument #1 to '[%w.]*to' %(unknown dtype 'x'", err_of(function() return dt.ones(2):to("x") end))
    assert.matches("bad argument #2 to '[%w.]*ones' %(option dtype: unknown dtype 'x'", err_of(dt.ones, 2, {dtype = "x"}))
    assert.matches("option dtype: must be a string", err_of(dt.ones, 2, {dtype = 3}), 1, true)
  end)
end)

-- Every dtype by its name and its dt constant; "cpu" as the only device of this build.
do
  local S = require("tests.spec.support.spec_helpers")
  local err, fails, close, tmpname = S.err, S.fails, S.close, S.tmpname

  describe("dtypes and devices", function()
    it("float32 (default), float64, bfloat16, float16, int64, int32, uint8, bool as strings and dt constants", function()
      for _, d in ipairs {"float32", "float64", "bfloat16", "float16", "int64", "int32", "uint8", "bool"} do
        assert.are.equal(d, dt[d])
        assert.are.equal(d, dt.zeros(2, {dtype = d}).dtype)
        assert.are.equal(d, dt.zeros(2, {dtype = dt[d]}).dtype)
      end
      assert.are.equal("float32", dt.zeros(2).dtype)
      fails("unknown dtype 'float128'", dt.ones, {2, 3}, {dtype = "float128"})
    end)

    it('devices: "cpu" now, carried by the storage (t.device)', function()
      assert.are.equal("cpu", dt.ones(2).device)
      assert.are.equal("cpu", dt.ones(2):t().device)
      assert.are.equal("cpu", dt.ones(2, {device = "cpu"}).device)
      fails("ones: device 'cuda' is not available (tensors are on cpu in this build)", dt.ones, 2, {device = "cuda"})
      fails("arange: device 'cuda' is not available", dt.arange, 3, {device = "cuda"})
      fails("zeros_like: device 'cuda' is not available", dt.zeros_like, dt.ones(1), {device = "cuda"})
    end)
  end)
end
