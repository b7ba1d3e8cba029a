local R = require "tests.spec.reduce_ref"

local shape = {2, 3, 4}
local flat = R.values(24, 4)

-- softmax of flat data along dim d, in float64, by index arithmetic
local function ref(d, log)
  local stride, out = 1, {}
  for k = d + 1, #shape do stride = stride * shape[k] end
  local n = shape[d]
  for i = 1, #flat do
    local pos = ((i - 1) // stride) % n -- position along d
    local first = i - pos * stride
    local mx = -math.huge
    for k = 0, n - 1 do mx = math.max(mx, flat[first + k * stride]) end
    local z = 0
    for k = 0, n - 1 do z = z + math.exp(flat[first + k * stride] - mx) end
    out[i] = log and (flat[i] - mx - math.log(z)) or math.exp(flat[i] - mx) / z
  end
  return R.nest(out, shape)
end

describe("softmax / log_softmax", function()
  it("match the float64 reference along every dim and dtype", function()
    for _, dtype in ipairs(R.float_dtypes) do
      local x = dt.tensor(R.nest(flat, shape), {dtype = dtype})
      for d = 1, 3 do
        local s = x:softmax(d)
        assert.are.equal(dtype, s.dtype)
        R.close(s:totable(), ref(d, false), R.tol[dtype])
        R.close(x:log_softmax(d):totable(), ref(d, true), R.tol[dtype] * 4)
      end
      R.close(dt.softmax(x, -1):totable(), ref(3, false), R.tol[dtype])
      R.close(dt.log_softmax(x, -3):totable(), ref(1, true), R.tol[dtype] * 4)
    end
  end)

  it("sweep wide non-last dims in column blocks", function()
    local wshape, wflat = {3, 300}, R.values(900, 5) -- 300 columns: more than one block
    local x = dt.tensor(R.nest(wflat, wshape), {dtype = "float64"})
    local s, ls = x:softmax(1):totable(), x:log_softmax(1):totable()
    for j = 1, 300 do
      local z = 0
      for i = 1, 3 do z = z + math.exp(wflat[(i - 1) * 300 + j]) end
      for i = 1, 3 do
        R.close(s[i][j], math.exp(wflat[(i - 1) * 300 + j]) / z, 1e-12)
        R.close(ls[i][j], wflat[(i - 1) * 300 + j] - math.log(z), 1e-12)
      end
    end
  end)

  it("keep float32 relative accuracy down to tiny probabilities (vectorised exp)", function()
    local l, z = {}, 0
    for k = 1, 87 do l[k] = -(k - 1) * 0.999 end -- down to exp(-86): 87 values, not a multiple of 4
    for k = 1, 87 do z = z + math.exp(l[k]) end
    for _, d in ipairs({1, 2}) do
      local x = dt.tensor(l, {dtype = "float32"})
      local xs = d == 1 and x or dt.tensor({l}, {dtype = "float32"})
      local s = xs:softmax(d):totable()
      if d == 2 then s = s[1] end
      for k = 1, 87 do
        local want = math.exp(dt.tensor({l[k]}, {dtype = "float32"}):item()) / z
        assert(math.abs(s[k] - want) <= 2e-6 * want, string.format("k=%d got %.9g want %.9g", k, s[k], want))
      end
    end
    local col = dt.tensor({{0, -50}, {-88, 0}}, {dtype = "float32"}):softmax(1):totable() -- column path
    R.close(col[2][2] / (1 / (1 + math.exp(-50))), 1, 1e-6)
    assert.are.equal(0, col[2][1]) -- exp(-88) flushes to 0 (PyTorch: a 6e-39 denormal)
  end)

  it("are stable for large inputs (max subtracted)", function()
    local x = dt.tensor({1000, 1001, 1002}, {dtype = "float32"})
    local e = {math.exp(-2), math.exp(-1), 1}
    local z = e[1] + e[2] + e[3]
    R.close(x:softmax(1):totable(), {e[1] / z, e[2] / z, e[3] / z}, 1e-6)
    R.close(x:log_softmax(1):totable(), {-2 - math.log(z), -1 - math.log(z), -math.log(z)}, 1e-6)
    local m = dt.tensor({-math.huge, 0}):softmax(1):totable()
    assert.are.same({0, 1}, m)
    for _, d in ipairs({1, 2}) do -- the line path (last dim) and the column-block path
      local x = dt.tensor({{1, 0 / 0}, {2, 3}})
      local s = x:softmax(d):totable()
      assert.is_true(s[1][2] ~= s[1][2])
      local l = x:log_softmax(d):totable()
      assert.is_true(l[1][2] ~= l[1][2])
      assert.is_true(d == 2 and s[1][1] ~= s[1][1] or d == 1 and s[1][1] == s[1][1])
      local all = dt.full({2, 2}, -math.huge):softmax(d):totable()
      assert.is_true(all[1][1] ~= all[1][1]) -- every input -inf: 0/0, as torch
    end
  end)

  it("handle 0-d and empty tensors", function()
    assert.are.equal(1, dt.tensor(3.0):softmax(1):item())
    assert.are.equal(0, dt.tensor(3.0):log_softmax(-1):item())
    assert.are.same({0, 3}, dt.zeros(0, 3):softmax(2):size())
  end)

  it("backward (the fused softmax_backward / log_softmax_backward ops) equals the composed formulas", function()
    local prng = require("tests.spec.support.spec_helpers").prng(21)
    for i = 1, 12 do
      local nd = prng.int(1, 3)
      local shape = {}
      for k = 1, nd do shape[k] = prng.int(i == 3 and 0 or 1, i % 4 == 0 and 300 or 9) end
      local dtype = i % 2 == 0 and "float64" or "float32"
      local d = prng.int(1, nd)
      local x, g = dt.randn(table.unpack(shape)):to(dtype):requires_grad_(), dt.randn(table.unpack(shape)):to(dtype)
      for _, log in ipairs({false, true}) do
        local y = log and x:log_softmax(d) or x:softmax(d)
        y:backward(g)
        local yd = y:detach()
        local want = log and g - yd:exp() * g:sum(d, true) or yd * (g - (g * yd):sum(d, true))
        local what = string.format("%s %s dim %d %s", log and "log_softmax" or "softmax", table.concat(shape, "x"), d, dtype)
        assert.is_true(x.grad:allclose(want, dtype == "float32" and 1e-5 or 1e-12, dtype == "float32" and 1e-6 or 1e-14), what)
        x.grad = nil
      end
    end
  end)

  it("raise clear errors", function()
    local x = dt.zeros(2, 3)
    assert.matches("softmax: dim is required, e.g. t:softmax(-1)", R.error_of(x.softmax, x), 1, true)
    assert.matches("log_softmax: dim 3 out of range for a 2-d tensor", R.error_of(x.log_softmax, x, 3), 1, true)
    local i = dt.tensor({1, 2})
    assert.matches("softmax: input dtype int64 is not floating point", R.error_of(i.softmax, i, 1), 1, true)
  end)
end)

-- softmax/log_softmax against closed forms; dim required.
do
  local S = require("tests.spec.support.spec_helpers")
  local err, fails, close, tmpname = S.err, S.fails, S.close, S.tmpname

  describe("softmax and log_softmax against closed forms", function()
    local a = dt.tensor({{1, 5, 3}, {4, 2, 6}}, {dtype = "float64"})

    it("softmax(dim), log_softmax(dim)", function()
      local e = {math.exp(1), math.exp(5), math.exp(3)}
      local s = e[1] + e[2] + e[3]
      close({e[1] / s, e[2] / s, e[3] / s}, a:softmax(2):totable()[1], 1e-15)
      close({math.log(e[1] / s), math.log(e[2] / s), math.log(e[3] / s)}, a:log_softmax(-1):totable()[1], 1e-14)
      close({1, 1, 1}, a:softmax(1):sum(1):totable(), 1e-15)
      fails("softmax: dim is required", a.softmax, a)
      fails("softmax: dim 5 out of range for a 2-d tensor", a.softmax, a, 5)
    end)

    it("softmax_backward names the op and the values it refuses", function()
      local g, y = dt.zeros(2, 3), dt.zeros(2, 3)
      fails("softmax_backward: grad has shape {3,2}, the output {2,3}", dt._softmax_backward, dt.zeros(3, 2), y, 1)
      fails("log_softmax_backward: grad has dtype float64, the output float32", dt._softmax_backward, g:double(), y, 1, true)
      fails("softmax_backward: dim 3 out of range", dt._softmax_backward, g, y, 3)
      fails("softmax_backward: dim is required", dt._softmax_backward, g, y)
      fails("softmax_backward: expected a tensor for y, got nil", dt._softmax_backward, g, nil, 1)
      fails("softmax_backward: input dtype int64 is not floating point", dt._softmax_backward, g:long(), y:long(), 1)
    end)
  end)
end
