-- Acceptance of issue 6 (random numbers), its plain-tensor half, item by item as the
-- issue names them.  The DTensor half (meshes, placements, the dispatcher's tracker
-- region) is not covered here; the SPMD items (manual_seed {sync = true}, state equal on
-- all ranks) are in tests/spec_dist/acceptance_issue6_spec.lua.
local raises = require("tests.spec.support.io_nn_helpers").fails

local function vals(t) return t:flatten():totable() end

local function mean_var(t)
  local x = t:to("float64")
  local m = x:mean():item()
  return m, ((x - m) * (x - m)):mean():item()
end

describe("issue 6: a counter-based generator (Philox4x32-10)", function()
  it("pins the generator with the Random123 known-answer vector (counter 0, key 0)", function()
    -- seed 0 = key {0, 0}; the first block (counter {0, 0, 0, 0}) gives the published
    -- philox4x32_10 words 6627e8d5 e169c58d bc57ac4c 9b00dbd8.  randint over a range of
    -- 2^32 - 1 returns the words themselves (none is 0xffffffff).
    dt.manual_seed(0)
    local w = vals(dt.randint(0, 0xffffffff, {4}))
    assert.are.same({0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}, w)
  end)

  it("element i draws from (seed, offset + i): a later op starts where the offset left off", function()
    dt.manual_seed(11)
    local whole = vals(dt.rand(12))
    dt.manual_seed(11)
    local a = vals(dt.rand(4)) -- advances by 4 words
    local b = vals(dt.rand(8))
    assert.are.same({whole[1], whole[2], whole[3], whole[4]}, a)
    for i = 1, 8 do assert.are.equal(whole[4 + i], b[i]) end
  end)
end)

describe("issue 6: dt.manual_seed(s), dt.get_rng_state() / dt.set_rng_state(state)", function()
  it("manual_seed sets (seed, offset 0); get/set round-trip the state", function()
    dt.manual_seed(42)
    assert.are.same({seed = 42, offset = 0}, dt.get_rng_state())
    dt.rand(3)
    local st = dt.get_rng_state()
    assert.are.same({seed = 42, offset = 4}, st) -- 3 words rounded up to 4
    local x = vals(dt.randn(5))
    dt.set_rng_state(st)
    assert.are.same(x, vals(dt.randn(5)))
  end)

  it("bad states and seeds are errors naming the op", function()
    raises("set_rng_state: state.offset must be >= 0, got -1", dt.set_rng_state, {seed = 1, offset = -1})
    raises("set_rng_state: expected a table {seed = ..., offset = ...}, got string", dt.set_rng_state, "x")
    raises("manual_seed", dt.manual_seed, 1.5)
  end)
end)

describe("issue 6: dt.fork_rng(fn) (and <close> form) restores the state after the block", function()
  it("fn form: returns fn's results, restores even when fn raises", function()
    dt.manual_seed(3)
    local before = dt.get_rng_state()
    local a, b = dt.fork_rng(function(k) return vals(dt.rand(k)), "done" end, 3)
    assert.are.equal("done", b)
    assert.are.same(before, dt.get_rng_state())
    assert.are.same(a, vals(dt.rand(3))) -- the same numbers again: the state was restored
    local mid = dt.get_rng_state()
    assert.is_false(pcall(dt.fork_rng, function() dt.rand(100) error("inside") end))
    assert.are.same(mid, dt.get_rng_state())
  end)

  it("<close> form", function()
    dt.manual_seed(3)
    local before = dt.get_rng_state()
    do
      local _ <close> = dt.fork_rng()
      dt.randn(50)
      assert.are_not.same(before, dt.get_rng_state())
    end
    assert.are.same(before, dt.get_rng_state())
  end)
end)

describe("issue 6: each random op advances the offset by the global numel (rounded up)", function()
  it("for every op, by its documented word count", function()
    local function adv(f)
      dt.manual_seed(1)
      f()
      return dt.get_rng_state().offset
    end
    assert.are.equal(8, adv(function() dt.rand(5) end))
    assert.are.equal(12, adv(function() dt.rand(3, 2, {dtype = "float64"}) end)) -- 2 words each: 12
    assert.are.equal(24, adv(function() dt.randn(4, 6) end))
    assert.are.equal(8, adv(function() dt.randint(0, 10, {7}) end))
    assert.are.equal(8, adv(function() dt.randint(0, 2 ^ 40, {3}) end)) -- wide: 6 -> 8
    assert.are.equal(4, adv(function() dt.zeros(2, 2):uniform_() end))
    assert.are.equal(4, adv(function() dt.zeros(3):normal_() end))
    assert.are.equal(4, adv(function() dt.bernoulli(dt.full({4}, 0.5)) end))
    assert.are.equal(12, adv(function() dt._dropout(dt.ones(9), 0.5) end))
    assert.are.equal(12, adv(function() dt.randperm(10) end))
    assert.are.equal(4, adv(function() dt.multinomial(dt.tensor({1.0, 2.0}), 2, true) end)) -- 2 * 2 words
    assert.are.equal(0, adv(function() pcall(dt.rand, -1) end)) -- a failed op draws nothing
  end)
end)

describe("issue 6: Ops", function()
  it("dt.rand, dt.randn: shapes, dtypes, ranges", function()
    dt.manual_seed(7)
    local a = dt.randn(4, 6)
    assert.are.same({4, 6}, a.shape)
    assert.are.equal("float32", a.dtype)
    for _, dtype in ipairs({"float32", "float64", "bfloat16", "float16"}) do
      local u = dt.rand({100}, {dtype = dtype})
      assert.are.equal(dtype, u.dtype)
      assert.is_true(u:min():item() >= 0 and u:max():item() < 1)
      assert.are.equal(dtype, dt.randn(3, {dtype = dtype}).dtype)
    end
    raises("rand: dtype must be a floating dtype (float32, float64, bfloat16, float16), got int64", dt.rand, 2,
      {dtype = "int64"})
    raises("rand: negative size -1 in dim 1", dt.rand, -1)
  end)

  it("dt.manual_seed(7); dt.randn(4, 6) is reproducible, and randn is Box-Muller on the uniforms", function()
    dt.manual_seed(7)
    local z = vals(dt.randn(4, 6, {dtype = "float64"}))
    dt.manual_seed(7)
    local u = vals(dt.rand(4, 6, {dtype = "float64"})) -- the same words, same precision
    for k = 0, 11 do
      local u1, u2 = u[2 * k + 1], u[2 * k + 2]
      local r, th = math.sqrt(-2 * math.log(1 - u1)), 2 * math.pi * u2
      assert.is_true(math.abs(z[2 * k + 1] - r * math.cos(th)) < 1e-12)
      assert.is_true(math.abs(z[2 * k + 2] - r * math.sin(th)) < 1e-12)
    end
  end)

  it("dt.randint(low, high, {shape}) / dt.randint(high, {shape}): high exclusive, int64", function()
    dt.manual_seed(9)
    local t = dt.randint(-3, 4, {2000})
    assert.are.equal("int64", t.dtype)
    assert.are.equal(-3, t:min():item())
    assert.are.equal(3, t:max():item())
    local h = dt.randint(5, {3, 2}, {dtype = "int32"})
    assert.are.same({3, 2}, h.shape)
    assert.are.equal("int32", h.dtype)
    raises("randint: needs low < high, got low 5, high 5", dt.randint, 5, 5, {3})
    raises("randint: values in [0, 300) do not fit dtype uint8", dt.randint, 0, 300, {3}, {dtype = "uint8"})
  end)

  it("rand_like, randn_like: the tensor's shape and dtype (or opts.dtype)", function()
    local src = dt.zeros(2, 3, {dtype = "float64"})
    local a = dt.rand_like(src)
    assert.are.same({2, 3}, a.shape)
    assert.are.equal("float64", a.dtype)
    assert.are.equal("float16", dt.randn_like(src, {dtype = "float16"}).dtype)
    raises("randn_like: dtype must be a floating dtype (float32, float64, bfloat16, float16), got int64",
      dt.randn_like, dt.zeros(2, {dtype = "int64"}))
    raises("rand_like: dtype must be a floating dtype (float32, float64, bfloat16, float16), got int32",
      dt.rand_like, src, {dtype = "int32"})
  end)

  it("uniform_, normal_: in place", function()
    dt.manual_seed(5)
    local t = dt.zeros(100000)
    t:uniform_(-2, 3)
    assert.is_true(t:min():item() >= -2 and t:max():item() < 3)
    local m = mean_var(t)
    assert.is_true(math.abs(m - 0.5) < 0.02)
    dt.uniform_(t, 0, 1)
    assert.is_true(t:max():item() < 1)
    t:normal_(5, 2)
    local mn, var = mean_var(t)
    assert.is_true(math.abs(mn - 5) < 0.03 and math.abs(var - 4) < 0.08)
    raises("uniform_: needs finite from <= to, got from 3, to 2", function() dt.zeros(3):uniform_(3, 2) end)
    raises("normal_: needs a finite mean and a finite std >= 0, got mean 0, std -1",
      function() dt.zeros(3):normal_(0, -1) end)
  end)

  it("bernoulli: 0/1 in the probabilities' dtype", function()
    dt.manual_seed(5)
    local b = dt.bernoulli(dt.full({100000}, 0.3))
    assert.are.equal("float32", b.dtype)
    assert.is_true(math.abs(b:mean():item() - 0.3) < 0.01)
    local p = dt.zeros(100000, {dtype = "float64"}):bernoulli(0.8)
    assert.are.equal("float64", p.dtype)
    assert.is_true(math.abs(p:mean():item() - 0.8) < 0.01)
    assert.are.same({0, 1, 0, 1}, vals(dt.bernoulli(dt.tensor({0.0, 1.0, 0.0, 1.0}))))
    raises("bernoulli: probabilities must be in [0, 1], got 1.5", dt.bernoulli, dt.full({3}, 1.5))
  end)

  it("dropout (and its backward reuses the mask)", function()
    dt.manual_seed(5)
    local x = dt.full({10000}, 2.0)
    local y, keep = dt._dropout(x, 0.25)
    assert.are.equal("bool", keep.dtype)
    local kept = keep:to("float32"):mean():item()
    assert.is_true(math.abs(kept - 0.75) < 0.02)
    -- kept elements scaled by 1/(1-p), dropped ones zero
    local yv, kv = vals(y), vals(keep)
    local scaled = string.unpack("f", string.pack("f", 2 / 0.75)) -- in float32
    for i = 1, 200 do assert.are.equal(kv[i] and scaled or 0, yv[i]) end
    local state = dt.get_rng_state()
    local g = dt._dropout_backward(dt.ones(10000), keep, 0.25)
    assert.are.same(state, dt.get_rng_state()) -- draws nothing
    assert.are.equal(0, (g * 2 - y):abs():max():item())
    -- F.dropout: the same mask through the nn functional
    local F = require("dtensor.nn.functional")
    dt.set_rng_state({seed = 5, offset = 0})
    assert.are.same(yv, vals(F.dropout(x, 0.25, true)))
    assert.are.same(vals(x), vals(F.dropout(x, 0.25, false)))
    raises("dropout: probability p must be in [0, 1], got 1.5", dt._dropout, x, 1.5)
  end)

  it("dt.randperm: a permutation of 1..n (replicated)", function()
    dt.manual_seed(5)
    local p = dt.randperm(50)
    assert.are.equal("int64", p.dtype)
    local s = vals(p)
    table.sort(s)
    for i = 1, 50 do assert.are.equal(i, s[i]) end
    assert.are.same({}, vals(dt.randperm(0)))
    raises("randperm: n must be >= 0, got -1", dt.randperm, -1)
  end)

  it("multinomial: 1-based category indices, with and without replacement", function()
    dt.manual_seed(5)
    local w = dt.tensor({0.0, 1.0, 0.0, 3.0})
    local m = dt.multinomial(w, 2)
    assert.are.equal("int64", m.dtype)
    local s = vals(m)
    table.sort(s)
    assert.are.same({2, 4}, s)
    local r = w:multinomial(1000, true)
    local fours = (r:eq(4)):to("float32"):mean():item()
    assert.is_true(math.abs(fours - 0.75) < 0.05)
    raises("multinomial: only 1 categories have non-zero probability, cannot draw 2 without replacement",
      dt.multinomial, dt.tensor({0.0, 1.0, 0.0}), 2)
    raises("multinomial: probabilities must be finite and non-negative, got -1", dt.multinomial,
      dt.tensor({-1.0, 1.0}), 1)
  end)
end)

describe("issue 6: statistics sanity", function()
  it("mean/variance of 1M draws within tolerance; Kolmogorov-Smirnov for uniform", function()
    dt.manual_seed(2024)
    local u = dt.rand(1000000)
    local m, v = mean_var(u)
    assert.is_true(math.abs(m - 0.5) < 0.002 and math.abs(v - 1 / 12) < 0.001)
    local z = dt.randn(1000000)
    m, v = mean_var(z)
    assert.is_true(math.abs(m) < 0.005 and math.abs(v - 1) < 0.005)
    -- KS on 100k uniforms: D < 1.63 / sqrt(n) (1% level)
    local xs = vals(dt.rand(100000, {dtype = "float64"}))
    table.sort(xs)
    local d, n = 0, #xs
    for i, x in ipairs(xs) do d = math.max(d, i / n - x, x - (i - 1) / n) end
    assert.is_true(d < 1.63 / math.sqrt(n), "KS D = " .. d)
  end)
end)

describe("issue 6: Benchmark bench/rng.lua", function()
  it("prints GB/s for rand next to memset/memcpy in the same run", function()
    local srcdir = os.getenv("srcdir") or "."
    local dtlua = os.getenv("DTLUA") or "./dtlua"
    local p = io.popen(string.format("timeout 60 %q %q 16 1 2>&1", dtlua, srcdir .. "/bench/rng.lua"))
    local out = p:read("a")
    p:close()
    assert.matches("memset", out, 1, true)
    assert.matches("memcpy", out, 1, true)
    assert.matches("rand[^\n]*GB/s", out)
  end)
end)
