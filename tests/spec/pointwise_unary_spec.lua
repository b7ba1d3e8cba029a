-- Unary pointwise ops against plain-Lua float64 references, per dtype.
local H = dofile((debug.getinfo(1, "S").source:match("^@(.*[/\\])") or "./") .. "pointwise_helpers.lua")
local flat, close = H.flat, H.close

-- erf by its Taylor series (|x| <= 3 here), accurate to ~1e-15
local function erf(x)
  local sum, term, n = x, x, 0
  repeat
    n = n + 1
    term = -term * x * x / n
    local add = term / (2 * n + 1)
    sum = sum + add
  until math.abs(add) < 1e-17
  return 2 / math.sqrt(math.pi) * sum
end
local function tanh(x) local e = math.exp(2 * x); return (e - 1) / (e + 1) end

local REF = {
  neg = function(x) return -x end, abs = math.abs, exp = math.exp, log = math.log, sqrt = math.sqrt,
  rsqrt = function(x) return 1 / math.sqrt(x) end, tanh = tanh,
  sigmoid = function(x) return 1 / (1 + math.exp(-x)) end,
  relu = function(x) return x > 0 and x or 0 end,
  gelu = function(x) return 0.5 * x * (1 + erf(x / math.sqrt(2))) end,
  silu = function(x) return x / (1 + math.exp(-x)) end, sin = math.sin, cos = math.cos,
}
local POSITIVE = {log = true, sqrt = true, rsqrt = true}

describe("pointwise unary", function()
  local xs = {-2.75, -1, -0.3, 0, 0.4, 1, 2.5}
  local ps = {0.25, 0.5, 1, 2, 3.5, 10, 100}

  for _, dtype in ipairs {"float32", "float64", "bfloat16", "float16"} do
    it("computes every float op on " .. dtype, function()
      for name, f in pairs(REF) do
        local x = dt.tensor(POSITIVE[name] and ps or xs, {dtype = dtype})
        local xv = flat(x)
        local e = {}
        for i = 1, #xv do e[i] = f(xv[i]) end
        local r = x[name](x, nil)
        assert.are.equal(dtype, r.dtype, name)
        close(e, flat(r), dtype, name)
        close(e, flat(dt[name](x)), dtype, "dt." .. name)
      end
    end)
  end

  it("gives float32 for integer inputs of float-only ops and keeps ints for neg/abs/relu", function()
    local i = dt.tensor({-3, 0, 4}, {dtype = "int32"})
    local e = i:exp()
    assert.are.equal("float32", e.dtype)
    close({math.exp(-3), 1, math.exp(4)}, flat(e), "float32", "exp int32")
    assert.are.equal("float32", dt.tensor({true, false}):sigmoid().dtype)
    assert.are.same({"int32", {3, 0, -4}}, {(-i).dtype, (-i):totable()})
    assert.are.same({"int32", {3, 0, 4}}, {i:abs().dtype, i:abs():totable()})
    assert.are.same({"int32", {0, 0, 4}}, {i:relu().dtype, i:relu():totable()})
    assert.are.same({math.mininteger}, dt.tensor({math.mininteger}):abs():totable()) -- wraps, no UB
    assert.are.same({"uint8", {253, 0, 4}}, {dt.tensor({253, 0, 4}, {dtype = "uint8"}):abs().dtype,
      dt.tensor({253, 0, 4}, {dtype = "uint8"}):abs():totable()})
  end)

  it("computes gelu's tanh approximation when asked", function()
    local x = dt.tensor({-2, -0.5, 0, 0.5, 2}, {dtype = "float64"})
    local e = {}
    for k, v in ipairs(flat(x)) do
      e[k] = 0.5 * v * (1 + tanh(math.sqrt(2 / math.pi) * (v + 0.044715 * v ^ 3)))
    end
    close(e, flat(x:gelu("tanh")), "float64", "gelu tanh")
    close(e, flat(dt.gelu(x, {approximate = "tanh"})), "float64", "gelu tanh opts")
    close(flat(x:gelu()), flat(x:gelu("none")), "float64", "gelu none")
  end)

  it("follows IEEE at the edges (log 0, sqrt of negatives, nan through relu)", function()
    local r = dt.tensor({0, -1}, {dtype = "float64"}):log():totable()
    assert.are.equal(-math.huge, r[1])
    assert.is_true(r[2] ~= r[2])
    local s = dt.tensor({-4.0}):sqrt():totable()
    assert.is_true(s[1] ~= s[1])
    local n = (dt.tensor({0.0}) / 0):relu():totable()
    assert.is_true(n[1] ~= n[1])
    assert.are.same({0, 1}, dt.tensor({-1000.0, 1000.0}):sigmoid():totable())
  end)

  it("clamps with min, max, either nil, or {min =, max =}", function()
    local x = dt.tensor({-2.0, -0.5, 0.5, 2.0})
    assert.are.same({-1, -0.5, 0.5, 1}, x:clamp(-1, 1):totable())
    assert.are.same({-1, -0.5, 0.5, 2}, x:clamp(-1):totable())
    assert.are.same({-2, -0.5, 0.5, 1}, x:clamp(nil, 1):totable())
    assert.are.same({-2, -0.5, 0, 0}, dt.clamp(x, {max = 0}):totable())
    assert.are.same({0, 0, 0.5, 1}, x:clamp({min = 0, max = 1}):totable())
    assert.are.same({1, 1, 1, 1}, x:clamp(3, 1):totable()) -- min > max: max wins, as torch
    local nan = (dt.tensor({0.0}) / 0):clamp(0, 1):totable()
    assert.is_true(nan[1] ~= nan[1])
    local i = dt.tensor({-5, 0, 5})
    assert.are.same({"int64", {-1, 0, 1}}, {i:clamp(-1, 1).dtype, i:clamp(-1, 1):totable()})
    local f = i:clamp(-1.5, 2.5)
    assert.are.same({"float32", {-1.5, 0, 2.5}}, {f.dtype, f:totable()})
    assert.are.same({9007199254740993}, dt.tensor({9007199254740995}):clamp(nil, 9007199254740993):totable())
  end)

  it("handles empty and 0-d tensors", function()
    assert.are.same({0, 2}, dt.zeros(0, 2):exp():size())
    assert.are.equal(0, dt.tensor(4.0):sqrt():dim())
    assert.are.equal(2, dt.tensor(4.0):sqrt():item())
    assert.are.equal(-4, (-dt.tensor(4)):item())
  end)

  it("reports errors naming the op", function()
    local ok, err = pcall(function() return -dt.tensor({true}) end)
    assert.is_false(ok)
    assert.matches("neg: negation, the `-` operator, on a bool tensor is not supported", err, 1, true)
    ok, err = pcall(dt.relu, dt.tensor({true}))
    assert.matches("relu: not supported for bool tensors", err, 1, true)
    ok, err = pcall(dt.clamp, dt.ones(2))
    assert.matches("clamp: at least one of min and max must be given", err, 1, true)
    ok, err = pcall(dt.clamp, dt.ones(2), "a")
    assert.matches("clamp: min must be a number or nil, got string", err, 1, true)
    ok, err = pcall(dt.clamp, dt.ones(2), nil, {})
    assert.matches("clamp: max must be a number or nil, got table", err, 1, true)
    ok, err = pcall(dt.clamp, dt.ones(2, {dtype = "uint8"}), 300)
    assert.matches("clamp: value 300 cannot be converted to type uint8 without overflow", err, 1, true)
    ok, err = pcall(dt.gelu, dt.ones(2), "fast")
    assert.matches('gelu: approximate must be "none" or "tanh", got fast', err, 1, true)
    ok, err = pcall(dt.exp, 3)
    assert.matches("tensor expected, got number", err, 1, true)
  end)
end)

-- Every unary function in float64 against Lua's math (gelu against Python's math.erf).
do
  local S = require("tests.spec.support.spec_helpers")
  local err, fails, close, tmpname = S.err, S.fails, S.close, S.tmpname

  describe("unary functions in float64 against Lua math", function()
    it("abs neg exp log sqrt rsqrt tanh sigmoid relu gelu silu sin cos clamp", function()
      local x = dt.tensor({0.5, -1.25, 2}, {dtype = "float64"})
      local v = {0.5, -1.25, 2}
      local function map(fn) local r = {} for i, e in ipairs(v) do r[i] = fn(e) end return r end
      local erf_gelu = {0.5 * 0.5 * (1 + 0.3829249225480262), -1.25 * 0.5 * (1 - 0.7887004526662894),
                        2 * 0.5 * (1 + 0.9544997361036416)} -- x * Phi(x), erf(x / sqrt 2) from Python's math.erf
      close(map(math.abs), x:abs():totable(), 1e-15)
      close(map(function(e) return -e end), x:neg():totable(), 1e-15)
      close(map(math.exp), x:exp():totable(), 1e-15)
      close(map(function(e) return math.log(math.abs(e)) end), x:abs():log():totable(), 1e-15)
      close(map(function(e) return math.sqrt(math.abs(e)) end), x:abs():sqrt():totable(), 1e-15)
      close(map(function(e) return 1 / math.sqrt(math.abs(e)) end), x:abs():rsqrt():totable(), 1e-15)
      close(map(function(e) return (math.exp(2 * e) - 1) / (math.exp(2 * e) + 1) end), x:tanh():totable(), 1e-15)
      close(map(function(e) return 1 / (1 + math.exp(-e)) end), x:sigmoid():totable(), 1e-15)
      close(map(function(e) return math.max(e, 0) end), x:relu():totable(), 0)
      close(erf_gelu, x:gelu():totable(), 1e-12)
      close(map(function(e) return e / (1 + math.exp(-e)) end), x:silu():totable(), 1e-15)
      close(map(math.sin), x:sin():totable(), 1e-15)
      close(map(math.cos), x:cos():totable(), 1e-15)
      close({0.5, -1, 1}, x:clamp(-1, 1):totable(), 0)
      close({0.5, 0, 2}, x:clamp(0):totable(), 0)
      assert.are.equal("float32", dt.tensor({1, 2}):exp().dtype) -- integers promote to float32
      assert.are.equal("int64", dt.tensor({1, -2}):abs().dtype)
      assert.is_true(dt.tensor({-1.0}):log():item() ~= dt.tensor({-1.0}):log():item()) -- NaN, as torch
    end)
  end)
end

describe("hardtanh and leaky_relu", function()
  local function err(f) local ok, e = pcall(f) assert.is_false(ok) return tostring(e) end
  it("clamp to [min_val, max_val] and scale the negative part, keeping the dtype", function()
    local x = dt.tensor({-2.5, -0.5, 0, 0.5, 3})
    assert.are.same({-1, -0.5, 0, 0.5, 1}, x:hardtanh():totable())
    assert.are.same({-2, -0.5, 0, 0.5, 2}, dt.F.hardtanh(x, {min_val = -2, max_val = 2}):totable())
    assert.are.same({-0.25, -0.05, 0, 0.5, 3}, dt.F.leaky_relu(x:double(), 0.1):totable())
    assert.are.equal("float32", x:leaky_relu().dtype)
    local nan = dt.tensor({0 / 0}, {dtype = "float64"})
    assert.is_true(nan:hardtanh():item() ~= nan:hardtanh():item())
    assert.is_true(nan:leaky_relu():item() ~= nan:leaky_relu():item())
  end)
  it("refuse integer tensors and crossed bounds", function()
    assert.matches("hardtanh: expects a floating-point tensor, got int64", err(function() return dt.arange(3):hardtanh() end), 1, true)
    assert.matches("leaky_relu: expects a floating-point tensor, got bool", err(function() return dt.tensor({true}):leaky_relu() end), 1, true)
    assert.matches("hardtanh: min_val (2) must not exceed max_val (1)", err(function() return dt.ones(2):hardtanh(2, 1) end), 1, true)
    assert.matches("leaky_relu: negative_slope must be a number, got string", err(function() return dt.ones(2):leaky_relu("a") end), 1, true)
  end)
end)
