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
