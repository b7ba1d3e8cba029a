-- Binary pointwise ops: values against plain-Lua float64 references, broadcasting,
-- PyTorch type promotion, scalars on either side, and every error message.
local DTYPES = {"float32", "float64", "bfloat16", "float16", "int64", "int32", "uint8", "bool"}
local H = dofile((debug.getinfo(1, "S").source:match("^@(.*[/\\])") or "./") .. "pointwise_helpers.lua")
local flat, close = H.flat, H.close

local function lua_rem(a, b) local m = math.fmod(a, b); if m ~= 0 and ((b < 0) ~= (m < 0)) then m = m + b end; return m end

describe("pointwise binary", function()
  local xs = {-2.5, -1, 0, 0.5, 1.25, 3}
  local ys = {1.5, -2, 4, 0.25, -0.75, 2}
  local refs = {
    add = function(a, b) return a + b end, sub = function(a, b) return a - b end,
    mul = function(a, b) return a * b end, div = function(a, b) return a / b end,
    pow = function(a, b) return a ^ b end, remainder = lua_rem,
    eq = function(a, b) return a == b end, ne = function(a, b) return a ~= b end,
    lt = function(a, b) return a < b end, le = function(a, b) return a <= b end,
    gt = function(a, b) return a > b end, ge = function(a, b) return a >= b end,
  }

  for _, dtype in ipairs {"float32", "float64", "bfloat16", "float16"} do
    it("computes every op on " .. dtype .. " (tensor-tensor, tensor-number, number-tensor)", function()
      local px = {0.5, 1.25, 2, 3, 0.75, 1.5} -- positive bases for pow
      local x, y, p = dt.tensor(xs, {dtype = dtype}), dt.tensor(ys, {dtype = dtype}), dt.tensor(px, {dtype = dtype})
      local xv, yv, pv = flat(x), flat(y), flat(p) -- values as stored (rounded to dtype)
      for name, f in pairs(refs) do
        local a, av = x, xv
        if name == "pow" then a, av = p, pv end
        local r = dt[name](a, y)
        local cmp = name == "eq" or name == "ne" or name == "lt" or name == "le" or name == "gt" or name == "ge"
        assert.are.equal(cmp and "bool" or dtype, r.dtype, name)
        local e = {}
        for i = 1, #av do e[i] = f(av[i], yv[i]) end
        close(e, flat(r), dtype, name .. " tt")
        -- tensor-number and number-tensor (0.5 is exact in every float dtype)
        e = {}
        for i = 1, #av do e[i] = f(av[i], 0.5) end
        close(e, flat(a[name](a, 0.5)), dtype, name .. " ts")
        e = {}
        for i = 1, #yv do e[i] = f(2, yv[i]) end
        close(e, flat(dt[name](2, y)), dtype, name .. " st")
      end
    end)
  end

  it("computes integer ops exactly (wrapping, pow by squaring, remainder sign of divisor)", function()
    local a = dt.tensor({7, -7, 7, -7, 0, 5}, {dtype = "int64"})
    local b = dt.tensor({3, 3, -3, -3, 5, 1}, {dtype = "int64"})
    assert.are.same({1, 2, -2, -1, 0, 0}, (a % b):totable())
    assert.are.same({10, -4, 4, -10, 5, 6}, (a + b):totable())
    assert.are.same({4, -10, 10, -4, -5, 4}, (a - b):totable())
    assert.are.same({21, -21, -21, 21, 0, 5}, (a * b):totable())
    assert.are.same({343, -343}, (dt.tensor({7, -7}) ^ 3):totable())
    assert.are.same({1, 8}, (2 ^ dt.tensor({0, 3})):totable())
    assert.are.same({2, 1}, (dt.tensor({-1, -2}) % 3):totable())
    assert.are.same({math.maxinteger}, (dt.tensor({math.mininteger}) - 1):totable()) -- wraps like int64
    assert.are.same({9007199254740993}, (dt.tensor({9007199254740992}) + 1):totable()) -- exact beyond 2^53
    local i32 = dt.tensor({2147483647}, {dtype = "int32"}) + 1
    assert.are.same({"int32", {-2147483648}}, {i32.dtype, i32:totable()})
    local u8 = dt.tensor({250}, {dtype = "uint8"}) + 10
    assert.are.same({"uint8", {4}}, {u8.dtype, u8:totable()})
    assert.are.same({2.5, -3.5}, dt.div(dt.tensor({5, -7}), 2):totable())
    assert.are.equal("float32", (dt.tensor({5}) / dt.tensor({2})).dtype)
  end)

  it("wraps like torch's int64 when sub/add negate or scale math.mininteger (no UB)", function()
    local fails = require("tests.spec.support.spec_helpers").fails
    local mi, ma = math.mininteger, math.maxinteger
    local t = dt.tensor({1, -1, 0})
    assert.are.same({mi + 1, ma, mi}, (t - mi):totable()) -- 1 - mi wraps to mi + 1
    assert.are.same({ma, mi + 1, mi}, (mi - t):totable())
    assert.are.same({mi + 1, ma, 0}, t:sub(t, mi):totable()) -- alpha = mi: -alpha wraps to mi
    assert.are.same({mi + 1, ma, mi}, dt.sub(t, dt.tensor({1, 1, 1}), {alpha = mi}):totable())
    assert.are.same({mi + 1, ma, mi}, t:add(dt.tensor({1, 1, 1}), mi):totable())
    assert.are.same({mi + 2, mi, mi + 1}, t:sub(dt.tensor({1, 1, 1}), ma):totable())
    assert.are.same({ma, ma - 2, ma - 1}, dt.sub(t, dt.tensor({2, 2, 2}), {alpha = (1 << 62) + 1}):totable()) -- exact alpha
    assert.are.same({0}, dt.sub(mi, dt.tensor({1}), mi):totable()) -- mi - mi * 1
    local i32 = dt.tensor({1}, {dtype = "int32"})
    fails("sub: value -9223372036854775808 cannot be converted to type int32 without overflow", function() return i32 - mi end)
    fails("sub: value -9223372036854775808 cannot be converted to type int32 without overflow", i32.sub, i32, i32, mi)
    fails("add: value 4294967296 cannot be converted to type int32 without overflow", i32.add, i32, i32, 1 << 32)
    assert.are.same({7}, i32:add(dt.tensor({2}, {dtype = "int32"}), 3):totable())
    assert.are.same({-math.huge}, (dt.tensor({1.5}) - 1e300 * 1e10):totable())
    assert.are.same({-math.huge}, dt.tensor({1.5}):sub(dt.tensor({1.0}), 1e300 * 1e300):totable())
  end)

  it("handles bool arithmetic like torch (add is or, mul is and)", function()
    local t, f = dt.tensor({true, true, false, false}), dt.tensor({true, false, true, false})
    assert.are.same({true, true, true, false}, (t + f):totable())
    assert.are.same({true, false, false, false}, (t * f):totable())
    assert.are.same({"int64", {2, 2, 1, 1}}, {(t + 1).dtype, (t + 1):totable()})
    assert.are.same({true, false, false, true}, t:eq(f):totable())
  end)

  it("follows IEEE for float division by zero", function()
    local r = dt.tensor({1, -1, 0}, {dtype = "float64"}) / 0
    local v = r:totable()
    assert.are.equal(math.huge, v[1])
    assert.are.equal(-math.huge, v[2])
    assert.is_true(v[3] ~= v[3])
    local m = (dt.tensor({5.0}) % 0):totable()
    assert.is_true(m[1] ~= m[1])
  end)

  it("supports the operators + - * / % ^ and unary - with numbers on either side", function()
    local a = dt.tensor({1.0, 2.0, 4.0})
    assert.are.same({3, 4, 6}, (a + 2):totable())
    assert.are.same({1, 0, -2}, (2 - a):totable())
    assert.are.same({-1, 0, 2}, (a - 2):totable())
    assert.are.same({2, 4, 8}, (2 * a):totable())
    assert.are.same({2, 1, 0.5}, (2 / a):totable())
    assert.are.same({1, 4, 16}, (a ^ 2):totable())
    assert.are.same({2, 4, 16}, (2 ^ a):totable())
    assert.are.same({1, 0, 0}, (a % 2):totable())
    assert.are.same({0, 1, 1}, (5 % a):totable())
    assert.are.same({-1, -2, -4}, (-a):totable())
    assert.are.same({0, 0, 0}, (a - a):totable())
    assert.is_false(a == a + 0) -- == is identity: no __eq
    assert.is_true(a == a)
  end)

  it("takes alpha as a third number or {alpha = n}", function()
    local a, b = dt.tensor({1.0, 2.0}), dt.tensor({10.0, 20.0})
    assert.are.same({21, 42}, a:add(b, 2):totable())
    assert.are.same({21, 42}, dt.add(a, b, {alpha = 2}):totable())
    assert.are.same({-19, -38}, a:sub(b, {alpha = 2}):totable())
    assert.are.same({-14, -28}, a:sub(b, 1.5):totable())
    assert.are.same({7, 8}, a:add(3, 2):totable())
    assert.are.same({-5, -4}, a:sub(3, 2):totable())
    assert.are.same({5, 3}, dt.sub(7, dt.tensor({1, 2}), 2):totable())
    assert.are.same({21, 42}, dt.tensor({1, 2}):add(dt.tensor({10, 20}), 2):totable())
  end)

  it("broadcasts shapes (numpy rules)", function()
    local cases = {
      {{2, 3}, {3}, {2, 3}}, {{2, 1}, {1, 3}, {2, 3}}, {{4, 1, 3}, {2, 1}, {4, 2, 3}},
      {{}, {2, 2}, {2, 2}}, {{0, 3}, {1, 3}, {0, 3}}, {{3, 1}, {0}, {3, 0}}, {{1}, {}, {1}},
    }
    for _, c in ipairs(cases) do
      local a, b = dt.ones(c[1]), dt.full(c[2], 2.0)
      local r = a + b
      assert.are.same(c[3], r:size())
      for _, v in ipairs(flat(r)) do assert.are.equal(3, v) end
      assert.are.same(c[3], (b * a):size())
    end
    -- values vary along the broadcast dims
    local col, row = dt.tensor({{1}, {2}}), dt.tensor({10, 20, 30})
    assert.are.same({{11, 21, 31}, {12, 22, 32}}, (col + row):totable())
    assert.are.same({{-9, -19, -29}, {-8, -18, -28}}, (col - row):totable())
    assert.are.same({{true, false, false}, {false, true, false}}, (col * 10):eq(row):totable())
  end)

  it("promotes every pair of dtypes like torch.promote_types", function()
    local F32, F64, BF, F16, I64, I32, U8, B = "float32", "float64", "bfloat16", "float16", "int64", "int32", "uint8", "bool"
    local expected = { -- rows and columns in DTYPES order
      float32 = {F32, F64, F32, F32, F32, F32, F32, F32},
      float64 = {F64, F64, F64, F64, F64, F64, F64, F64},
      bfloat16 = {F32, F64, BF, F32, BF, BF, BF, BF},
      float16 = {F32, F64, F32, F16, F16, F16, F16, F16},
      int64 = {F32, F64, BF, F16, I64, I64, I64, I64},
      int32 = {F32, F64, BF, F16, I64, I32, I32, I32},
      uint8 = {F32, F64, BF, F16, I64, I32, U8, U8},
      bool = {F32, F64, BF, F16, I64, I32, U8, B},
    }
    for _, da in ipairs(DTYPES) do
      for j, db in ipairs(DTYPES) do
        local a, b = dt.ones({2}, {dtype = da}), dt.ones({2}, {dtype = db})
        local r = a + b
        assert.are.equal(expected[da][j], r.dtype, da .. " + " .. db)
        local want = expected[da][j] == "bool" and true or 2
        assert.are.same({want, want}, r:totable(), da .. " + " .. db)
        assert.are.equal("bool", a:lt(b).dtype)
      end
    end
  end)

  it("lets 0-d tensors and numbers promote only across categories", function()
    local function d(x) return x.dtype end
    local f32, i32 = dt.ones({3}), dt.ones({3}, {dtype = "int32"})
    local z64, zi64 = dt.tensor(2.0, {dtype = "float64"}), dt.tensor(2, {dtype = "int64"})
    assert.are.equal("float32", d(f32 + z64))
    assert.are.equal("float64", d(i32 + z64))
    assert.are.equal("int32", d(i32 + zi64))
    assert.are.equal("float64", d(z64 + dt.tensor(1, {dtype = "int32"}))) -- both 0-d: ordinary promotion
    assert.are.equal("int32", d(i32 + 2))
    assert.are.equal("float32", d(i32 + 2.5))
    assert.are.equal("float64", d(dt.ones({2}, {dtype = "float64"}) + 2.5))
    assert.are.equal("float16", d(dt.ones({2}, {dtype = "float16"}) * 2.5))
    assert.are.equal("bfloat16", d(dt.ones({2}, {dtype = "bfloat16"}) + 1))
    assert.are.equal("int64", d(dt.tensor({true}) + 1))
    assert.are.equal("float32", d(dt.tensor({true}) + 1.5))
    assert.are.equal("uint8", d(dt.ones({2}, {dtype = "uint8"}) * 3))
    assert.are.equal("int32", d(dt.tensor(3, {dtype = "int32"}) + 1)) -- 0-d beats a number
    assert.are.equal("float32", d(dt.tensor(3, {dtype = "int32"}) + 1.5))
    assert.are.equal("float32", d(i32 / 2))
    assert.are.equal("bool", d(i32:lt(2.5)))
    assert.are.same({false, false, false}, i32:gt(1.5):totable())
  end)

  it("rounds numbers and 0-d operands to a half common dtype", function()
    local b = dt.tensor({0.1, 0.2}, {dtype = "bfloat16"})
    assert.are.same({true, false}, b:eq(0.1):totable())
    assert.are.same({false, true}, b:ne(0.1):totable())
    -- a float32 0-d tensor meets them as their common dtype, bfloat16 (torch casts operands first)
    assert.are.same({true, false}, b:eq(dt.tensor(0.1)):totable())
    assert.are.same({"bfloat16", 0}, {(b - dt.tensor(0.1)).dtype, (b - dt.tensor(0.1)):totable()[1]})
    -- but a dimensioned float32 tensor makes the common dtype float32
    local d = (b - dt.tensor({0.1, 0.1})):totable()
    assert.is_true(math.abs(d[1] - 9.765475988e-05) < 1e-9)
  end)

  it("handles empty and 0-d tensors", function()
    local e = dt.zeros(0, 3)
    assert.are.same({0, 3}, (e + 1):size())
    assert.are.same({0, 3}, (e * e):size())
    assert.are.same({0, 3}, e:lt(e).shape)
    local z = dt.tensor(3.0) * dt.tensor(2.0)
    assert.are.equal(0, z:dim())
    assert.are.equal(6, z:item())
    assert.are.equal(1, (dt.tensor(7) % 3):item())
  end)

  it("reports errors naming the op", function()
    local ok, err = pcall(function() return dt.ones(2, 3) + dt.ones(4) end)
    assert.is_false(ok)
    assert.matches("add: shapes {2,3} and {4} cannot broadcast", err, 1, true)
    ok, err = pcall(function() return dt.ones(2, 3) - dt.ones(4) end)
    assert.matches("sub: shapes {2,3} and {4} cannot broadcast", err, 1, true)
    ok, err = pcall(dt.lt, dt.ones(2), dt.ones(3))
    assert.matches("lt: shapes {2} and {3} cannot broadcast", err, 1, true)
    ok, err = pcall(function() return dt.tensor({1, 2}) ^ -1 end)
    assert.matches("pow: Integers to negative integer powers are not allowed", err, 1, true)
    ok, err = pcall(function() return dt.tensor({2, 2}) ^ dt.tensor({1, -1}) end)
    assert.matches("pow: Integers to negative integer powers are not allowed", err, 1, true)
    ok, err = pcall(function() return dt.tensor({1, 2}) % 0 end)
    assert.matches("remainder: integer division by zero", err, 1, true)
    ok, err = pcall(function() return dt.tensor({1, 2}) % dt.tensor({1, 0}) end)
    assert.matches("remainder: integer division by zero", err, 1, true)
    ok, err = pcall(function() return dt.tensor({true}) - dt.tensor({false}) end)
    assert.matches("sub: not supported for two bool operands", err, 1, true)
    ok, err = pcall(dt.add, dt.tensor({1}), dt.tensor({2}), 1.5)
    assert.matches("add: for integral input tensors, argument alpha must not be a floating point number", err, 1, true)
    ok, err = pcall(dt.add, 1, 2)
    assert.matches("add: expected a tensor operand, got number and number", err, 1, true)
    ok, err = pcall(function() return dt.ones(2) * "x" end)
    assert.matches("mul: expected a tensor or a number, got string", err, 1, true)
    ok, err = pcall(function() return dt.ones(2, {dtype = "uint8"}) + 300 end)
    assert.matches("add: value 300 cannot be converted to type uint8 without overflow", err, 1, true)
    ok, err = pcall(function() return dt.ones(2, {dtype = "int32"}) * (1 << 40) end)
    assert.matches("mul: value 1099511627776 cannot be converted to type int32 without overflow", err, 1, true)
    assert.are.same({true, true}, dt.ones(2, {dtype = "uint8"}):lt(300):totable()) -- compares need no cast
    ok, err = pcall(dt.add, dt.ones(2), dt.ones(2), "x")
    assert.matches("add: alpha must be a number, got string", err, 1, true)
  end)

  it("writes outputs past the last-level cache (non-temporal stores) with the same values", function()
    -- 3 x 8 MiB of operands: past half of any cache up to 48 MiB, so the output streams
    local n = (1 << 21) + 5
    local a, b = dt.randn(n), dt.randn(n)
    local function strided(f) -- the same op on a transposed view: never flat, never streamed
      local m = (n - 5) // 4
      return f(a:narrow(1, 1, 4 * m):view(m, 4):t(), b:narrow(1, 1, 4 * m):view(m, 4):t()):t():reshape(4 * m)
    end
    for name, f in pairs({add = function(x, y) return x + y end, mul = function(x, y) return x * y end,
                          sub_alpha = function(x, y) return x:sub(y, 0.5) end,
                          scalar = function(x) return x * 3 + 1 end, gt = function(x, y) return x:gt(y) end}) do
      local r = f(a, b)
      assert.is_true(r:narrow(1, 1, n - 5):equal(strided(f)), name)
      assert.is_true(r:narrow(1, n - 4, 5):equal(f(a:narrow(1, n - 4, 5), b:narrow(1, n - 4, 5))), name .. " tail")
    end
    local d = a:double() + b:double()
    assert.is_true(d:equal(a:double():add(b:double())), "float64")
    local c = a:clone()
    c:add_(b) -- in place: out is an input, not streamed
    assert.is_true(c:equal(a + b), "add_")
  end)

  it("keeps per-call overhead of a + b small", function()
    local a, b = dt.ones(1), dt.ones(1)
    local t0 = os.clock()
    for _ = 1, 1e5 do local _ = a + b end
    local per = (os.clock() - t0) / 1e5
    assert.is_true(per < 5e-6, "a + b took " .. per * 1e6 .. " us per call")
  end)
end)

-- Operators and methods with broadcasting and torch.result_type promotion, in-place ops,
-- comparisons and where, with their errors.
do
  local S = require("tests.spec.support.spec_helpers")
  local err, fails, close, tmpname = S.err, S.fails, S.close, S.tmpname

  describe("arithmetic with broadcasting and type promotion", function()
    local a = dt.tensor({{1, 2, 3}, {4, 5, 6}})
    local f = dt.tensor({1.5, -2, 0.5})

    it("metatable operators + - * / % ^ and unary -, tensor with tensor or Lua number, either side", function()
      assert.are.same({{2.5, 0, 3.5}, {5.5, 3, 6.5}}, (a + f):totable())
      assert.are.equal("float32", (a + f).dtype)
      assert.are.same({{3, 4, 5}, {6, 7, 8}}, (2 + a):totable())
      assert.are.equal("int64", (2 + a).dtype)
      assert.are.same({{0, -1, -2}, {-3, -4, -5}}, (1 - a):totable())
      assert.are.same({{2.5, 5, 7.5}, {10, 12.5, 15}}, (a * 2.5):totable())
      assert.are.same({{0.5, 1, 1.5}, {2, 2.5, 3}}, (a / 2):totable())
      assert.are.equal("float32", (a / 2).dtype) -- true division, as torch
      assert.are.same({{1, 2, 3}, {0, 1, 2}}, (a % 4):totable())
      assert.are.equal(2, (-7 % dt.tensor(3)):item()) -- sign of the divisor, as Lua and torch
      assert.are.same({{1, 4, 9}, {16, 25, 36}}, (a ^ 2):totable())
      assert.are.same({{2, 4, 8}, {16, 32, 64}}, (2 ^ a):totable())
      assert.are.same({{-1, -2, -3}, {-4, -5, -6}}, (-a):totable())
      fails("add: expected a tensor or a number, got string", function() return a + "x" end)
      fails("neg: negation, the `-` operator, on a bool tensor is not supported", function() return -dt.tensor({true}) end)
      fails("remainder: integer division by zero", function() return a % 0 end)
    end)

    it("type promotion (torch.result_type)", function()
      local function dtype_of(x, y) return (x + y).dtype end
      local i32 = dt.ones(1, {dtype = "int32"})
      assert.are.equal("int64", dtype_of(i32, dt.ones(1, {dtype = "int64"})))
      assert.are.equal("int32", dtype_of(i32, 5))
      assert.are.equal("float32", dtype_of(i32, 1.5))
      assert.are.equal("float32", dtype_of(dt.ones(1, {dtype = "bfloat16"}), dt.ones(1, {dtype = "float16"})))
      assert.are.equal("bfloat16", dtype_of(dt.ones(1, {dtype = "bfloat16"}), 2.5))
      assert.are.equal("float64", dtype_of(dt.ones(1), dt.ones(1, {dtype = "float64"})))
      assert.are.equal("int32", dtype_of(dt.ones(1, {dtype = "uint8"}), i32))
      assert.are.equal("bool", dtype_of(dt.tensor({true}), dt.tensor({false})))
      fails("add: value 300 cannot be converted to type uint8 without overflow",
            function() return dt.ones(1, {dtype = "uint8"}) + 300 end)
    end)

    it("methods add/sub/mul/div/pow", function()
      assert.are.same({{2.5, 0, 3.5}, {5.5, 3, 6.5}}, a:add(f):totable())
      assert.are.same({{4, -2, 4}, {7, 1, 7}}, a:add(f, 2):totable()) -- alpha, as torch
      assert.are.same({{0, 1, 2}, {3, 4, 5}}, a:sub(1):totable())
      assert.are.same({{1, 4, 9}, {16, 25, 36}}, a:mul(a):totable())
      assert.are.same({{0.25, 0.5, 0.75}, {1, 1.25, 1.5}}, a:div(4):totable())
      assert.are.same({{1, 4, 9}, {16, 25, 36}}, a:pow(2):totable())
      assert.are.same({{2, 3, 4}, {5, 6, 7}}, dt.add(a, 1):totable())
      fails("add: expected a tensor or a number, got no value", a.add, a)
    end)

    it("in-place add_ mul_ zero_ fill_", function()
      local x = dt.ones(2, 3)
      assert.are.equal(x, x:add_(1))
      assert.are.same({{2, 2, 2}, {2, 2, 2}}, x:totable())
      x:mul_(dt.tensor({1, 2, 3}))
      assert.are.same({{2, 4, 6}, {2, 4, 6}}, x:totable())
      x:zero_()
      assert.are.equal(0, x:abs():sum():item())
      x:fill_(9)
      assert.are.same({{9, 9, 9}, {9, 9, 9}}, x:totable())
      fails("add_: output with shape {2} doesn't match the broadcast shape {2,2}",
            function() return dt.ones(2):add_(dt.ones(2, 2)) end)
      fails("add_: result type float32 can't be cast to the desired output type int64",
            function() return a:clone():add_(0.5) end)
    end)

    it("comparisons eq/ne/lt/le/gt/ge (Lua's == stays identity)", function()
      assert.are.same({{false, true, false}, {false, false, false}}, a:eq(2):totable())
      assert.are.equal("bool", a:eq(2).dtype)
      assert.are.same({{true, true, true}, {true, true, true}}, a:ne(0):totable())
      assert.are.same({{true, true, false}, {false, false, false}}, a:lt(3):totable())
      assert.are.same({{true, false, false}, {false, false, false}}, a:le(f):totable())
      assert.are.same({{false, true, true}, {true, true, true}}, a:gt(f):totable())
      assert.are.same({{false, false, false}, {true, true, true}}, a:ge(4):totable())
      assert.is_true(a == a)
      assert.is_false(a == a:clone())
      assert.is_true(a:equal(a:clone()))
      fails("eq: shapes {2,3} and {4} cannot broadcast", function() return a:eq(dt.ones(4)) end)
    end)

    it("where", function()
      assert.are.same({{0, 0, 3}, {4, 5, 6}}, dt.where(a:gt(2), a, 0):totable())
      assert.are.same({{1.5, -2, 3}, {4, 5, 6}}, dt.where(a:gt(2), a, f):totable())
      fails("where: condition must be a bool tensor, got int64", dt.where, a, a, a)
      fails("where: shapes {2,3} and {5} cannot broadcast", dt.where, a:gt(1), a, dt.ones(5))
    end)
  end)
end
