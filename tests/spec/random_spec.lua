-- Random ops: values against an independent Philox4x32-10 written here in plain Lua,
-- offset accounting, statistics, state handling, and every error message.

-- ---- reference generator (64-bit Lua integers; >> is a logical shift) ----
local M32 = 0xffffffff
local function philox(c, k)
  local c0, c1, c2, c3, k0, k1 = c[1], c[2], c[3], c[4], k[1], k[2]
  for r = 1, 10 do
    if r > 1 then k0, k1 = (k0 + 0x9E3779B9) & M32, (k1 + 0xBB67AE85) & M32 end
    local p0, p1 = 0xD2511F53 * c0, 0xCD9E8D57 * c2
    c0, c1, c2, c3 = ((p1 >> 32) ~ c1 ~ k0) & M32, p1 & M32, ((p0 >> 32) ~ c3 ~ k1) & M32, p0 & M32
  end
  return {c0, c1, c2, c3}
end
-- word p of seed's stream
local function word(seed, p)
  local b = p // 4
  return philox({b & M32, b >> 32, 0, 0}, {seed & M32, (seed >> 32) & M32})[p % 4 + 1]
end
local function unit24(w) return (w >> 8) / 2 ^ 24 end
local function unit53(hi, lo) return ((hi << 32 | lo) >> 11) / 2 ^ 53 end

local function flat(t, out)
  out = out or {}
  if type(t) ~= "table" then out[#out + 1] = t return out end
  for _, v in ipairs(t) do flat(v, out) end
  return out
end
local function values(t) return flat(t:totable()) end

local function raises(pattern, fn, ...)
  local ok, err = pcall(fn, ...)
  assert.is_false(ok)
  assert.matches(pattern, tostring(err), 1, true)
end

local function mean_var(v)
  local s, n = 0, #v
  for i = 1, n do s = s + v[i] end
  local m, q = s / n, 0
  for i = 1, n do q = q + (v[i] - m) ^ 2 end
  return m, q / (n - 1)
end

describe("random: Philox stream", function()
  it("reference Lua Philox matches the Random123 known answers", function()
    assert.are.same({0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}, philox({0, 0, 0, 0}, {0, 0}))
    assert.are.same({0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd},
      philox({M32, M32, M32, M32}, {M32, M32}))
    assert.are.same({0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1},
      philox({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0}))
  end)

  it("rand float32 element i is word offset+i with 24 bits", function()
    dt.manual_seed(7)
    local v = values(dt.rand(3, 5))
    for i = 1, 15 do assert.are.equal(unit24(word(7, i - 1)), v[i]) end
    -- next op starts at offset 16 (15 rounded up to 4)
    assert.are.equal(16, dt.get_rng_state().offset)
    local w = values(dt.rand(2))
    assert.are.equal(unit24(word(7, 16)), w[1])
    assert.are.equal(unit24(word(7, 17)), w[2])
  end)

  it("rand float64 uses two words per element, 53 bits", function()
    dt.manual_seed(123456789012)
    local v = values(dt.rand(3, {dtype = "float64"}))
    for i = 1, 3 do
      assert.are.equal(unit53(word(123456789012, 2 * i - 2), word(123456789012, 2 * i - 1)), v[i])
    end
    assert.are.equal(8, dt.get_rng_state().offset)
  end)

  it("randn is Box-Muller over element pairs (float32 and float64)", function()
    dt.manual_seed(3)
    local v = values(dt.randn(5))
    for k = 0, 2 do
      local u1, u2 = unit24(word(3, 2 * k)), unit24(word(3, 2 * k + 1))
      local r, th = math.sqrt(-2 * math.log(1 - u1)), 2 * math.pi * u2
      assert.is_true(math.abs(v[2 * k + 1] - r * math.cos(th)) < 1e-5 * (1 + r))
      if k < 2 then assert.is_true(math.abs(v[2 * k + 2] - r * math.sin(th)) < 1e-5 * (1 + r)) end
    end
    assert.are.equal(8, dt.get_rng_state().offset)
    dt.manual_seed(3)
    local d = values(dt.randn(3, {dtype = "float64"}))
    for k = 0, 1 do
      local u1 = unit53(word(3, 4 * k), word(3, 4 * k + 1))
      local u2 = unit53(word(3, 4 * k + 2), word(3, 4 * k + 3))
      local r, th = math.sqrt(-2 * math.log(1 - u1)), 2 * math.pi * u2
      assert.is_true(math.abs(d[2 * k + 1] - r * math.cos(th)) < 1e-12)
      if k < 1 then assert.is_true(math.abs(d[2 * k + 2] - r * math.sin(th)) < 1e-12) end
    end
    assert.are.equal(8, dt.get_rng_state().offset)
  end)

  it("values depend on the global row-major index only, not on the shape", function()
    dt.manual_seed(7)
    local a = values(dt.randn(4, 6))
    dt.manual_seed(7)
    local b = values(dt.randn(24))
    dt.manual_seed(7)
    local c = values(dt.randn(2, 3, 4))
    assert.are.same(a, b)
    assert.are.same(a, c)
  end)

  it("same seed repeats, different seeds and successive calls differ", function()
    dt.manual_seed(42)
    local a = values(dt.rand(8))
    local b = values(dt.rand(8))
    dt.manual_seed(42)
    assert.are.same(a, values(dt.rand(8)))
    assert.are_not.same(a, b)
    dt.manual_seed(43)
    assert.are_not.same(a, values(dt.rand(8)))
    assert.are.equal(43, dt.initial_seed())
  end)

  it("rand_like/randn_like take the shape and dtype of a tensor", function()
    local t = dt.zeros(2, 3, {dtype = "float64"})
    dt.manual_seed(5)
    local a = dt.rand_like(t)
    assert.are.equal("float64", a.dtype)
    assert.are.same({2, 3}, a:size())
    dt.manual_seed(5)
    assert.are.same(values(dt.rand(2, 3, {dtype = "float64"})), values(a))
    dt.manual_seed(5)
    local b = dt.randn_like(t, {dtype = "float32"})
    assert.are.equal("float32", b.dtype)
    dt.manual_seed(5)
    assert.are.same(values(dt.randn({2, 3})), values(b))
    raises("rand_like: dtype must be a floating dtype (float32, float64, bfloat16, float16), got int64", dt.rand_like,
      dt.full({2}, 1))
  end)

  it("empty tensors draw nothing and leave the offset", function()
    dt.manual_seed(1)
    local t = dt.rand(0, 3)
    assert.are.same({0, 3}, t:size())
    assert.are.equal(0, dt.get_rng_state().offset)
    assert.are.same({0}, dt.randperm(0):size())
  end)
end)

describe("random: distributions", function()
  it("uniform float32: 1M draws have mean 1/2, variance 1/12, pass Kolmogorov-Smirnov", function()
    dt.manual_seed(2024)
    local v = values(dt.rand(1000000))
    local m, var = mean_var(v)
    assert.is_true(math.abs(m - 0.5) < 0.002, "mean " .. m)
    assert.is_true(math.abs(var - 1 / 12) < 0.001, "var " .. var)
    local lo, hi = math.huge, -math.huge
    for i = 1, #v do lo, hi = math.min(lo, v[i]), math.max(hi, v[i]) end
    assert.is_true(lo >= 0 and hi < 1)
    local s = {}
    for i = 1, 100000 do s[i] = v[i] end
    table.sort(s)
    local d, n = 0, #s
    for i = 1, n do d = math.max(d, math.abs(i / n - s[i]), math.abs(s[i] - (i - 1) / n)) end
    assert.is_true(d < 1.63 / math.sqrt(n), "KS D " .. d) -- 1% critical value
  end)

  it("normal: 1M draws have mean 0 and variance 1; normal_ scales and shifts", function()
    dt.manual_seed(5)
    local m, var = mean_var(values(dt.randn(1000000)))
    assert.is_true(math.abs(m) < 0.005, "mean " .. m)
    assert.is_true(math.abs(var - 1) < 0.01, "var " .. var)
    local t = dt.zeros(200000, {dtype = "float64"})
    local r = t:normal_(3, 2)
    assert.is_true(r:shares_storage(t))
    m, var = mean_var(values(t))
    assert.is_true(math.abs(m - 3) < 0.02, "mean " .. m)
    assert.is_true(math.abs(var - 4) < 0.06, "var " .. var)
  end)

  it("uniform_ fills [from, to) in every float dtype and never reaches to", function()
    dt.manual_seed(9)
    for _, dtype in ipairs({"float32", "float64", "bfloat16", "float16"}) do
      local t = dt.zeros(20000, {dtype = dtype})
      dt.uniform_(t, 1, 2)
      local v = values(t)
      local lo, hi, s = math.huge, -math.huge, 0
      for i = 1, #v do lo, hi, s = math.min(lo, v[i]), math.max(hi, v[i]), s + v[i] end
      assert.is_true(lo >= 1 and hi < 2, dtype .. " range " .. lo .. " " .. hi)
      assert.is_true(math.abs(s / #v - 1.5) < 0.02, dtype .. " mean " .. s / #v)
    end
    -- rand in low precision: as many random bits as the format holds, never 1.0
    for _, dtype in ipairs({"bfloat16", "float16"}) do
      local v = values(dt.rand(20000, {dtype = dtype}))
      local hi = -math.huge
      for i = 1, #v do hi = math.max(hi, v[i]) end
      assert.is_true(hi < 1 and hi > 0.99, dtype .. " max " .. hi)
    end
  end)

  it("randint: torch semantics, high exclusive, int64 default, both call forms", function()
    dt.manual_seed(11)
    local t = dt.randint(-3, 4, {1000})
    assert.are.equal("int64", t.dtype)
    local seen = {}
    for _, x in ipairs(values(t)) do
      assert.is_true(x >= -3 and x < 4)
      seen[x] = true
    end
    for x = -3, 3 do assert.is_true(seen[x], "value " .. x) end
    dt.manual_seed(11)
    local v = values(dt.randint(-3, 4, {5}))
    for i = 1, 5 do assert.are.equal(-3 + word(11, i - 1) % 7, v[i]) end
    local u = dt.randint(10, {2, 2}, {dtype = "uint8"})
    assert.are.equal("uint8", u.dtype)
    for _, x in ipairs(values(u)) do assert.is_true(x >= 0 and x < 10) end
    -- ranges above 2^32 draw 64 bits per element
    dt.manual_seed(11)
    local big = values(dt.randint(0, 1 << 40, {3}))
    for i = 1, 3 do
      local x = (word(11, 2 * i - 2) << 32 | word(11, 2 * i - 1)) % (1 << 40)
      assert.are.equal(x, big[i])
    end
    assert.are.equal(8, dt.get_rng_state().offset)
  end)

  it("bernoulli: per-element probabilities or one scalar p", function()
    dt.manual_seed(13)
    local p = dt.tensor({0.0, 1.0, 0.0, 1.0})
    assert.are.same({0, 1, 0, 1}, values(dt.bernoulli(p)))
    local m = mean_var(values(dt.full({100000}, 0.3):bernoulli()))
    assert.is_true(math.abs(m - 0.3) < 0.01, "mean " .. m)
    local b = dt.zeros(100000, {dtype = "float64"}):bernoulli(0.75)
    assert.are.equal("float64", b.dtype)
    m = mean_var(values(b))
    assert.is_true(math.abs(m - 0.75) < 0.01, "mean " .. m)
    -- element i is word offset+i compared with p
    dt.manual_seed(13)
    local v = values(dt.bernoulli(dt.full({6}, 0.5)))
    for i = 1, 6 do assert.are.equal(unit24(word(13, i - 1)) < 0.5 and 1 or 0, v[i]) end
  end)
end)

describe("random: dropout", function()
  it("forward keeps u >= p, scales by 1/(1-p), and returns the mask", function()
    dt.manual_seed(17)
    local x = dt.full({4, 5}, 2.0)
    local y, keep = dt._dropout(x, 0.25)
    assert.are.equal("bool", keep.dtype)
    assert.are.same({4, 5}, keep:size())
    local yv, kv = values(y), values(keep)
    for i = 1, 20 do
      local expect = unit24(word(17, i - 1)) >= 0.25
      assert.are.equal(expect, kv[i])
      assert.is_true(math.abs((expect and 2 / 0.75 or 0) - yv[i]) < 1e-6)
    end
  end)

  it("u equal to p is kept (bernoulli's u < p draws 0 there), and dropped infinities and NaNs give +0", function()
    for i = 1, 40 do
      local p = unit24(word(23, i - 1)) -- element i's own u as the probability
      dt.manual_seed(23)
      local _, keep = dt._dropout(dt.ones(40), p)
      dt.manual_seed(23)
      local b = dt.zeros(40):bernoulli(p)
      for j = 1, 40 do
        local u = unit24(word(23, j - 1))
        assert.are.equal(u >= p, values(keep)[j], "keep " .. j .. " with p = u of " .. i)
        assert.are.equal(u < p and 1 or 0, values(b)[j], "bernoulli " .. j .. " with p = u of " .. i)
      end
    end
    for _, dtype in ipairs({"float32", "float64"}) do
      local x = dt.tensor({1 / 0, -1 / 0, 0 / 0, -3}, {dtype = dtype})
      x = x["repeat"](x, 20000) -- above the size that splits over threads
      local y, keep = dt._dropout(x, 0.5)
      local yv, kv, dropped = values(y), values(keep), 0
      for j = 1, #yv do
        if not kv[j] then
          dropped = dropped + 1
          assert.is_true(yv[j] == 0 and 1 / yv[j] > 0, dtype .. ": dropped element " .. j .. " is +0")
        end
      end
      assert.is_true(dropped > 30000 and dropped < 50000, dtype)
    end
  end)

  it("backward reuses the mask: same zeros, same scale", function()
    dt.manual_seed(19)
    local x = dt.ones(1000, {dtype = "float64"})
    local y, keep = dt._dropout(x, 0.5)
    local g = dt._dropout_backward(dt.ones(1000, {dtype = "float64"}), keep, 0.5)
    assert.are.same(values(y), values(g))
    local kept = 0
    for _, v in ipairs(values(keep)) do kept = kept + (v and 1 or 0) end
    assert.is_true(kept > 400 and kept < 600)
  end)

  it("F.dropout under autograd: the gradient is g * mask / (1 - p) with the forward's mask, and backward draws nothing", function()
    dt.manual_seed(29)
    local x = dt.randn({6, 7}, {dtype = "float64"}):requires_grad_()
    local before = dt.get_rng_state()
    local y = dt.F.dropout(x, 0.4)
    local g = dt.randn({6, 7}, {dtype = "float64"})
    local after = dt.get_rng_state()
    y:backward(g)
    assert.are.same(after, dt.get_rng_state()) -- backward did not move the generator
    dt.set_rng_state(before) -- the forward's mask, drawn again at its position
    local _, keep = dt._dropout(x:detach(), 0.4)
    local scale = 1 / (1 - 0.4) -- as the kernel scales
    assert.is_true(dt.equal(x.grad, dt.where(keep, g * scale, 0)), "x.grad is g * mask / (1 - p), bit for bit")
    assert.is_true(dt.equal(y:detach(), dt.where(keep, x:detach() * scale, 0)))
  end)

  it("p = 0 keeps everything, p = 1 drops everything", function()
    local x = dt.tensor({1.5, -2, 3})
    assert.are.same({1.5, -2, 3}, values((dt._dropout(x, 0))))
    local y, keep = dt._dropout(x, 1)
    assert.are.same({0, 0, 0}, values(y))
    assert.are.same({false, false, false}, values(keep))
  end)

  it("rejects bad p, integer inputs, bad masks", function()
    raises("dropout: probability p must be in [0, 1], got 1.5", dt._dropout, dt.ones(2), 1.5)
    raises("dropout: input must be a floating dtype", dt._dropout, dt.full({2}, 1), 0.5)
    raises("dropout_backward: mask must be bool, got float32", dt._dropout_backward, dt.ones(2), dt.ones(2), 0.5)
    local _, keep = dt._dropout(dt.ones(3), 0.5)
    raises("dropout_backward: grad {2} and mask {3} differ in shape", dt._dropout_backward, dt.ones(2), keep, 0.5)
  end)
end)

describe("random: sampling", function()
  it("randperm returns 1..n permuted, reproducibly", function()
    dt.manual_seed(23)
    local p = values(dt.randperm(50))
    local seen = {}
    for _, x in ipairs(p) do seen[x] = (seen[x] or 0) + 1 end
    for x = 1, 50 do assert.are.equal(1, seen[x]) end
    dt.manual_seed(23)
    assert.are.same(p, values(dt.randperm(50)))
    assert.are.equal(52, dt.get_rng_state().offset)
    -- Fisher-Yates from the top, j = word(offset + i) mod (i + 1)
    dt.manual_seed(23)
    local ref = {}
    for i = 0, 9 do ref[i] = i end
    for i = 9, 1, -1 do
      local j = word(23, i) % (i + 1)
      ref[i], ref[j] = ref[j], ref[i]
    end
    local got = values(dt.randperm(10))
    for i = 0, 9 do assert.are.equal(ref[i] + 1, got[i + 1]) end
    assert.are.equal("float32", dt.randperm(4, {dtype = "float32"}).dtype)
  end)

  it("multinomial with replacement follows the weights, 1-based", function()
    dt.manual_seed(29)
    local s = values(dt.multinomial(dt.tensor({1.0, 0.0, 3.0}), 20000, true))
    local c = {0, 0, 0}
    for _, x in ipairs(s) do c[x] = c[x] + 1 end
    assert.are.equal(0, c[2])
    assert.is_true(math.abs(c[3] / 20000 - 0.75) < 0.02)
    local rows = dt.tensor({{0.0, 1.0}, {1.0, 0.0}}):multinomial(3, true)
    assert.are.same({{2, 2, 2}, {1, 1, 1}}, rows:totable())
  end)

  it("multinomial without replacement gives distinct categories", function()
    dt.manual_seed(31)
    for _ = 1, 20 do
      local s = values(dt.multinomial(dt.tensor({0.1, 0.2, 0.3, 0.4, 0}), 4))
      table.sort(s)
      assert.are.same({1, 2, 3, 4}, s)
    end
    -- the heaviest category comes first most often
    local first4 = 0
    for _ = 1, 400 do
      if values(dt.multinomial(dt.tensor({1.0, 1.0, 1.0, 7.0}), 2))[1] == 4 then first4 = first4 + 1 end
    end
    assert.is_true(first4 > 230 and first4 < 330, "first4 " .. first4)
  end)

  it("multinomial errors", function()
    local p = dt.tensor({0.5, 0.5})
    raises("multinomial: cannot draw 3 samples from 2 categories without replacement", dt.multinomial, p, 3)
    raises("multinomial: number of samples must be positive, got 0", dt.multinomial, p, 0)
    raises("multinomial: probabilities must be a 1-d or 2-d tensor, got 3-d", dt.multinomial, dt.ones(1, 1, 2), 1)
    raises("multinomial: probabilities must be a floating dtype", dt.multinomial, dt.full({2}, 1), 1)
    raises("multinomial: probabilities must be finite and non-negative, got -1", dt.multinomial,
      dt.tensor({1.0, -1.0}), 1, true)
    raises("multinomial: a row of probabilities sums to 0", dt.multinomial, dt.zeros(2), 1, true)
    raises("multinomial: only 1 categories have non-zero probability, cannot draw 2 without replacement",
      dt.multinomial, dt.tensor({0.0, 1.0}), 2)
    raises("multinomial: num_samples must be an integer, got string", dt.multinomial, p, "x")
  end)
end)

describe("random: non-contiguous inputs", function()
  it("uniform_/normal_ on a transposed view fill it in the view's row-major order", function()
    local base = dt.zeros(3, 4)
    local v = base:t()
    dt.manual_seed(51)
    v:uniform_()
    dt.manual_seed(51)
    assert.are.same(dt.rand(4, 3):totable(), v:totable())
    dt.manual_seed(52)
    v:normal_(1, 2)
    dt.manual_seed(52)
    local r = dt.randn(4, 3):totable()
    local got = v:totable()
    for i = 1, 4 do
      for j = 1, 3 do assert.is_true(math.abs(got[i][j] - (1 + 2 * r[i][j])) < 1e-5) end
    end
  end)

  it("bernoulli, dropout and multinomial read transposed inputs logically", function()
    local p = dt.tensor({{0.0, 1.0, 1.0}, {1.0, 0.0, 0.0}}):t()
    assert.are.same({{0, 1}, {1, 0}, {1, 0}}, dt.bernoulli(p):totable())
    local x = dt.tensor({{1.0, 2.0, 3.0}, {4.0, 5.0, 6.0}}):t()
    local y, keep = dt._dropout(x, 0.5)
    local xv, yv, kv = x:totable(), y:totable(), keep:totable()
    for i = 1, 3 do
      for j = 1, 2 do assert.are.equal(kv[i][j] and 2 * xv[i][j] or 0, yv[i][j]) end
    end
    local w = dt.tensor({{0.0, 1.0}, {1.0, 0.0}}):t() -- rows {0, 1} and {1, 0}
    assert.are.same({{2, 2}, {1, 1}}, dt.multinomial(w, 2, true):totable())
  end)
end)

describe("random: generator state", function()
  it("get/set_rng_state round-trips", function()
    dt.manual_seed(37)
    dt.rand(5)
    local st = dt.get_rng_state()
    assert.are.same({seed = 37, offset = 8}, st)
    local a = values(dt.rand(4))
    dt.rand(100)
    dt.set_rng_state(st)
    assert.are.same(a, values(dt.rand(4)))
  end)

  it("fork_rng(fn) restores the state and returns fn's results, even on error", function()
    dt.manual_seed(41)
    local before = dt.get_rng_state()
    local x, y = dt.fork_rng(function(k)
      dt.rand(10)
      return k, "b"
    end, 5)
    assert.are.equal(5, x)
    assert.are.equal("b", y)
    assert.are.same(before, dt.get_rng_state())
    local ok, err = pcall(dt.fork_rng, function()
      dt.manual_seed(1)
      error("boom")
    end)
    assert.is_false(ok)
    assert.matches("boom", err, 1, true)
    assert.are.same(before, dt.get_rng_state())
  end)

  it("fork_rng() as a to-be-closed guard", function()
    dt.manual_seed(43)
    local expect = values(dt.rand(3))
    dt.manual_seed(43)
    do
      local _ <close> = dt.fork_rng()
      dt.manual_seed(99)
      dt.randn(7)
    end
    assert.are.same({seed = 43, offset = 0}, dt.get_rng_state())
    assert.are.same(expect, values(dt.rand(3)))
    local g = dt.fork_rng()
    dt.rand(4)
    g:restore()
    g:restore() -- idempotent
    assert.are.same({seed = 43, offset = 4}, dt.get_rng_state())
  end)

  it("manual_seed accepts the sync option and any 64-bit integer", function()
    dt.manual_seed(-1, {sync = true})
    assert.are.equal(-1, dt.initial_seed())
    local v = values(dt.rand(2))
    assert.are.equal(unit24(word(-1, 0)), v[1])
  end)
end)

describe("random: errors", function()
  it("names the op and the bad value", function()
    raises("manual_seed: seed must be an integer, got number", dt.manual_seed, 1.5)
    raises("set_rng_state: expected a table {seed = ..., offset = ...}, got no value", dt.set_rng_state)
    raises("set_rng_state: state.offset must be >= 0, got -4", dt.set_rng_state, {seed = 1, offset = -4})
    raises("set_rng_state: state.seed must be an integer, got nil", dt.set_rng_state, {offset = 0})
    raises("rand: dtype must be a floating dtype (float32, float64, bfloat16, float16), got int64", dt.rand, 2,
      {dtype = "int64"})
    raises("randn: dtype must be a floating dtype", dt.randn, {2}, {dtype = "bool"})
    raises("rand: negative size -1", dt.rand, 2, -1)
    raises("uniform_: the tensor must be a floating dtype", dt.uniform_, dt.full({2}, 1))
    raises("uniform_: needs finite from <= to, got from 2, to 1", dt.uniform_, dt.zeros(2), 2, 1)
    raises("normal_: needs a finite mean and a finite std >= 0, got mean 0, std -1", dt.normal_, dt.zeros(2), 0, -1)
    raises("randint: needs low < high, got low 5, high 5", dt.randint, 5, 5, {2})
    raises("randint: values in [0, 300) do not fit dtype uint8", dt.randint, 300, {2}, {dtype = "uint8"})
    raises("randint: shape must be a table", dt.randint, 0, 5, 2)
    raises("randint: high must be an integer, got number", dt.randint, 0, 5.5, {2})
    raises("randint: ", dt.randint) -- no arguments: randint, not 'select'
    raises("randint: ", function() return dt.randint() end)
    raises("bernoulli: probabilities must be in [0, 1], got 1.5", dt.bernoulli, dt.tensor({0.5, 1.5}))
    raises("bernoulli: probability must be in [0, 1], got -0.5", dt.bernoulli, dt.zeros(2), -0.5)
    raises("bernoulli: probabilities must be a floating dtype", dt.bernoulli, dt.full({2}, 1))
    raises("randperm: n must be >= 0, got -2", dt.randperm, -2)
    raises("randperm: values up to 300 do not fit dtype uint8", dt.randperm, 300, {dtype = "uint8"})
  end)

  it("a failing op leaves the offset unchanged", function()
    dt.manual_seed(47)
    dt.rand(1)
    pcall(dt.randint, 5, 5, {2})
    pcall(dt.bernoulli, dt.tensor({2.0}))
    pcall(dt.multinomial, dt.zeros(3), 1)
    assert.are.equal(4, dt.get_rng_state().offset)
  end)
end)

-- The generator and its state as documented (doc/random.md): Philox known answers, manual_seed,
-- get/set_rng_state, fork_rng, offsets advanced per op, every op's shapes/dtypes/ranges, statistics.
do
  local raises = require("tests.spec.support.io_nn_helpers").fails

  local function vals(t) return t:flatten():totable() end

  local function mean_var(t)
    local x = t:to("float64")
    local m = x:mean():item()
    return m, ((x - m) * (x - m)):mean():item()
  end

  describe("the generator: Philox4x32-10, counter-based", function()
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

  describe("manual_seed, get_rng_state, set_rng_state", function()
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

  describe("fork_rng(fn) and its <close> form restore the state after the block", function()
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

  describe("each random op advances the offset by the global numel (rounded up)", function()
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

  describe("random ops: shapes, dtypes, ranges, in-place forms, masks", function()
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

  describe("random statistics", function()
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
end
