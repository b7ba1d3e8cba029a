local R = require "tests.spec.reduce_ref"

-- Plain-Lua matmul with PyTorch's rules on flat row-major data; returns nested result.
local function ref_matmul(fa, sa, fb, sb)
  local a1, b1 = #sa == 1, #sb == 1
  local ash = a1 and {1, sa[1]} or sa
  local bsh = b1 and {sb[1], 1} or sb
  local n, k, m = ash[#ash - 1], ash[#ash], bsh[#bsh]
  local ba, bb = {table.unpack(ash, 1, #ash - 2)}, {table.unpack(bsh, 1, #bsh - 2)}
  local nb = math.max(#ba, #bb)
  local bs = {}
  for i = 1, nb do
    local x = ba[#ba - nb + i] or 1
    local y = bb[#bb - nb + i] or 1
    bs[i] = math.max(x, y)
  end
  local function batch_offset(c, own) -- flat offset of batch coords c in an operand's batch shape
    local off = 0
    for i = 1, #own do
      local ci = c[nb - #own + i]
      off = off * own[i] + (own[i] == 1 and 0 or ci - 1)
    end
    return off
  end
  local out = {}
  for bi = 1, R.numel(bs) do
    local c, r = {}, bi - 1
    for i = nb, 1, -1 do c[i] = r % bs[i] + 1; r = r // bs[i] end
    local oa, ob = batch_offset(c, ba) * n * k, batch_offset(c, bb) * k * m
    for i = 0, n - 1 do
      for j = 0, m - 1 do
        local s = 0
        for q = 0, k - 1 do s = s + fa[oa + i * k + q + 1] * fb[ob + q * m + j + 1] end
        out[#out + 1] = s
      end
    end
  end
  local oshape = {table.unpack(bs)}
  if not a1 then oshape[#oshape + 1] = n end
  if not b1 then oshape[#oshape + 1] = m end
  return R.nest(out, oshape), oshape
end

local function check(sa, sb, dtype, tol)
  local fa, fb = R.values(R.numel(sa), 5), R.values(R.numel(sb), 6)
  local a = dt.tensor(R.nest(fa, sa), {dtype = dtype})
  local b = dt.tensor(R.nest(fb, sb), {dtype = dtype})
  local want, wshape = ref_matmul(fa, sa, fb, sb)
  local got = a:matmul(b)
  assert.are.same(wshape, got:size())
  assert.are.equal(dtype, got.dtype)
  R.close(got:totable(), want, tol)
  return got
end

describe("matmul", function()
  it("covers every rank combination with batch broadcasting", function()
    local cases = {
      {{4}, {4}}, {{3, 4}, {4}}, {{4}, {4, 5}}, {{3, 4}, {4, 5}},
      {{2, 3, 4}, {4}}, {{4}, {2, 4, 5}}, {{2, 3, 4}, {4, 5}}, {{3, 4}, {2, 4, 5}},
      {{2, 3, 4}, {2, 4, 5}}, {{2, 1, 3, 4}, {3, 4, 5}}, {{2, 3, 3, 4}, {1, 4, 5}},
      {{1, 3, 4}, {2, 2, 4, 5}}, {{2, 2, 3, 4}, {2, 2, 4, 5}},
    }
    for _, c in ipairs(cases) do check(c[1], c[2], "float32", 1e-6) end
    for _, c in ipairs(cases) do check(c[1], c[2], "float64", 1e-12) end
  end)

  it("gives a 0-d tensor for vector @ vector", function()
    local got = check({5}, {5}, "float32", 1e-6)
    assert.are.equal(0, got:dim())
  end)

  it("computes bf16/f16 in float32 and integers exactly", function()
    for _, dtype in ipairs({"bfloat16", "float16"}) do
      check({2, 3, 4}, {4, 5}, dtype, R.tol[dtype])
      check({7}, {7, 2}, dtype, R.tol[dtype])
    end
    local a = dt.tensor({{1, 2}, {3, 4}})
    assert.are.same({{7, 10}, {15, 22}}, a:matmul(a):totable())
    assert.are.equal("int64", a:matmul(a).dtype)
    local i32 = dt.tensor({{1, 2}, {3, 4}}, {dtype = "int32"})
    assert.are.equal("int32", i32:matmul(i32).dtype)
    assert.are.same({{7, 10}, {15, 22}}, i32:matmul(i32):totable())
    local big = dt.tensor({{1 << 40}})
    assert.are.equal(1 << 60, big:matmul(dt.tensor({{1 << 20}})):item())
    local u = dt.tensor({{200}}, {dtype = "uint8"})
    assert.are.equal((200 * 2) % 256, u:matmul(dt.tensor({{2}}, {dtype = "uint8"})):item())
  end)

  it("handles empty dims (k = 0 gives zeros)", function()
    assert.are.same({{0, 0}, {0, 0}}, dt.ones(2, 0):matmul(dt.ones(0, 2)):totable())
    assert.are.same({0, 5}, dt.ones(0, 3):matmul(dt.ones(3, 5)):size())
    assert.are.same({2, 0}, dt.ones(2, 3):matmul(dt.ones(3, 0)):size())
    assert.are.equal(0, dt.ones(0):matmul(dt.ones(0)):item())
    assert.are.same({0, 2, 2}, dt.ones(0, 2, 3):matmul(dt.ones(3, 2)):size())
  end)

  it("is reachable as dt.matmul, t:mm, t:bmm", function()
    local fa, fb = R.values(6, 1), R.values(6, 2)
    local a, b = dt.tensor(R.nest(fa, {2, 3})), dt.tensor(R.nest(fb, {3, 2}))
    local want = ref_matmul(fa, {2, 3}, fb, {3, 2})
    R.close(dt.matmul(a, b):totable(), want, 1e-6)
    R.close(a:mm(b):totable(), want, 1e-6)
    R.close(dt.mm(a, b):totable(), want, 1e-6)
    local fx, fy = R.values(24, 3), R.values(16, 4)
    local x, y = dt.tensor(R.nest(fx, {2, 3, 4}), {dtype = "float64"}), dt.tensor(R.nest(fy, {2, 4, 2}), {dtype = "float64"})
    R.close(x:bmm(y):totable(), (ref_matmul(fx, {2, 3, 4}, fy, {2, 4, 2})), 1e-12)
    R.close(dt.bmm(x, y):totable(), (ref_matmul(fx, {2, 3, 4}, fy, {2, 4, 2})), 1e-12)
  end)

  local has_transpose = dt.ones(1, 1).transpose ~= nil;
  (has_transpose and it or pending)("takes transposed (strided) operands", function()
    local fa, fb = R.values(12, 7), R.values(20, 8)
    local a = dt.tensor(R.nest(fa, {4, 3})):transpose(1, 2) -- [3, 4], stride {1, 3}
    local b = dt.tensor(R.nest(fb, {5, 4})):transpose(1, 2) -- [4, 5]
    local at, bt = {}, {}
    for i = 1, 3 do for j = 1, 4 do at[#at + 1] = fa[(j - 1) * 3 + i] end end
    for i = 1, 4 do for j = 1, 5 do bt[#bt + 1] = fb[(j - 1) * 4 + i] end end
    R.close(a:matmul(b):totable(), (ref_matmul(at, {3, 4}, bt, {4, 5})), 1e-6)
  end)

  it("raises clear errors", function()
    local a, b = dt.ones(2, 3), dt.ones(4, 5)
    assert.matches("matmul: shapes {2,3} and {4,5} are not aligned (3 != 4)", R.error_of(a.matmul, a, b), 1, true)
    assert.matches("matmul: shapes {3} and {4} are not aligned (3 != 4)",
      R.error_of(dt.matmul, dt.ones(3), dt.ones(4)), 1, true)
    assert.matches("matmul: both arguments need at least 1 dim, got 0-d and 2-d",
      R.error_of(dt.matmul, dt.tensor(1.0), a), 1, true)
    assert.matches("matmul: batch dims of shapes {2,3,4} and {3,4,5} cannot broadcast",
      R.error_of(dt.matmul, dt.ones(2, 3, 4), dt.ones(3, 4, 5)), 1, true)
    assert.matches("matmul: dtypes float32 and float64 differ (convert one with :to())",
      R.error_of(dt.matmul, a, dt.ones(3, 2, {dtype = "float64"})), 1, true)
    assert.matches("matmul: not defined for bool tensors",
      R.error_of(dt.matmul, dt.tensor({true}), dt.tensor({true})), 1, true)
    assert.matches("mm: expected 2-d tensors, got 3-d and 2-d", R.error_of(dt.mm, dt.ones(1, 2, 3), a), 1, true)
    assert.matches("bmm: expected 3-d tensors, got 2-d and 2-d", R.error_of(a.bmm, a, a), 1, true)
    assert.matches("bmm: batch sizes 2 and 3 differ",
      R.error_of(dt.bmm, dt.ones(2, 2, 3), dt.ones(3, 3, 2)), 1, true)
    assert.matches("bmm: shapes {2,2,3} and {2,2,3} are not aligned (3 != 2)",
      R.error_of(dt.bmm, dt.ones(2, 2, 3), dt.ones(2, 2, 3)), 1, true)
  end)
end)

describe("addmm", function()
  local fa, fb, fc = R.values(6, 1), R.values(12, 2), R.values(8, 3)
  local want = ref_matmul(fa, {2, 3}, fb, {3, 4})

  it("computes beta * c + alpha * a @ b with broadcasting c", function()
    for _, dtype in ipairs({"float32", "float64", "bfloat16"}) do
      local a = dt.tensor(R.nest(fa, {2, 3}), {dtype = dtype})
      local b = dt.tensor(R.nest(fb, {3, 4}), {dtype = dtype})
      local c = dt.tensor(R.nest(fc, {2, 4}), {dtype = dtype})
      do
        local out = dt.addmm(c, a, b, {beta = 0.5, alpha = 2})
        local exp = {}
        for i = 1, 2 do
          exp[i] = {}
          for j = 1, 4 do exp[i][j] = 0.5 * fc[(i - 1) * 4 + j] + 2 * want[i][j] end
        end
        assert.are.equal(dtype, out.dtype)
        R.close(out:totable(), exp, R.tol[dtype])
        local row = dt.tensor(R.nest({1, 2, 3, 4}, {4}), {dtype = dtype})
        local exp2 = {}
        for i = 1, 2 do
          exp2[i] = {}
          for j = 1, 4 do exp2[i][j] = j + want[i][j] end
        end
        R.close(row:addmm(a, b):totable(), exp2, R.tol[dtype])
      end
    end
    local ai, bi = dt.tensor({{1, 2}, {3, 4}}), dt.tensor({{1, 0}, {0, 1}})
    assert.are.same({{12, 14}, {16, 18}}, dt.addmm(dt.tensor({10}), ai, bi, {alpha = 2}):totable())
  end)

  it("ignores c when beta is 0 (nan does not propagate)", function()
    local out = dt.addmm(dt.full({2, 2}, 0 / 0), dt.ones(2, 3), dt.ones(3, 2), {beta = 0})
    assert.are.same({{3, 3}, {3, 3}}, out:totable())
  end)

  it("raises clear errors", function()
    local a, b = dt.ones(2, 3), dt.ones(3, 4)
    assert.matches("addmm: input of shape {3} does not broadcast to the product's shape {2,4}",
      R.error_of(dt.addmm, dt.ones(3), a, b), 1, true)
    assert.matches("addmm: shapes {2,3} and {2,3} are not aligned (3 != 2)",
      R.error_of(dt.addmm, dt.ones(2, 3), a, a), 1, true)
    assert.matches("addmm: expected 2-d tensors, got 1-d and 2-d",
      R.error_of(dt.addmm, dt.ones(2), dt.ones(3), b), 1, true)
    assert.matches("addmm: options must be a table {beta = , alpha = }, got number",
      R.error_of(dt.addmm, dt.ones(2, 4), a, b, 2), 1, true)
  end)
end)

-- matmul from 1-d to batched N-d (PyTorch rules), mm/bmm/addmm, bf16/f16 accumulated in f32.
do
  local S = require("tests.spec.support.spec_helpers")
  local err, fails, close, tmpname = S.err, S.fails, S.close, S.tmpname

  describe("linear algebra: matmul rules, mm, bmm, addmm, half precision", function()
    it("matmul (1-D to batched N-D with broadcasting, PyTorch rules)", function()
      assert.are.equal(0, dt.matmul(dt.ones(3), dt.ones(3)):dim())
      assert.are.equal(3, dt.matmul(dt.ones(3), dt.ones(3)):item())
      assert.are.same({2}, dt.ones(2, 3):matmul(dt.ones(3)):size())
      assert.are.same({4}, dt.ones(3):matmul(dt.ones(3, 4)):size())
      assert.are.same({5, 2, 4}, dt.ones(5, 2, 3):matmul(dt.ones(3, 4)):size())
      assert.are.same({5, 4, 2, 2}, dt.ones(5, 1, 2, 3):matmul(dt.ones(4, 3, 2)):size())
      local x = dt.tensor({{1, 2}, {3, 4}}, {dtype = "float64"})
      local y = dt.tensor({{5, 6}, {7, 8}}, {dtype = "float64"})
      assert.are.same({{19, 22}, {43, 50}}, x:matmul(y):totable())
      assert.are.same({{26, 30}, {38, 44}}, x:t():matmul(y):totable()) -- strided operand
      -- batched with broadcasting, against a float64 loop: [2,1,2,3] @ [3,3,2] -> [2,3,2,2]
      local A = dt.arange(1, 13):view(2, 1, 2, 3):double()
      local B = dt.arange(1, 19):view(3, 3, 2):double():mul(0.5)
      local C = A:matmul(B)
      assert.are.same({2, 3, 2, 2}, C:size())
      local ta, tb, tc = A:totable(), B:totable(), C:totable()
      for i = 1, 2 do
        for j = 1, 3 do
          for r = 1, 2 do
            for c = 1, 2 do
              local acc = 0
              for k = 1, 3 do acc = acc + ta[i][1][r][k] * tb[j][k][c] end
              assert.are.equal(acc, tc[i][j][r][c])
            end
          end
        end
      end
      assert.are.same({29, 32}, dt.tensor({1, 2, 3}, {dtype = "float64"}):matmul(B):totable()[2]) -- [3] @ [3,3,2]
      fails("matmul: shapes {2,3} and {2,3} are not aligned (3 != 2)", function() return dt.ones(2, 3):matmul(dt.ones(2, 3)) end)
      fails("matmul: batch dims of shapes {2,3,4} and {3,4,5} cannot broadcast",
            function() return dt.ones(2, 3, 4):matmul(dt.ones(3, 4, 5)) end)
      fails("matmul: dtypes float32 and float64 differ", function() return dt.ones(2, 3):matmul(dt.ones(3, 2, {dtype = "float64"})) end)
    end)

    it("mm, bmm, addmm", function()
      assert.are.same({{3, 3}, {3, 3}}, dt.ones(2, 3):mm(dt.ones(3, 2)):totable())
      assert.are.same({2, 2, 1}, dt.bmm(dt.ones(2, 2, 3), dt.ones(2, 3, 1)):size())
      assert.are.same({{4, 4}, {4, 4}}, dt.addmm(dt.ones(2), dt.ones(2, 3), dt.ones(3, 2)):totable())
      assert.are.same({{6.5, 6.5}, {6.5, 6.5}},
                      dt.addmm(dt.ones(2), dt.ones(2, 3), dt.ones(3, 2), {beta = 0.5, alpha = 2}):totable())
      fails("mm: expected 2-d tensors, got 2-d and 1-d", function() return dt.ones(2, 3):mm(dt.ones(3)) end)
      fails("bmm: expected 3-d tensors, got 2-d and 2-d", dt.bmm, dt.ones(2, 3), dt.ones(3, 2))
    end)

    it("bf16/f16 compute in f32", function()
      -- 1 + 2^-8 is not a bfloat16: the f32 accumulation of 256 products rounds once
      for _, d in ipairs {"bfloat16", "float16"} do
        local x = dt.ones(1, 256, {dtype = d})
        local r = x:matmul(dt.ones(256, 1, {dtype = d}))
        assert.are.equal(d, r.dtype)
        assert.are.equal(256, r:item())
      end
    end)
  end)
end
