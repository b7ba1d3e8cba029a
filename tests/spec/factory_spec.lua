-- dt.arange and dt.eye (torch semantics: arange's end is exclusive).

local h = dofile((debug.getinfo(1, "S").source:match("^@(.*/)") or "./") .. "view_helpers.lua")
local err = h.err

-- Plain-Lua reference: start + i * step while short of stop.
local function ref_arange(start, stop, step)
  local out, n = {}, math.ceil((stop - start) / step)
  for i = 0, n - 1 do out[#out + 1] = start + i * step end
  return out
end

describe("arange", function()
  it("counts from 0 with one argument; integer arguments give int64", function()
    local r = dt.arange(5)
    assert.are.equal("int64", r.dtype)
    assert.are.same({0, 1, 2, 3, 4}, r:totable())
    assert.are.same({1, 2, 3}, dt.arange(1, 4):totable())
    assert.are.same({5, 3, 1}, dt.arange(5, 0, -2):totable())
    assert.are.same({0, 3, 6, 9}, dt.arange(0, 10, 3):totable())
    assert.are.same({0}, dt.arange(0):size())
    assert.are.same({0}, dt.arange(3, 3):size())
  end)

  it("any float argument gives float32 values start + i * step", function()
    local r = dt.arange(0, 1, 0.25)
    assert.are.equal("float32", r.dtype)
    assert.are.same({0, 0.25, 0.5, 0.75}, r:totable())
    assert.are.equal("float32", dt.arange(4.0).dtype)
    local got, want = dt.arange(-1, 2, 0.3, {dtype = "float64"}):totable(), ref_arange(-1, 2, 0.3)
    assert.are.equal(#want, #got)
    for i = 1, #want do assert.are.equal(want[i], got[i]) end
    assert.are.equal(30, dt.arange(0, 3, 0.1):numel())
  end)

  it("takes a dtype option", function()
    assert.are.equal("float64", dt.arange(3, {dtype = "float64"}).dtype)
    assert.are.same({1, 2}, dt.arange(1, 3, {dtype = "int32"}):totable())
    assert.are.equal("int32", dt.arange(1, 3, {dtype = "int32"}).dtype)
    assert.are.same({0, 1.5, 3}, dt.arange(0, 4, 1.5, {dtype = "bfloat16"}):totable())
    local big = dt.arange(9007199254740993, 9007199254740995)
    assert.are.same({9007199254740993, 9007199254740994}, big:totable())
  end)

  it("reports bad arguments", function()
    assert.matches("arange: step must be nonzero", err(dt.arange, 0, 5, 0), 1, true)
    assert.matches("arange: end 0 cannot be reached from start 5 with step 1", err(dt.arange, 5, 0), 1, true)
    assert.matches("arange: start, end and step must be finite", err(dt.arange, 0, math.huge), 1, true)
    assert.matches("arange: expected arange(stop)", err(dt.arange), 1, true)
    assert.matches("arange: expected numbers then an options table, got string", err(dt.arange, 3, "x"), 1, true)
  end)
end)

describe("eye", function()
  it("builds identity matrices, square or n x m", function()
    local e = dt.eye(3)
    assert.are.equal("float32", e.dtype)
    assert.are.same({{1, 0, 0}, {0, 1, 0}, {0, 0, 1}}, e:totable())
    assert.are.same({{1, 0, 0}, {0, 1, 0}}, dt.eye(2, 3):totable())
    assert.are.same({{1, 0}, {0, 1}, {0, 0}}, dt.eye(3, 2):totable())
    assert.are.same({0, 0}, dt.eye(0):size())
  end)

  it("takes a dtype option", function()
    local e = dt.eye(2, {dtype = "int64"})
    assert.are.equal("int64", e.dtype)
    assert.are.same({{1, 0}, {0, 1}}, e:totable())
    assert.are.same({{true, false}}, dt.eye(1, 2, {dtype = "bool"}):totable())
  end)

  it("reports negative sizes", function()
    assert.matches("eye: sizes must be non-negative, got n=-1, m=-1", err(dt.eye, -1), 1, true)
  end)
end)
