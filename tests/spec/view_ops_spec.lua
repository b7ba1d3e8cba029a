-- View ops: shapes, strides, storage sharing and values, against plain-Lua references.

local h = dofile((debug.getinfo(1, "S").source:match("^@(.*/)") or "./") .. "view_helpers.lua")
local err, seq = h.err, h.seq

-- Value of a row-major 1..n tensor of `shape` at the 1-based index idx.
local function pos(shape, idx)
  local p, stride = 0, 1
  for d = #shape, 1, -1 do
    p = p + (idx[d] - 1) * stride
    stride = stride * shape[d]
  end
  return p + 1
end

describe("view / reshape", function()
  it("reinterprets the shape, sharing storage, with one -1 inferred", function()
    local x = seq({2, 3})
    local v = x:view(3, 2)
    assert.are.same({3, 2}, v:size())
    assert.are.same({2, 1}, v:stride())
    assert.is_true(v:shares_storage(x))
    assert.are.same({{1, 2}, {3, 4}, {5, 6}}, v:totable())
    assert.are.same({6}, x:view(-1):size())
    assert.are.same({2, 3}, x:view({-1, 3}):size())
    assert.are.same({1, 6, 1}, x:view(1, -1, 1):size())
    assert.are.same({}, dt.tensor({7}):view():size())
    v[{1, 2}] = 20
    assert.are.equal(20, x[1][2]:item())
  end)

  it("view refuses layouts it cannot express and names reshape/contiguous", function()
    local e = err(function() return seq({2, 3}):t():view(6) end)
    assert.matches("view: a tensor of shape {3,2} and strides {1,3} cannot be viewed as {6} (use reshape() or contiguous() first)",
      e, 1, true)
    assert.matches("view: shape {4} is invalid for a tensor of shape {2,3} (6 elements)",
      err(function() return dt.zeros(2, 3):view(4) end), 1, true)
    assert.matches("view: only one size can be -1", err(function() return dt.zeros(2, 3):view(-1, -1) end), 1, true)
    assert.matches("view: invalid size -2 in dim 1", err(function() return dt.zeros(2, 3):view(-2, 3) end), 1, true)
    assert.matches("view: shape {0,-1} is invalid", err(function() return dt.zeros(0, 3):view(0, -1) end), 1, true)
  end)

  it("view works on non-contiguous tensors when chunks of dims stay contiguous", function()
    local x = seq({2, 3, 4}):transpose(1, 2) -- {3,2,4}, strides {4,12,1}
    local v = x:view(3, 2, 2, 2)
    assert.is_true(v:shares_storage(x))
    assert.are.same({4, 12, 2, 1}, v:stride())
    assert.are.equal(x[{3, 2, 4}]:item(), v[{3, 2, 2, 2}]:item())
  end)

  it("reshape returns a view when possible and a copy otherwise", function()
    local x = seq({2, 3})
    local r = x:reshape(3, 2)
    assert.is_true(r:shares_storage(x))
    local c = x:t():reshape(6)
    assert.is_false(c:shares_storage(x))
    assert.are.same({1, 4, 2, 5, 3, 6}, c:totable())
    assert.are.same({6}, dt.reshape(x, {-1}):size())
    assert.matches("reshape: shape {5} is invalid", err(function() return x:reshape(5) end), 1, true)
  end)

  it("keeps every dtype", function()
    for _, d in ipairs {"float32", "float64", "bfloat16", "float16", "int64", "int32", "uint8", "bool"} do
      local x = dt.tensor({{1, 0}, {1, 1}}, {dtype = d})
      local v = x:view(4)
      assert.are.equal(d, v.dtype)
      assert.are.equal(x[2][1]:item(), v[3]:item())
    end
  end)

  it("view_as takes the other tensor's shape", function()
    assert.are.same({3, 2}, seq({6}):view_as(dt.zeros(3, 2)):size())
  end)

  it("handles empty tensors", function()
    local x = dt.zeros(0, 3)
    assert.are.same({3, 0}, x:view(3, 0):size())
    assert.are.same({0}, x:reshape(-1):size())
  end)
end)

describe("transpose / permute / t", function()
  it("transpose swaps sizes and strides, negative dims too", function()
    local x = seq({2, 3, 4})
    local y = x:transpose(1, -1)
    assert.are.same({4, 3, 2}, y:size())
    assert.are.same({1, 4, 12}, y:stride())
    assert.is_true(y:shares_storage(x))
    assert.is_false(y:is_contiguous())
    for i = 1, 4 do
      for j = 1, 3 do
        for k = 1, 2 do assert.are.equal(pos({2, 3, 4}, {k, j, i}), y[{i, j, k}]:item()) end
      end
    end
    assert.are.same({3, 2, 4}, dt.transpose(x, 1, 2):size())
  end)

  it("permute takes varargs or a table", function()
    local x = seq({2, 3, 4})
    local y = x:permute(3, 1, 2)
    assert.are.same({4, 2, 3}, y:size())
    assert.are.same({1, 12, 4}, y:stride())
    assert.are.equal(pos({2, 3, 4}, {2, 3, 4}), y[{4, 2, 3}]:item())
    assert.are.same({4, 2, 3}, x:permute({-1, 1, 2}):size())
    assert.are.same({4, 2, 3}, dt.permute(x, {3, 1, 2}):size())
    assert.matches("permute: dim 1 appears twice", err(function() return x:permute(1, 1, 2) end), 1, true)
    assert.matches("permute: 2 dims given for a 3-d tensor", err(function() return x:permute(1, 2) end), 1, true)
    assert.matches("permute: dim 4 out of range for a 3-d tensor",
      err(function() return x:permute(1, 2, 4) end), 1, true)
  end)

  it("t transposes 2-d and returns <= 1-d tensors unchanged", function()
    local x = seq({2, 3})
    assert.are.same({{1, 4}, {2, 5}, {3, 6}}, x:t():totable())
    assert.are.same({1, 2, 3}, seq({3}):t():totable())
    assert.are.equal(5, dt.tensor(5):t():item())
    assert.are.same({3, 2}, dt.t(x):size())
    assert.matches("t: expects a tensor with at most 2 dims, got 3-d", err(function() return seq({2, 2, 2}):t() end),
      1, true)
  end)

  it("reports bad dims 1-based", function()
    assert.matches("transpose: dim 3 out of range for a 2-d tensor (dims are 1-based: 1..2 or -2..-1)",
      err(function() return dt.zeros(2, 3):transpose(1, 3) end), 1, true)
    assert.matches("transpose: dim 0 is invalid", err(function() return dt.zeros(2, 3):transpose(0, 1) end), 1, true)
  end)
end)

describe("narrow / select", function()
  it("narrow takes a 1-based start and a length", function()
    local x = seq({4, 3})
    local n = x:narrow(1, 2, 2)
    assert.are.same({2, 3}, n:size())
    assert.are.same({{4, 5, 6}, {7, 8, 9}}, n:totable())
    assert.is_true(n:shares_storage(x))
    assert.are.same({{2, 3}, {5, 6}, {8, 9}, {11, 12}}, x:narrow(-1, -2, 2):totable())
    assert.are.same({0, 3}, x:narrow(1, 5, 0):size())
    n:narrow(2, 1, 1)[{1, 1}] = 40
    assert.are.equal(40, x[2][1]:item())
    assert.matches("narrow: start 3 + length 3 exceeds dim 1 of size 4",
      err(function() return x:narrow(1, 3, 3) end), 1, true)
    assert.matches("narrow: start 0 is invalid", err(function() return x:narrow(1, 0, 1) end), 1, true)
    assert.matches("narrow: start 7 out of range for dim 1 of size 4",
      err(function() return x:narrow(1, 7, 0) end), 1, true)
    assert.matches("narrow: start -5 out of range for dim 1 of size 4",
      err(function() return x:narrow(1, -5, 1) end), 1, true)
    assert.matches("narrow: length must be non-negative, got -1", err(function() return x:narrow(1, 1, -1) end), 1, true)
  end)

  it("select drops the dim; index 1-based, negative from the end", function()
    local x = seq({2, 3})
    assert.are.same({4, 5, 6}, x:select(1, 2):totable())
    assert.are.same({3, 6}, x:select(2, -1):totable())
    assert.are.same({}, x:select(1, 1):select(1, 2):size())
    assert.are.equal(2, x:select(1, 1):select(1, 2):item())
    assert.are.same({1, 4}, dt.select(x, 2, 1):totable())
    assert.matches("select: index 3 out of range for dim 1 of size 2", err(function() return x:select(1, 3) end), 1, true)
    assert.matches("select: index -4 out of range for dim 2 of size 3",
      err(function() return x:select(2, -4) end), 1, true)
    assert.matches("select: index 0 is invalid", err(function() return x:select(1, 0) end), 1, true)
    assert.matches("select: a 0-d tensor has no dim", err(function() return dt.tensor(1):select(1, 1) end), 1, true)
  end)
end)

describe("unsqueeze / squeeze / expand / flatten", function()
  it("unsqueeze inserts a size-1 dim, up to one past the end", function()
    local x = seq({2, 3})
    assert.are.same({1, 2, 3}, x:unsqueeze(1):size())
    assert.are.same({2, 3, 1}, x:unsqueeze(3):size())
    assert.are.same({2, 3, 1}, x:unsqueeze(-1):size())
    assert.are.same({2, 1, 3}, dt.unsqueeze(x, 2):size())
    assert.are.same({3, 3, 1}, x:unsqueeze(2):stride())
    assert.are.same({1}, dt.tensor(2):unsqueeze(1):size())
    assert.is_true(x:unsqueeze(1):shares_storage(x))
    assert.matches("unsqueeze: dim 4 out of range for a 2-d tensor (dims are 1-based: 1..3 or -3..-1)",
      err(function() return x:unsqueeze(4) end), 1, true)
  end)

  it("squeeze drops all size-1 dims, or the ones named if size 1", function()
    local x = dt.zeros(1, 2, 1, 3)
    assert.are.same({2, 3}, x:squeeze():size())
    assert.are.same({2, 1, 3}, x:squeeze(1):size())
    assert.are.same({1, 2, 1, 3}, x:squeeze(2):size())
    assert.are.same({1, 2, 3}, x:squeeze(-2):size())
    assert.are.same({2, 3}, x:squeeze({1, 3}):size())
    assert.are.same({}, dt.zeros(1, 1):squeeze():size())
    assert.are.same({2, 3}, dt.squeeze(x):size())
    assert.matches("squeeze: dim 5 out of range", err(function() return x:squeeze(5) end), 1, true)
  end)

  it("expand repeats size-1 dims with stride 0; -1 keeps a size", function()
    local x = dt.tensor({{1}, {2}})
    local e = x:expand(2, 3)
    assert.are.same({2, 3}, e:size())
    assert.are.same({1, 0}, e:stride())
    assert.are.same({{1, 1, 1}, {2, 2, 2}}, e:totable())
    assert.is_true(e:shares_storage(x))
    assert.are.same({4, 2, 3}, x:expand({4, -1, 3}):size())
    assert.are.same({0, 1, 0}, x:expand(4, -1, 3):stride())
    assert.are.same({2, 5}, x:expand_as(dt.zeros(2, 5)):size())
    assert.matches("expand: shape {2,1} cannot be expanded to {3,3} (dim 1: 2 vs 3)",
      err(function() return x:expand(3, 3) end), 1, true)
    assert.matches("expand: 1 sizes given for a 2-d tensor", err(function() return x:expand(3) end), 1, true)
    assert.matches("expand: invalid size -1 in dim 1", err(function() return x:expand(-1, 2, 3) end), 1, true)
  end)

  it("flatten merges a range of dims (all by default)", function()
    local x = seq({2, 3, 4})
    assert.are.same({24}, x:flatten():size())
    assert.are.same({2, 12}, x:flatten(2):size())
    assert.are.same({6, 4}, x:flatten(1, 2):size())
    assert.are.same({6, 4}, dt.flatten(x, 1, -2):size())
    assert.is_true(x:flatten():shares_storage(x))
    local t = x:transpose(1, 3):flatten()
    assert.is_false(t:shares_storage(x))
    assert.are.same({1, 13, 5, 17}, {t[1]:item(), t[2]:item(), t[3]:item(), t[4]:item()})
    assert.are.same({1}, dt.tensor(3):flatten():size())
    assert.matches("flatten: start dim 3 comes after end dim 2", err(function() return x:flatten(3, 2) end), 1, true)
  end)
end)

describe("chunk / split", function()
  local function sizes(list, d)
    local out = {}
    for i, v in ipairs(list) do out[i] = v:size(d) end
    return out
  end

  it("chunk uses ceil(L/n) pieces, possibly fewer than n", function()
    assert.are.same({2, 2, 1}, sizes(seq({5}):chunk(3), 1))
    assert.are.same({2, 2}, sizes(seq({4}):chunk(3), 1))
    assert.are.same({1, 1, 1}, sizes(seq({3}):chunk(5), 1))
    assert.are.same({2, 2, 2}, sizes(seq({6}):chunk(3), 1))
    assert.are.same({0, 0}, sizes(dt.zeros(0):chunk(2), 1))
    local x = seq({2, 5})
    local c = x:chunk(2, -1)
    assert.are.same({3, 2}, sizes(c, 2))
    assert.are.same({{4, 5}, {9, 10}}, c[2]:totable())
    assert.is_true(c[2]:shares_storage(x))
    assert.are.same({3, 2}, sizes(dt.chunk(x, 2, 2), 2))
    assert.matches("chunk: number of chunks must be at least 1, got 0", err(function() return x:chunk(0) end), 1, true)
  end)

  it("split by a size (last piece shorter) or by a list of sizes", function()
    local x = seq({7, 2})
    assert.are.same({3, 3, 1}, sizes(x:split(3), 1))
    assert.are.same({1, 1}, sizes(x:split(1, 2), 2))
    assert.are.same({7}, sizes(x:split(10), 1))
    local s = x:split({2, 0, 5})
    assert.are.same({2, 0, 5}, sizes(s, 1))
    assert.are.same({{5, 6}, {7, 8}}, s[3]:narrow(1, 1, 2):totable())
    assert.are.same({4, 3}, sizes(dt.split(x, {4, 3}), 1))
    assert.matches("split: sizes add up to 6 but dim 1 has size 7", err(function() return x:split({3, 3}) end), 1, true)
    assert.matches("split: split size must be positive, got 0", err(function() return x:split(0) end), 1, true)
  end)
end)

-- Every view op, chunk/split and indexing share storage with their base; their errors.
do
  local S = require("tests.spec.support.spec_helpers")
  local err, fails, close, tmpname = S.err, S.fails, S.close, S.tmpname

  describe("views sharing storage: view/reshape, transpose/permute/t, narrow/select, unsqueeze/squeeze/expand/flatten, chunk/split, indexing, contiguous/clone/copy_/to", function()
    local function seq() return dt.arange(6):view(2, 3) end

    it("view/reshape", function()
      local a = seq()
      local v = a:view(3, 2)
      assert.are.same({{0, 1}, {2, 3}, {4, 5}}, v:totable())
      assert.are.same({6}, a:view(-1):size())
      assert.are.same({3, 2}, a:reshape(3, -1):size())
      assert.are.same({0, 3, 1, 4, 2, 5}, a:t():reshape(6):totable()) -- copies when it must
      v:fill_(9)
      assert.are.equal(54, a:sum():item())
      fails("view: shape {4,2} is invalid for a tensor of shape {2,3} (6 elements)", a.view, a, 4, 2)
      fails("view: a tensor of shape {3,2} and strides {1,3} cannot be viewed as {6}", a.view, a:t(), 6)
    end)

    it("transpose(d1, d2), permute, t()", function()
      local a = seq()
      assert.are.same({{0, 3}, {1, 4}, {2, 5}}, a:transpose(1, 2):totable())
      assert.are.same({{0, 3}, {1, 4}, {2, 5}}, a:transpose(-1, 1):totable())
      assert.are.same({{0, 3}, {1, 4}, {2, 5}}, a:permute(2, 1):totable())
      assert.are.same({4, 2, 3}, dt.zeros(2, 3, 4):permute({3, 1, 2}):size())
      local tt = a:t()
      tt[{1, 2}] = 7
      assert.are.equal(7, a[2][1]:item())
      fails("transpose: dim 3 out of range for a 2-d tensor", a.transpose, a, 1, 3)
      fails("permute: dim 1 appears twice", a.permute, a, 1, 1)
    end)

    it("narrow, select", function()
      local a = seq()
      assert.are.same({{1, 2}, {4, 5}}, a:narrow(2, 2, 2):totable())
      assert.are.same({3, 4, 5}, a:select(1, 2):totable())
      assert.are.same({2, 5}, a:select(2, -1):totable())
      a:narrow(2, 2, 2):zero_()
      assert.are.same({{0, 0, 0}, {3, 0, 0}}, a:totable())
      fails("narrow: start 3 + length 2 exceeds dim 2 of size 3", a.narrow, a, 2, 3, 2)
      fails("select: dim 3 out of range for a 2-d tensor", a.select, a, 3, 1)
    end)

    it("unsqueeze/squeeze, expand, flatten", function()
      local a = seq()
      assert.are.same({1, 2, 3}, a:unsqueeze(1):size())
      assert.are.same({2, 3, 1}, a:unsqueeze(-1):size())
      assert.are.same({2, 3}, a:unsqueeze(1):squeeze():size())
      assert.are.same({2, 3}, a:unsqueeze(1):squeeze(1):size())
      local e = dt.tensor({{1}, {2}}):expand(2, 3)
      assert.are.same({{1, 1, 1}, {2, 2, 2}}, e:totable())
      assert.are.same({1, 0}, e:stride()) -- expanded dim: stride 0, no copy
      assert.are.same({2, 3}, dt.ones(2, 1):expand({2, 3}):size())
      assert.are.same({2, 4}, dt.ones(2, 1):expand(-1, 4):size())
      assert.are.same({24}, dt.ones(2, 3, 4):flatten():size())
      assert.are.same({2, 12}, dt.ones(2, 3, 4):flatten(2):size())
      assert.are.same({6, 4}, dt.ones(2, 3, 4):flatten(1, 2):size())
      fails("expand: shape {3,2} cannot be expanded to {3,4}", function() return dt.ones(3, 2):expand(3, 4) end)
      fails("squeeze: dim 5 out of range for a 2-d tensor", a.squeeze, a, 5)
    end)

    it("chunk, split", function()
      local a = seq()
      local c = a:chunk(2, 2)
      assert.are.equal(2, #c)
      assert.are.same({{0, 1}, {3, 4}}, c[1]:totable())
      assert.are.same({{2}, {5}}, c[2]:totable())
      local s = a:split(2, 2)
      assert.are.same({{2}, {5}}, s[2]:totable())
      assert.are.same({{1, 2}, {4, 5}}, a:split({1, 2}, 2)[2]:totable())
      c[1]:fill_(-1)
      assert.are.equal(-1, a[2][1]:item())
      fails("chunk: number of chunks must be at least 1, got 0", a.chunk, a, 0)
      fails("split: split size must be positive, got 0", a.split, a, 0)
    end)

    it("indexing t[i] (select along dim 1) and t[{range, range}] slicing", function()
      local a = seq()
      assert.are.same({0, 1, 2}, a[1]:totable())
      assert.are.same({3, 4, 5}, a[-1]:totable())
      assert.are.same({{1, 2}, {4, 5}}, a[{{1, 2}, {2, 3}}]:totable())
      assert.are.same({1, 2}, a[{1, {2, 3}}]:totable())
      assert.are.same({1, 4}, a[{{}, 2}]:totable())
      a[{{}, {2}}]:fill_(8)
      a[1]:add_(100)
      assert.are.same({{100, 108, 102}, {3, 8, 5}}, a:totable())
      fails("indexing: index 3 out of range for dim 1 of size 2", function() return a[3] end)
      fails("indexing: index 0 is invalid (indices are 1-based", function() return a[0] end)
      fails("indexing: range {1, 5} out of range for dim 1 of size 2", function() return a[{{1, 5}}] end)
      fails("indexing: 3 entries for a 2-d tensor", function() return a[{1, 2, 3}] end)
      local u = dt.zeros(2, {dtype = "uint8"})
      u[1] = 255
      assert.are.same({255, 0}, u:totable())
      fails("indexing assignment: value 300 cannot be converted to type uint8 without overflow", function() u[2] = 300 end)
    end)

    it("contiguous(), clone(), copy_(), to(dtype)", function()
      local a = seq()
      local tc = a:t():contiguous()
      assert.is_true(tc:is_contiguous())
      assert.are.same({{0, 3}, {1, 4}, {2, 5}}, tc:totable())
      assert.are.equal(a, a:contiguous()) -- already contiguous: the same tensor, as torch's `is`
      assert.are.equal(a, a:to("int64"))
      assert.are.equal(a, a:long())
      assert.are_not.equal(a, a:float())
      local c = a:clone()
      c:fill_(1)
      assert.are.equal(15, a:sum():item())
      local z = dt.zeros(2, 3)
      assert.are.equal(z, z:copy_(a))
      assert.are.same({{0, 1, 2}, {3, 4, 5}}, z:totable())
      assert.are.equal("float32", z.dtype)
      assert.are.equal("float64", a:to("float64").dtype)
      assert.are.equal("bfloat16", a:to(dt.bfloat16).dtype)
      assert.are.same({0.5, 1.5}, dt.tensor({0.5, 1.5}):to("float64"):totable())
      fails("copy_: shapes {2,2} and {2,3} cannot broadcast", function() return dt.zeros(2, 2):copy_(a) end)
      fails("unknown dtype 'x'", a.to, a, "x")
      assert.are.equal(a, a:to("cpu")) -- the storage's device tag: "cpu" is the only one in this build
      assert.are.equal("float64", a:to({device = "cpu", dtype = "float64"}).dtype)
      if not dt.cuda.is_available() then fails("to: device 'cuda' is not available (", a.to, a, "cuda") end
    end)
  end)
end
