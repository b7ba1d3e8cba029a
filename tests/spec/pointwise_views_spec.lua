-- Pointwise ops on non-contiguous inputs (transposed, strided slices, expanded) and
-- in-place ops into views and with overlapping operands.
local H = dofile((debug.getinfo(1, "S").source:match("^@(.*[/\\])") or "./") .. "pointwise_helpers.lua")
local flat, close = H.flat, H.close

-- reference: the plain-Lua transpose of a nested 2-d table
local function tr(m)
  local r = {}
  for i = 1, #m[1] do
    r[i] = {}
    for j = 1, #m do r[i][j] = m[j][i] end
  end
  return r
end

describe("pointwise on views", function()
  for _, dtype in ipairs {"float32", "float64", "bfloat16", "int64", "int32"} do
    it("adds, multiplies, compares and maps transposed " .. dtype .. " tensors", function()
      local a = dt.arange(12, {dtype = dtype}):view(3, 4)
      local b = (dt.arange(12, {dtype = dtype}) * 2):view(4, 3)
      local at = a:t()
      assert.is_false(at:is_contiguous())
      local av, bv = at:totable(), b:totable()
      local sum, prod, lt = {}, {}, {}
      for i = 1, 4 do
        sum[i], prod[i], lt[i] = {}, {}, {}
        for j = 1, 3 do
          sum[i][j] = av[i][j] + bv[i][j]
          prod[i][j] = av[i][j] * bv[i][j]
          lt[i][j] = av[i][j] < bv[i][j] / 3
        end
      end
      assert.are.same(sum, (at + b):totable())
      assert.are.same(sum, (b + at):totable())
      assert.are.same(prod, (at * b):totable())
      assert.are.same(lt, at:lt(b / 3):totable())
      assert.are.same(tr(a:totable()), (at * 1):totable())
      assert.are.same(tr((-a):totable()), (-at):totable())
      if dtype ~= "int64" and dtype ~= "int32" then
        local e = {}
        for k, v in ipairs(flat(at)) do e[k] = math.exp(v / 12) end
        close(e, flat((at / 12):exp()), dtype, "exp of transposed")
      end
    end)
  end

  it("handles strided slices and expanded operands", function()
    local a = dt.arange(10.0)
    local odd = a[{{1, -1, 2}}] -- 0 2 4 6 8, stride 2
    assert.are.same({0, 2, 4, 6, 8}, odd:totable())
    assert.are.same({1, 3, 5, 7, 9}, (odd + 1):totable())
    assert.are.same({0, 4, 16, 36, 64}, (odd * odd):totable())
    assert.are.same({1, 1, 1, 1, 1}, (a[{{2, -1, 2}}] - odd):totable())
    local col = dt.tensor({{1.0}, {2.0}}):expand(2, 3)
    assert.are.same({{2, 3, 4}, {3, 4, 5}}, (col + dt.tensor({1.0, 2.0, 3.0})):totable())
    assert.are.same({{1, 1, 1}, {2, 2, 2}}, col:clone():totable())
    assert.is_true(col:contiguous():is_contiguous())
    assert.are.same({{1, 1, 1}, {2, 2, 2}}, col:contiguous():totable())
    assert.are.same({{false, false, false}, {true, true, true}}, dt.where(col:gt(1), col, 0):bool():totable())
  end)

  it("writes in place through views", function()
    local a = dt.zeros(3, 4)
    a[{{}, {2, 3}}]:fill_(5)
    assert.are.same({{0, 5, 5, 0}, {0, 5, 5, 0}, {0, 5, 5, 0}}, a:totable())
    a:t():add_(dt.tensor({1.0, 2.0, 3.0})) -- row i of a gets i
    assert.are.same({{1, 6, 6, 1}, {2, 7, 7, 2}, {3, 8, 8, 3}}, a:totable())
    a[2]:mul_(10)
    assert.are.same({20, 70, 70, 20}, a[2]:totable())
    a[{{}, 1}]:zero_()
    assert.are.same({0, 0, 0}, a[{{}, 1}]:totable())
    a:t():copy_(dt.ones(4, 3))
    assert.are.same({{1, 1, 1, 1}, {1, 1, 1, 1}, {1, 1, 1, 1}}, a:totable())
  end)

  it("reads a copy of an operand overlapping self (a += a^T, copy_ of a^T)", function()
    local a = dt.arange(9.0):view(3, 3)
    local ref = {}
    local av = a:totable()
    for i = 1, 3 do
      ref[i] = {}
      for j = 1, 3 do ref[i][j] = av[i][j] + av[j][i] end
    end
    a:add_(a:t())
    assert.are.same(ref, a:totable())
    local b = dt.arange(9.0):view(3, 3)
    b:copy_(b:t())
    assert.are.same(tr(dt.arange(9.0):view(3, 3):totable()), b:totable())
    local c = dt.arange(4.0)
    c[{{2, 4}}]:add_(c[{{1, 3}}]) -- shifted overlap: reads the old values
    assert.are.same({0, 1, 3, 5}, c:totable())
  end)

  it("refuses to write into an expanded tensor", function()
    local e = dt.ones(1, 3):expand(2, 3)
    local ok, err = pcall(function() return e:add_(1) end)
    assert.is_false(ok)
    assert.matches("add_: cannot write in place into a tensor whose elements overlap (an expanded view); clone() it first",
      err, 1, true)
    ok, err = pcall(function() return e:fill_(1) end)
    assert.matches("fill_: cannot write in place", err, 1, true)
  end)
end)
