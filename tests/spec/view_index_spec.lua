-- t[i], t[{...}] slicing (1-based inclusive ranges, steps, negatives) and assignment.

local h = dofile((debug.getinfo(1, "S").source:match("^@(.*/)") or "./") .. "view_helpers.lua")
local err, seq = h.err, h.seq

-- Plain-Lua reference of a 1-based inclusive stepped range of a list.
local function range(list, s, e, step)
  local out = {}
  for i = s, e, step or 1 do out[#out + 1] = list[i] end
  return out
end

describe("t[i]", function()
  it("selects along dim 1, negative from the end, as a view", function()
    local x = seq({3, 2})
    assert.are.same({3, 4}, x[2]:totable())
    assert.are.same({5, 6}, x[-1]:totable())
    assert.are.same({}, x[1][2]:size())
    assert.are.equal(2, x[1][2]:item())
    assert.is_true(x[2]:shares_storage(x))
    assert.are.equal(3, seq({3})[3]:item())
  end)

  it("reports out-of-range indices 1-based", function()
    local x = seq({3, 2})
    assert.matches("index 5 out of range for dim 1 of size 3", err(function() return x[5] end), 1, true)
    assert.matches("index -4 out of range for dim 1 of size 3", err(function() return x[-4] end), 1, true)
    assert.matches("index 0 is invalid (indices are 1-based", err(function() return x[0] end), 1, true)
    assert.matches("a 0-d tensor cannot be indexed", err(function() return dt.tensor(1)[1] end), 1, true)
    assert.matches("key must be an integer or a table of ranges, got boolean", err(function() return x[true] end), 1,
      true)
    assert.is_nil(x.no_such_field)
  end)
end)

describe("t[{...}] slicing", function()
  it("mixes integers (select) and {start, stop} ranges (inclusive)", function()
    local x = seq({3, 4})
    assert.are.same({{1, 2}, {5, 6}}, x[{{1, 2}, {1, 2}}]:totable())
    assert.are.same({2, 6, 10}, x[{{}, 2}]:totable())
    assert.are.same({2, 6, 10}, x[{":", 2}]:totable())
    assert.are.same({7, 8}, x[{2, {3, 4}}]:totable())
    assert.are.same({{9, 10, 11, 12}}, x[{{3}}]:totable())
    assert.are.equal(7, x[{2, 3}]:item())
    assert.are.same({{5, 6, 7, 8}, {9, 10, 11, 12}}, x[{{2, -1}}]:totable()) -- fewer entries keep the rest
    assert.are.same({{3, 4}, {7, 8}}, x[{{1, 2}, {-2, -1}}]:totable())
    assert.are.same({0, 4}, x[{{3, 2}}]:size()) -- empty range
    assert.is_true(x[{{1, 2}, {2, 3}}]:shares_storage(x))
  end)

  it("takes steps; strides and values match a plain-Lua reference", function()
    local flat = {}
    for i = 1, 10 do flat[i] = i * 1.5 end
    local x = dt.tensor(flat)
    assert.are.same(range(flat, 1, 10, 3), x[{{1, 10, 3}}]:totable())
    assert.are.same(range(flat, 2, 9, 2), x[{{2, -2, 2}}]:totable())
    assert.are.same({3}, x[{{1, 10, 3}}]:stride())
    local m = seq({4, 6})
    local s = m[{{1, 4, 2}, {2, 6, 2}}]
    assert.are.same({2, 3}, s:size())
    assert.are.same({12, 2}, s:stride())
    assert.are.same({{2, 4, 6}, {14, 16, 18}}, s:totable())
  end)

  it("slices non-contiguous tensors", function()
    local x = seq({3, 4}):t() -- {4,3}
    assert.are.same({{2, 6, 10}, {3, 7, 11}}, x[{{2, 3}}]:totable())
    assert.are.same({5, 7}, x[{{1, 3, 2}, 2}]:totable())
  end)

  it("reports bad ranges and entries", function()
    local x = seq({3, 4})
    assert.matches("indexing: range {1, 5} out of range for dim 2 of size 4",
      err(function() return x[{{}, {1, 5}}] end), 1, true)
    assert.matches("indexing: range {0, 2} out of range", err(function() return x[{{0, 2}}] end), 1, true)
    assert.matches("indexing: step must be positive, got 0 in dim 1", err(function() return x[{{1, 3, 0}}] end), 1,
      true)
    assert.matches("indexing: 3 entries for a 2-d tensor", err(function() return x[{1, 1, 1}] end), 1, true)
    assert.matches("indexing: index 4 out of range for dim 1 of size 3", err(function() return x[{4}] end), 1, true)
    assert.matches("indexing: entry 1 must be an integer, a range", err(function() return x[{"a"}] end), 1, true)
    assert.matches("indexing: range entries must be integers", err(function() return x[{{1.5, 2}}] end), 1, true)
    assert.matches("indexing: a range has at most 3 entries", err(function() return x[{{1, 2, 1, 1}}] end), 1, true)
  end)
end)

describe("assignment", function()
  it("t[i] = number fills the selected view (writes show in the base)", function()
    local x = seq({3, 2})
    x[2] = 0
    assert.are.same({{1, 2}, {0, 0}, {5, 6}}, x:totable())
    x[{-1, 1}] = 9
    assert.are.equal(9, x[3][1]:item())
  end)

  it("t[{...}] = tensor broadcasts and converts dtype", function()
    local x = dt.zeros(3, 4)
    x[{{1, 2}, {2, 3}}] = dt.tensor({7, 8}, {dtype = "int64"}) -- broadcast over rows
    assert.are.same({{0, 7, 8, 0}, {0, 7, 8, 0}, {0, 0, 0, 0}}, x:totable())
    x[{{}, {1, 4, 3}}] = dt.tensor({{1}, {2}, {3}})
    assert.are.same({{1, 7, 8, 1}, {2, 7, 8, 2}, {3, 0, 0, 3}}, x:totable())
    local v = x[3]
    v[{{2, 3}}] = 5.5
    assert.are.same({3, 5.5, 5.5, 3}, x[3]:totable())
  end)

  it("keeps integers exact and takes booleans", function()
    local x = dt.zeros(2, {dtype = "int64"})
    x[1] = 9007199254740993 -- 2^53 + 1
    assert.are.equal(9007199254740993, x[1]:item())
    local b = dt.zeros(2, {dtype = "bool"})
    b[2] = true
    assert.are.same({false, true}, b:totable())
  end)

  it("copies overlapping sources correctly", function()
    local x = seq({5})
    x[{{2, 5}}] = x[{{1, 4}}]
    assert.are.same({1, 1, 2, 3, 4}, x:totable())
  end)

  it("reports bad values and shapes", function()
    local x = dt.zeros(2, 3)
    assert.matches("indexing assignment: value must be a number, a boolean or a tensor, got string",
      err(function() x[1] = "a" end), 1, true)
    assert.matches("indexing assignment: shape {2} does not broadcast to {3}", err(function() x[1] = dt.zeros(2) end),
      1, true)
    assert.matches("cannot set field 'foo' of a tensor", err(function() x.foo = 1 end), 1, true)
    assert.matches("index 3 out of range for dim 1 of size 2", err(function() x[3] = 1 end), 1, true)
  end)
end)

describe("index_select", function()
  it("selects slices by 1-based indices (repeats, any order, empty, 0-d index)", function()
    local m = seq({3, 4})
    assert.are.same({{9, 10, 11, 12}, {1, 2, 3, 4}}, m:index_select(1, dt.tensor({3, 1})):totable())
    assert.are.same({{4, 4, 2}, {8, 8, 6}, {12, 12, 10}}, dt.index_select(m, -1, dt.tensor({4, 4, 2}, {dtype = "int32"})):totable())
    assert.are.same({3, 0}, m:index_select(2, dt.tensor({}, {dtype = "int64"})):size())
    assert.are.same({{2}, {6}, {10}}, m:index_select(2, dt.tensor(2)):totable())
    local i = dt.tensor({1, 4})
    assert.are.same(m:index_select(2, i):totable(), m:t():index_select(1, i):t():totable()) -- a non-contiguous input
  end)
  it("reports indices out of range, bad index tensors and dims", function()
    local m = seq({3, 4})
    assert.matches("index_select: index 4 out of range for dim 1 of size 3 (indices are 1-based: 1..3)",
      err(function() return m:index_select(1, dt.tensor({1, 4})) end), 1, true)
    assert.matches("index_select: index 0 out of range for dim 2 of size 4 (indices are 1-based: 1..4)",
      err(function() return m:index_select(2, dt.tensor({0})) end), 1, true)
    assert.matches("index_select: index must be an int64 or int32 tensor, got float32",
      err(function() return m:index_select(1, dt.ones(1)) end), 1, true)
    assert.matches("index_select: index must be 0-d or 1-d, got a 2-d tensor",
      err(function() return m:index_select(1, dt.ones(1, 1, {dtype = "int64"})) end), 1, true)
    assert.matches("index_select: dim 3 out of range", err(function() return m:index_select(3, dt.tensor({1})) end), 1, true)
  end)
end)

describe("index_add", function()
  it("adds source slices at 1-based indices into a copy (repeats accumulate, any dtype, empty, 0-d index)", function()
    local m = dt.zeros(3, 2)
    local y = m:index_add(1, dt.tensor({3, 1, 3}), dt.tensor({{1, 2}, {10, 20}, {100, 200}}, {dtype = "float32"}))
    assert.are.same({{10, 20}, {0, 0}, {101, 202}}, y:totable())
    assert.are.same({{0, 0}, {0, 0}, {0, 0}}, m:totable()) -- x itself is unchanged
    local i = dt.tensor({2, 2, 1}, {dtype = "int32"})
    assert.are.same({{5, 4}, {5, 4}}, dt.index_add(dt.full({2, 2}, 1, {dtype = "int64"}), -1, i,
                                                   dt.tensor({{1, 2, 4}, {1, 2, 4}}, {dtype = "int64"})):totable())
    assert.are.same(m:totable(), m:index_add(2, dt.tensor({}, {dtype = "int64"}), dt.zeros(3, 0)):totable())
    assert.are.same({{0, 5}, {0, 6}, {0, 7}}, m:index_add(2, dt.tensor(2), dt.tensor({{5}, {6}, {7}}, {dtype = "float32"})):totable())
    local s = dt.tensor({{1, 2}, {3, 4}}, {dtype = "float32"})
    assert.are.same(m:index_add(1, dt.tensor({2, 3}), s):totable(), -- non-contiguous tensors
                    m:t():contiguous():t():index_add(1, dt.tensor({2, 3}), s:t():contiguous():t()):totable())
  end)
  it("reports indices out of range, bad index and source tensors", function()
    local m = dt.zeros(3, 2)
    assert.matches("index_add: index 4 out of range for dim 1 of size 3 (indices are 1-based: 1..3)",
      err(function() return m:index_add(1, dt.tensor({1, 4}), dt.zeros(2, 2)) end), 1, true)
    assert.matches("index_add: index must be an int64 or int32 tensor, got float32",
      err(function() return m:index_add(1, dt.ones(1), dt.zeros(1, 2)) end), 1, true)
    assert.matches("index_add: source dtype float64 differs from the tensor's float32",
      err(function() return m:index_add(1, dt.tensor({1}), dt.zeros(1, 2, {dtype = "float64"})) end), 1, true)
    assert.matches("index_add: source shape {2,2} does not match {3,2} with dim 1 of size 1 (the index's length)",
      err(function() return m:index_add(1, dt.tensor({1}), dt.zeros(2, 2)) end), 1, true)
    assert.matches("index_add: dim 3 out of range", err(function() return m:index_add(3, dt.tensor({1}), m) end), 1, true)
  end)
end)
