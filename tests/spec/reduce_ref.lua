-- Plain-Lua float64 references for the reduction, softmax and matmul specs
-- (require "tests.spec.reduce_ref"; the specs run from the source root).
local R = {}

-- n deterministic values k/4, |k| <= 9: exact in every float dtype, bf16 included.
function R.values(n, seed)
  local v = {}
  for i = 1, n do v[i] = ((i * 37 + (seed or 0) * 11) % 19 - 9) / 4 end
  return v
end

-- A fixture: flat values of `shape` and a function dtype -> tensor holding them.
function R.fixture(shape, seed)
  local flat = R.values(R.numel(shape), seed)
  return flat, function(dtype) return dt.tensor(R.nest(flat, shape), {dtype = dtype}) end
end

function R.numel(shape)
  local n = 1
  for _, s in ipairs(shape) do n = n * s end
  return n
end

-- Nested table of the given shape from a flat row-major list (a number for shape {}).
function R.nest(flat, shape)
  local pos = 0
  local function build(d)
    if d > #shape then
      pos = pos + 1
      return flat[pos]
    end
    local t = {}
    for i = 1, shape[d] do t[i] = build(d + 1) end
    return t
  end
  return build(1)
end

-- Row-major index -> list of 1-based coordinates, and back (also used by
-- tests/spec/support/op_cases.lua).
function R.coords(i, shape)
  local c = {}
  for d = #shape, 1, -1 do
    c[d] = (i - 1) % shape[d] + 1
    i = (i - 1) // shape[d] + 1
  end
  return c
end
function R.flat_index(c, shape)
  local i = 0
  for d = 1, #shape do i = i * shape[d] + (c[d] - 1) end
  return i + 1
end
local coords, flat_index = R.coords, R.flat_index

-- Reduces flat data of `shape` over the 1-based dims in `dims` (nil: all) with fn(list) -> value.
-- Returns the nested result (keepdim keeps size-1 dims) and the result shape.
function R.reduce(flat, shape, dims, keepdim, fn)
  local red = {}
  if dims == nil then
    for d = 1, #shape do red[d] = true end
  else
    for _, d in ipairs(dims) do red[d < 0 and #shape + d + 1 or d] = true end
  end
  local kshape, oshape = {}, {}
  for d = 1, #shape do
    if not red[d] then kshape[#kshape + 1] = shape[d] end
    if not red[d] then oshape[#oshape + 1] = shape[d] elseif keepdim then oshape[#oshape + 1] = 1 end
  end
  local groups = {}
  for i = 1, R.numel(kshape) do groups[i] = {} end
  for i = 1, R.numel(shape) do
    local c, kc = coords(i, shape), {}
    for d = 1, #shape do if not red[d] then kc[#kc + 1] = c[d] end end
    local g = groups[flat_index(kc, kshape)]
    g[#g + 1] = flat[i]
  end
  local out = {}
  for i, g in ipairs(groups) do out[i] = fn(g) end
  return R.nest(out, oshape), oshape
end

function R.sum(l) local s = 0 for _, v in ipairs(l) do s = s + v end return s end
function R.prod(l) local s = 1 for _, v in ipairs(l) do s = s * v end return s end
function R.mean(l) return R.sum(l) / #l end
function R.max(l) local m = l[1] for _, v in ipairs(l) do if v > m then m = v end end return m end
function R.min(l) local m = l[1] for _, v in ipairs(l) do if v < m then m = v end end return m end
-- 1-based position of the first max / min
function R.argmax(l) local k = 1 for i, v in ipairs(l) do if v > l[k] then k = i end end return k end
function R.argmin(l) local k = 1 for i, v in ipairs(l) do if v < l[k] then k = i end end return k end
function R.var(correction)
  return function(l)
    local m, s = R.mean(l), 0
    for _, v in ipairs(l) do s = s + (v - m) ^ 2 end
    return s / math.max(0, #l - correction)
  end
end
function R.norm(p)
  return function(l)
    if p == math.huge then return R.max((function() local a = {} for i, v in ipairs(l) do a[i] = math.abs(v) end return a end)()) end
    local s = 0
    for _, v in ipairs(l) do s = s + math.abs(v) ^ p end
    return s ^ (1 / p)
  end
end

-- Recursive comparison with a relative/absolute tolerance; nan equals nan.
function R.close(actual, expected, tol, path)
  path = path or "x"
  tol = tol or 1e-6
  if type(expected) == "table" then
    assert(type(actual) == "table", path .. ": expected a table, got " .. tostring(actual))
    assert(#actual == #expected, string.format("%s: length %d, expected %d", path, #actual, #expected))
    for i = 1, #expected do R.close(actual[i], expected[i], tol, path .. "[" .. i .. "]") end
    return true
  end
  if expected ~= expected then
    assert(actual ~= actual, string.format("%s: got %s, expected nan", path, tostring(actual)))
    return true
  end
  local err = math.abs(actual - expected)
  assert(err <= tol * math.max(1, math.abs(expected)),
    string.format("%s: got %.17g, expected %.17g (tolerance %g)", path, actual, expected, tol))
  return true
end

-- Message of the error fn raises (asserting that it raises).
function R.error_of(fn, ...)
  local ok, err = pcall(fn, ...)
  assert(not ok, "expected an error")
  return tostring(err)
end

R.float_dtypes = {"float32", "float64", "bfloat16", "float16"}
R.tol = {float32 = 1e-5, float64 = 1e-12, bfloat16 = 1e-2, float16 = 2e-3}

return R
