-- Intra-op threads (src/base/thread_pool.c): dt.set_num_threads / dt.get_num_threads /
-- DTLUA_NUM_THREADS, and the kernels that split over threads giving the same bits with 1, 2
-- and 4 threads (random shapes above and below the split threshold, zero-size ones, strided
-- and broadcast operands, random draws).
local S = require("tests.spec.support.spec_helpers")
local run, sh_quote, fails = S.run, S.sh_quote, S.fails
local F = dt.nn.functional

local COUNTS = {1, 2, 4}

-- f() under each thread count; every result (a tensor or a list of them) must equal the
-- 1-thread one exactly
local function same_bits(what, f)
  local saved = dt.get_num_threads()
  local ref
  for _, t in ipairs(COUNTS) do
    dt.set_num_threads(t)
    local ok, r = pcall(f)
    if not ok then
      dt.set_num_threads(saved)
      error(r, 0)
    end
    if type(r) ~= "table" then r = {r} end
    if not ref then
      ref = r
    else
      for i = 1, #ref do
        assert.are.same(ref[i]:size(), r[i]:size(), what)
        assert.is_true(ref[i]:equal(r[i]), string.format("%s: result %d differs with %d threads", what, i, t))
      end
    end
  end
  dt.set_num_threads(saved)
  return ref
end

describe("intra-op threads", function()
  local saved
  before_each(function() saved = dt.get_num_threads() end)
  after_each(function() dt.set_num_threads(saved) end)

  it("get/set the calling rank's thread count, and dt.config() reports it", function()
    assert.is_true(math.type(dt.get_num_threads()) == "integer" and dt.get_num_threads() >= 1)
    dt.set_num_threads(3)
    assert.are.equal(3, dt.get_num_threads())
    assert.are.equal(3, dt.config().threads)
    if dt.config().blas == "openblas" then assert.are.equal(3, dt.config().blas_threads) end
    dt.set_num_threads(1)
    assert.are.equal(1, dt.get_num_threads())
    if dt.config().blas == "openblas" then assert.are.equal(1, dt.config().blas_threads) end
  end)

  it("rejects bad thread counts, naming the function and the value", function()
    fails("set_num_threads: the thread count must be an integer in 1..256, got 0", dt.set_num_threads, 0)
    fails("set_num_threads: the thread count must be an integer in 1..256, got -2", dt.set_num_threads, -2)
    fails("set_num_threads: the thread count must be an integer in 1..256, got 257", dt.set_num_threads, 257)
    fails("set_num_threads: expected an integer thread count, got string", dt.set_num_threads, "x")
    fails("set_num_threads: expected an integer thread count, got number", dt.set_num_threads, 1.5)
    fails("set_num_threads: expected an integer thread count, got no value", dt.set_num_threads)
    assert.are.equal(saved, dt.get_num_threads())
  end)

  it("DTLUA_NUM_THREADS sets the default; a bad value is an error naming it", function()
    local out, rc = run("-e " .. sh_quote("io.write(dt.get_num_threads(), ' ', dt.config().threads)"), nil,
                        "DTLUA_NUM_THREADS=3")
    assert.are.equal(0, rc)
    assert.are.equal("3 3", out)
    for _, bad in ipairs({"0", "abc", "2x", "-1", "300"}) do
      out, rc = run("-e " .. sh_quote("print(1)"), nil, "DTLUA_NUM_THREADS=" .. bad)
      assert.are_not.equal(0, rc)
      assert.is_truthy(out:find("DTLUA_NUM_THREADS: expected an integer in 1..256, got '" .. bad .. "'", 1, true), out)
    end
  end)

  it("defaults to the cores divided by the ranks of the process", function()
    local out1 = run("-e " .. sh_quote("io.write(dt.get_num_threads())"), nil, "env -u DTLUA_NUM_THREADS")
    local out4 = run("-n 4 -e " .. sh_quote("if dt.rank() == 0 then io.write(dt.get_num_threads()) end"), nil,
                     "env -u DTLUA_NUM_THREADS")
    local cores = tonumber(out1)
    assert.is_truthy(cores and cores >= 1, out1)
    assert.are.equal(tostring(math.max(1, cores // 4)), out4)
  end)

  it("pointwise ops, copies and fills give the same bits on any thread count", function()
    local prng = S.prng(11)
    for _, n in ipairs({0, 1, 1000, 65537, 200003}) do
      local a, b = dt.randn(n), dt.randn(n)
      local m = dt.randn(97, 3001)
      same_bits("pointwise n=" .. n, function()
        return {a + b, a * b - a / (b:abs() + 1), (a:exp() + 1):log(), F.gelu(a), a:clone(), dt.full({n}, 2.5),
                a:add(b, 0.5), a:float():double()}
      end)
      local r = prng.int(1, 97)
      same_bits("strided/broadcast " .. r, function()
        local t = m:t():contiguous()
        return {t, m + m[r], m:t() * 2, m:narrow(2, r, 2000):contiguous(), m:to("bfloat16"):float()}
      end)
    end
  end)

  it("large fills (a block of the value copied over the threads) write the value everywhere", function()
    for _, n in ipairs({65537, 200003}) do
      for _, c in ipairs({{"float32", 2.5}, {"float64", -1.25}, {"int64", 7}, {"int32", -3}, {"bfloat16", 0.5},
                          {"uint8", 9}, {"float32", 0}, {"float32", -0.0}}) do
        local t = same_bits(string.format("full %s %g n=%d", c[1], c[2], n), function()
          return dt.full({n}, c[2], {dtype = c[1]})
        end)[1]
        local d = t:double()
        assert.are.equal(c[1], t.dtype)
        assert.is_true(d:eq(c[2]):all():item(), string.format("full %s %g n=%d", c[1], c[2], n))
        if c[2] == 0 then -- the sign of zero kept at both ends
          assert.are.same({1 / c[2], 1 / c[2]}, {(1 / d[1]):item(), (1 / d[n]):item()})
        end
      end
    end
  end)

  it("vector gelu: an element gets the same bits in a 16-, 8- or 4-lane body or a padded tail", function()
    local x = dt.randn(1003) * 3
    local g = dt.randn(1003)
    local y, d = F.gelu(x), dt._gelu_backward(g, x)
    for i = 1, 1000, 7 do
      local n = 1 + i % 37 -- slices of 1-37: every mix of 16, 8 and 4 lanes and a tail
      if i + n - 1 > 1003 then n = 1003 - i + 1 end
      assert.is_true(F.gelu(x:narrow(1, i, n)):equal(y:narrow(1, i, n)), "gelu at " .. i)
      assert.is_true(dt._gelu_backward(g:narrow(1, i, n), x:narrow(1, i, n)):equal(d:narrow(1, i, n)), "gelu_backward at " .. i)
    end
  end)

  it("softmax, log_softmax, layer_norm, rms_norm and sdpa give the same bits", function()
    local prng = S.prng(12)
    for _ = 1, 3 do
      local rows, n = prng.int(1, 700), prng.int(1, 400)
      local x = dt.randn(rows, n)
      local w, bias = dt.randn(n), dt.randn(n)
      same_bits(string.format("softmax/norm [%d,%d]", rows, n), function()
        return {x:softmax(2), x:softmax(1), x:log_softmax(2), x:log_softmax(1), F.layer_norm(x, {n}, w, bias),
                F.rms_norm(x, {n}, w), x:double():softmax(2)}
      end)
    end
    local q, k, v = dt.randn(3, 4, 65, 16), dt.randn(3, 4, 65, 16), dt.randn(3, 4, 65, 16)
    same_bits("sdpa", function()
      return {F.scaled_dot_product_attention(q, k, v, {is_causal = true}), F.scaled_dot_product_attention(q, k, v)}
    end)
  end)

  it("layer_norm_backward's dx, dw and db (partial rows of fixed blocks) give the same bits", function()
    local prng = S.prng(14)
    for _, dtype in ipairs({"float32", "float64"}) do
      for _ = 1, 2 do
        local rows, n = prng.int(1, 3000), prng.int(1, 300)
        local g, x, w = dt.randn(rows, n):to(dtype), dt.randn(rows, n):to(dtype), dt.randn(n):to(dtype)
        same_bits(string.format("layer_norm_backward %s [%d,%d]", dtype, rows, n), function()
          local r = {dt._layer_norm_backward(g, x, w, {n}, 1e-5)}
          for _, t in ipairs({dt._layer_norm_backward(g, x, nil, {n}, 1e-5, true)}) do r[#r + 1] = t end
          return r
        end)
      end
    end
  end)

  it("layer_norm and gelu forward and backward at the training step's shapes give the same bits", function()
    -- [B*L, W] = [2048, 256] rows (groups of 8 rows' statistics, blocks of 32 for dw/db) and
    -- widths off the 8-lane and 32-element steps; gelu at [B, L, 4W]
    for _, shape in ipairs({{2048, 256}, {2048, 259}, {37, 1}, {45, 33}}) do
      local rows, n = shape[1], shape[2]
      local x, w, b = dt.randn(rows, n):requires_grad_(), dt.randn(n):requires_grad_(), dt.randn(n):requires_grad_()
      local g = dt.randn(rows, n)
      same_bits(string.format("layer_norm fwd+bwd [%d,%d]", rows, n), function()
        local y = F.layer_norm(x, {n}, w, b)
        y:backward(g)
        local r = {y:detach(), x.grad, w.grad, b.grad}
        x.grad, w.grad, b.grad = nil, nil, nil
        return r
      end)
    end
    local x, g = dt.randn(16, 128, 1024):requires_grad_(), dt.randn(16, 128, 1024)
    same_bits("gelu fwd+bwd [16,128,1024]", function()
      local y = F.gelu(x)
      y:backward(g)
      local r = {y:detach(), x.grad}
      x.grad = nil
      return r
    end)
  end)

  it("the fused training-step ops give the same bits: cross_entropy and its backward, sdpa's backward", function()
    local prng = S.prng(13)
    for _ = 1, 3 do
      local n, c = prng.int(0, 3000), prng.int(1, 300)
      local x, t, gn = dt.randn(n, c), dt.randint(1, c + 1, {n}), dt.randn(n)
      same_bits(string.format("cross_entropy [%d,%d]", n, c), function()
        local xs = {x:clone():requires_grad_(), x:double():requires_grad_()}
        local r = {}
        for _, l in ipairs(xs) do
          local loss = F.cross_entropy(l, t)
          loss:backward()
          r[#r + 1], r[#r + 2] = loss, l.grad
        end
        r[#r + 1] = F.cross_entropy(x:reshape(1, n, c):transpose(2, 3), t:reshape(1, n), {reduction = "none"})
        -- ignored targets and a per-sample gradient (reduction "none")
        local l = x:clone():requires_grad_()
        local losses = F.cross_entropy(l, t, {ignore_index = n > 0 and t[1]:item() or 1, reduction = "none"})
        losses:backward(gn)
        r[#r + 1], r[#r + 2] = losses, l.grad
        return r
      end)
    end
    local q, k, v, g = dt.randn(2, 3, 130, 16), dt.randn(2, 3, 130, 16), dt.randn(2, 3, 130, 8), dt.randn(2, 3, 130, 8)
    same_bits("sdpa_backward", function()
      local r = {}
      for _, causal in ipairs({false, true}) do
        for _, t in ipairs({dt._sdpa_backward(g, q, k, v, nil, causal)}) do r[#r + 1] = t end
      end
      return r
    end)
  end)

  it("embedding's backward (rows of the weight's gradient over the threads) gives the same bits, and the sums", function()
    local prng = S.prng(17)
    for _ = 1, 4 do
      local v, w, n = prng.int(1, 600), prng.int(0, 300), prng.int(0, 3000)
      local ids, g = dt.randint(1, v + 1, {n}), dt.randn(n, w)
      local r = same_bits(string.format("embedding backward [%d,%d] ids %d", v, w, n), function()
        local out = {}
        for _, wt in ipairs({dt.randn(v, w):requires_grad_(), dt.randn(v, w):double():requires_grad_()}) do
          F.embedding(ids, wt):backward(wt.dtype == "float64" and g:double() or g)
          out[#out + 1] = wt.grad
        end
        return out
      end)
      -- against a float64 one-hot product: each row the sum of the rows of its ids
      local onehot = dt.zeros(n, v):double()
      local idl = ids:tolist()
      for i = 1, n do onehot[i][idl[i]] = 1 end
      local want = onehot:transpose(1, 2):matmul(g:double())
      assert.is_true(r[1]:double():allclose(want, 1e-5, 1e-5), "float32 gradient")
      assert.is_true(r[2]:allclose(want, 1e-12, 1e-12), "float64 gradient")
    end
  end)

  it("sdpa forward and backward (batch x heads over the threads) and softmax's fused backward give the same bits", function()
    local prng = S.prng(15)
    for i = 1, 4 do
      local B, H, L, S_, E = prng.int(1, 3), prng.int(1, 5), prng.int(i == 4 and 0 or 1, 150), prng.int(1, 150), prng.int(1, 40)
      local dtype = i == 2 and "float64" or "float32"
      local q, k = dt.randn(B, H, L, E):to(dtype), dt.randn(B, H, S_, E):to(dtype)
      local v, g = dt.randn(B, H, S_, E + 3):to(dtype), dt.randn(B, H, L, E + 3):to(dtype)
      local mask = i == 3 and dt.rand(L, S_):gt(0.3) or nil
      same_bits(string.format("sdpa %s [%d,%d,%d,%d] S %d", dtype, B, H, L, E, S_), function()
        local r = {}
        for _, causal in ipairs({false, true}) do
          r[#r + 1] = F.scaled_dot_product_attention(q, k, v, {attn_mask = mask, is_causal = causal and not mask})
          for _, t in ipairs({dt._sdpa_backward(g, q, k, v, mask, causal and not mask)}) do r[#r + 1] = t end
        end
        return r
      end)
    end
    for _, shape in ipairs({{0, 5}, {7}, {3000, 37}, {4, 600, 3}, {2, 70000}}) do
      local y, g = dt.randn(table.unpack(shape)):softmax(#shape), dt.randn(table.unpack(shape))
      same_bits("softmax_backward " .. table.concat(shape, "x"), function()
        local r = {}
        for d = 1, #shape do
          for _, log in ipairs({false, true}) do
            r[#r + 1] = dt._softmax_backward(g, y, d, log)
            r[#r + 1] = dt._softmax_backward(g:double(), y:double(), d, log)
          end
        end
        return r
      end)
    end
  end)

  it("matmul's GEMMs, split over the threads by blocks of rows or columns, give the same bits", function()
    local prng = S.prng(15)
    -- tall, wide, square-ish, tails that are not whole blocks, under the split threshold, k = 0
    local shapes = {{2048, 256, 256}, {70, 1500, 300}, {1000, 33, 700}, {517, 389, 261}, {8, 8, 8}, {300, 300, 0}}
    for _ = 1, 3 do shapes[#shapes + 1] = {prng.int(1, 900), prng.int(1, 900), prng.int(1, 400)} end
    for _, s in ipairs(shapes) do
      local m, n, k = s[1], s[2], s[3]
      for _, dtype in ipairs({"float32", "float64"}) do
        local a, b, c = dt.randn(m, k):to(dtype), dt.randn(k, n):to(dtype), dt.randn(n):to(dtype)
        local at, bt = a:t():contiguous():t(), b:t():contiguous():t() -- the transposed BLAS layouts
        local r = same_bits(string.format("matmul %s [%d,%d]@[%d,%d]", dtype, m, k, k, n), function()
          return {a:matmul(b), at:matmul(b), a:matmul(bt), at:matmul(bt), dt.addmm(c, a, b, {beta = 0.5, alpha = 2}),
                  a:reshape(1, m, k):expand(2, m, k):matmul(b)}
        end)
        -- and the right numbers: against float64 products of the same values
        local want = a:double():matmul(b:double())
        local tol = dtype == "float32" and 1e-3 * math.max(1, math.sqrt(k)) or 1e-9 * math.max(1, k)
        for i = 1, 4 do assert.is_true((r[i]:double() - want):abs():max():item() <= tol, "matmul layout " .. i) end
        assert.is_true((r[5]:double() - (want * 2 + c:double() * 0.5)):abs():max():item() <= 2 * tol, "addmm")
        assert.is_true(r[6][2]:equal(r[1]), "batched")
      end
    end
  end)

  it("sum, mean, amax, std and norm give the same bits", function()
    for _, shape in ipairs({{0}, {7}, {300001}, {1000, 301}, {3, 70000}, {40000, 3}, {5, 0, 3}}) do
      local x = dt.randn(table.unpack(shape))
      same_bits("reduce " .. table.concat(shape, "x"), function()
        local r = {x:sum(), x:double():sum()}
        if x:numel() > 0 then r[#r + 1] = x:mean() end -- (the mean of nothing is nan, never equal)
        if #shape > 1 and x:numel() > 0 then
          for _, d in ipairs({1, 2}) do
            r[#r + 1] = x:sum(d)
            r[#r + 1] = x:mean(d)
            r[#r + 1] = x:amax(d)
            r[#r + 1] = x:std(d)
            r[#r + 1] = x:norm(2, d)
          end
        end
        return r
      end)
    end
  end)

  it("sums over leading dims (bias gradients) in fixed row blocks give the same bits, and the right sums", function()
    local prng = S.prng(16)
    local shapes = {{16, 128, 256}, {3, 0, 40}, {1, 129, 17}, {5, 300, 600}}
    for _ = 1, 3 do shapes[#shapes + 1] = {prng.int(1, 9), prng.int(1, 400), prng.int(16, 700)} end
    for _, shape in ipairs(shapes) do
      local x = dt.randn(table.unpack(shape))
      local what = "sum over leading dims " .. table.concat(shape, "x")
      local r = same_bits(what, function()
        -- (the mean of nothing is nan, never equal: 0 stands in)
        return {x:sum({1, 2}), x:numel() > 0 and x:mean({1, 2}) or dt.zeros(1), x:sum(2), x:transpose(1, 2):sum(1),
                x:double():sum({1, 2})}
      end)
      local want = x:double():sum({1, 2})
      local tol = 1e-4 * math.max(1, math.sqrt(shape[1] * shape[2]))
      assert.is_true(r[1]:numel() == 0 or (r[1]:double() - want):abs():max():item() <= tol, what)
      assert.is_true(r[5]:numel() == 0 or (r[5] - want):abs():max():item() <= 1e-9 * shape[1] * shape[2], what .. " float64")
      assert.is_true(r[3]:numel() == 0 or (r[3]:double() - x:double():sum(2)):abs():max():item() <= tol, what .. " dim 2")
    end
  end)

  it("random draws give the same bits on any thread count", function()
    for _, n in ipairs({1, 3, 65535, 200001}) do
      same_bits("random n=" .. n, function()
        dt.manual_seed(42)
        local x = dt.ones(n)
        return {dt.rand(n), dt.randn(n), dt.randn(n, {dtype = "float64"}), dt.randint(1, 1000, {n}),
                F.dropout(x, 0.3, true), dt.empty(n):normal_(1, 2), dt.empty(n):uniform_(-1, 1),
                dt.bernoulli(dt.full({n}, 0.25))}
      end)
    end
  end)

  it("a training step's loss and gradients are the same on any thread count", function()
    same_bits("step", function()
      dt.manual_seed(5)
      local lin = dt.nn.Linear(64, 300)
      local norm = dt.nn.LayerNorm(300)
      local x = dt.randn(257, 64)
      local y = dt.randint(1, 301, {257})
      local loss = F.cross_entropy(F.dropout(F.gelu(norm(lin(x))), 0.1, true), y)
      loss:backward()
      return {loss, lin.weight.grad, lin.bias.grad, norm.weight.grad}
    end)
  end)
end)
