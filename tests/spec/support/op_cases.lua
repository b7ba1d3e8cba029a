-- The case table of the op-table-driven specs (tests/spec/op_table_spec.lua on one device,
-- tests/spec_dist/op_table_dtensor_spec.lua on DTensors), one entry per row of the operator
-- table (src/ops/op_list.h, listed from Lua by dt._op_rows()).  A row without an entry fails
-- both specs.  Adding an op: one entry here, usually one line through a family constructor
-- (unary, binary, compare, reduce, view, ...).
--
-- An entry:
--   cases(rng)            -> list of {inputs = {tensors...}, static = {...}, label = "..."}:
--                            random shapes (0-size dims included) from rng, a PRNG seeded alike
--                            on every rank; non-contiguous inputs where they apply
--   run(inputs, static, mesh_opts) -> the op's result(s); the same function on plain tensors
--                            and DTensors (mesh_opts = {device_mesh =, placements =} for
--                            factories on a mesh, nil otherwise)
--   ref(inputs, static)   -> the expected result(s) computed in plain Lua from totable()
--                            data: {shape = {...}, data = {flat float64 values}} (one per
--                            output); or check(outs, inputs, static) for ops whose values are
--                            not a function of the inputs (empty, random ops: properties and
--                            reproducibility; bit-exact Philox values are in random_spec.lua)
--   tol                   relative tolerance (float64 reference; default 1e-12 for float64
--                            results, 1e-5 for float32), 0 = exact
--   exact                 DTensor results must equal the single-device op bitwise
--                            (data movement, random ops); else allclose
--   dist                  false: no DTensor form (reason in dist_reason)
--   partial               false: Partial(sum) inputs are not tried (integer or bool-only inputs)
--   refuses               {family = "documented error"}: the dispatcher refuses the op on
--                            that placement family (raised on every rank)
--   factory               the op takes mesh_opts instead of DTensor inputs
local assert = require "luassert"
local R = require "tests.spec.reduce_ref"
local M = {}

-- ---------------------------------------------------------------- data helpers
local numel = R.numel
M.numel = numel

M.prng = require("tests.spec.support.spec_helpers").prng

-- flat row-major Lua values of t (booleans as 0/1)
local function vals(t)
  local out = t:reshape(t:numel()):totable()
  if t.dtype == "bool" then for i, v in ipairs(out) do out[i] = v and 1 or 0 end end
  return out
end
M.vals = vals

local function make(flat, shape, dtype)
  local t = dt.tensor(#flat > 0 and flat or {}, {dtype = dtype or "float64"})
  return t:reshape(shape)
end
M.make = make

-- n values k/4 with k in -11..11 (exact in every float dtype); positive: in 1/4..23/4
local function quarters(rng, n, positive)
  local v = {}
  for i = 1, n do
    local k = rng.int(-11, 11)
    if positive then k = math.abs(k) + 1 end
    v[i] = k / 4
  end
  return v
end
-- n distinct values (no ties for max/argmax), in a random order
local function distinct(rng, n)
  local v = {}
  for i = 1, n do v[i] = (i - 1 - n // 2) / 4 end
  for i = n, 2, -1 do
    local j = rng.int(1, i)
    v[i], v[j] = v[j], v[i]
  end
  return v
end

local function rand_shape(rng, ndim, lo, hi)
  local s = {}
  for d = 1, ndim do s[d] = rng.int(lo or 0, hi or 4) end
  return s
end

-- the same values as t, in a non-contiguous layout (t itself when no such layout exists)
local function noncontig(t)
  local nd = t:dim()
  if nd == 0 then return t end
  if nd == 1 then return dt.stack({t, t}, 2):select(2, 1) end
  return t:transpose(1, nd):contiguous():transpose(1, nd)
end
M.noncontig = noncontig

local coords, flat_index = R.coords, R.flat_index -- 1-based flat index <-> 1-based coordinates

-- a reference result {shape, data} whose element at out coords oc is f(oc)
local function build(shape, f)
  local data = {}
  for i = 1, numel(shape) do data[i] = f(coords(i, shape)) end
  return {shape = shape, data = data}
end
-- reads element c of a reference-like {shape, data} (broadcast: size-1 / missing leading dims)
local function at(x, c)
  local nd, off = #x.shape, #c - #x.shape
  local cc = {}
  for d = 1, nd do cc[d] = x.shape[d] == 1 and 1 or c[d + off] end
  return x.data[flat_index(cc, x.shape)]
end
local function ref_of(t) return {shape = t:size(), data = vals(t)} end
M.ref_of = ref_of

local function broadcast_shape(...)
  local shapes, nd = {...}, 0
  for _, s in ipairs(shapes) do nd = math.max(nd, #s) end
  local out = {}
  for d = 1, nd do
    local v = 1
    for _, s in ipairs(shapes) do
      local k = s[d - (nd - #s)]
      if k and k ~= 1 then v = k end
    end
    out[d] = v
  end
  return out
end

-- shape b broadcastable to a: some dims 1, maybe fewer leading dims
local function broadcastable(rng, a)
  local b = {}
  for d = 1, #a do b[d] = rng.int(1, 3) == 1 and 1 or a[d] end
  if #b > 0 and rng.int(1, 3) == 1 then table.remove(b, 1) end
  return b
end

local function t_of(rng, shape, dtype, kind)
  local n = numel(shape)
  local v = kind == "distinct" and distinct(rng, n) or quarters(rng, n, kind == "positive")
  if dtype and (dtype:match("int") or dtype == "uint8") then
    for i = 1, n do v[i] = math.floor(v[i] * 4) end
    if dtype == "uint8" then for i = 1, n do v[i] = math.abs(v[i]) end end
  end
  if kind == "nonzero" then for i = 1, n do if v[i] == 0 then v[i] = 1 end end end
  return make(v, shape, dtype or "float64")
end
M.t_of = t_of

local function erf(x)
  -- |x| <= 3: the Maclaurin series (error far below 1e-12); beyond, where the series cancels
  -- catastrophically (integer inputs reach 9 and more), 1 - erfc from its continued fraction
  -- erfc(x) = exp(-x^2)/sqrt(pi) / (x + (1/2)/(x + 1/(x + (3/2)/(x + ...)))), summed bottom-up
  if math.abs(x) > 3 then
    local a, f = math.abs(x), 0
    for k = 200, 1, -1 do f = (k / 2) / (a + f) end
    local erfc = math.exp(-a * a) / math.sqrt(math.pi) / (a + f)
    return x > 0 and 1 - erfc or erfc - 1
  end
  local s, term, k = 0, x, 0
  repeat
    local add = term / (2 * k + 1)
    s = s + add
    k = k + 1
    term = -term * x * x / k
  until math.abs(add) < 1e-17 * math.max(1, math.abs(s)) and k > 5
  return 2 / math.sqrt(math.pi) * s
end

-- ---------------------------------------------------------------- families
local ops = {}
M.ops = ops

-- elementwise: fn over every element; inputs: float64 and float32, 0-size and non-contiguous
local function unary(method, fn, o)
  o = o or {}
  return {
    family = "pointwise",
    cases = function(rng)
      local list = {}
      for i = 1, 4 do
        local dtype = (o.dtypes or {"float64", "float32", "float64", "float64"})[i] or "float64"
        local x = t_of(rng, rand_shape(rng, i - 1 + (i == 4 and -1 or 0), i == 3 and 0 or 1), dtype, o.kind)
        list[#list + 1] = {inputs = {i == 3 and noncontig(x) or x}, static = o.static and o.static(rng) or {},
                           label = dtype .. (i == 3 and " non-contiguous" or "")}
      end
      list[#list + 1] = {inputs = {t_of(rng, {0, 3})}, static = o.static and o.static(rng) or {}, label = "0-size"}
      return list
    end,
    run = function(i, s) return method(i[1], s) end,
    ref = function(i, s)
      local x = ref_of(i[1])
      local d = {}
      for k, v in ipairs(x.data) do d[k] = fn(v, s) end
      return {shape = x.shape, data = d}
    end,
    tol = o.tol,
    partial = o.partial,
  }
end

-- tensor-tensor with broadcasting, tensor-scalar, scalar-tensor (forms the op has)
local function binary(method, fn, o)
  o = o or {}
  return {
    family = "pointwise",
    cases = function(rng)
      local list = {}
      for i = 1, 5 do
        local dtype = (o.dtypes or {"float64", "float32", "float64", "float64", "float64"})[i] or "float64"
        local sa = rand_shape(rng, rng.int(1, 3), i == 4 and 0 or 1)
        local a = t_of(rng, sa, dtype, o.kind_a)
        local b = t_of(rng, broadcastable(rng, sa), dtype, o.kind_b)
        if i == 3 then a, b = noncontig(a), noncontig(b) end
        list[#list + 1] = {inputs = {a, b}, static = {form = "tt"}, label = dtype .. (i == 3 and " non-contiguous" or "")}
      end
      if o.scalar ~= false then
        local sa = rand_shape(rng, 2, 1)
        local sc = o.scalar or 3
        list[#list + 1] = {inputs = {t_of(rng, sa, "float64", o.kind_a)}, static = {form = "ts", s = sc}, label = "tensor, scalar"}
        if o.rscalar then
          list[#list + 1] = {inputs = {t_of(rng, sa, "float64", o.kind_b)}, static = {form = "st", s = o.rscalar},
                             label = "scalar, tensor"}
        end
      end
      if o.int then
        local sa = rand_shape(rng, 2, 1)
        list[#list + 1] = {inputs = {t_of(rng, sa, "int64", o.kind_a), t_of(rng, sa, "int64", o.kind_b)},
                           static = {form = "tt"}, label = "int64"}
      end
      return list
    end,
    run = function(i, s)
      if s.form == "ts" then return method(i[1], s.s) end
      if s.form == "st" then return o.rmethod(s.s, i[1]) end
      return method(i[1], i[2])
    end,
    ref = function(i, s)
      if s.form == "ts" or s.form == "st" then
        local x = ref_of(i[1])
        local d = {}
        for k, v in ipairs(x.data) do d[k] = s.form == "ts" and fn(v, s.s) or fn(s.s, v) end
        return {shape = x.shape, data = d}
      end
      local a, b = ref_of(i[1]), ref_of(i[2])
      return build(broadcast_shape(a.shape, b.shape), function(c) return fn(at(a, c), at(b, c)) end)
    end,
    tol = o.tol,
    exact = o.exact,
    partial = o.partial,
  }
end

local function cmp(method, fn)
  return binary(method, function(a, b) return fn(a, b) and 1 or 0 end,
                {exact = true, int = true, rscalar = 0, rmethod = function(s, x) return method(dt.full(x:size(), s, {dtype = x.dtype}), x) end})
end

-- reductions over one dim (keepdim or not) or every dim; fn(list) -> value
local function reduce(method_dim, method_all, fn, o)
  o = o or {}
  return {
    family = "reduce",
    cases = function(rng)
      local list = {}
      for i = 1, 5 do
        local nd = rng.int(1, 3)
        local shape = rand_shape(rng, nd, (i == 4 and not o.nonempty) and 0 or 1)
        local x = t_of(rng, shape, i == 2 and "float32" or o.dtype or "float64", o.kind)
        if i == 3 then x = noncontig(x) end
        local dim = i ~= 5 and rng.int(1, nd) or nil
        list[#list + 1] = {inputs = {x}, static = {dim = dim, keep = i % 2 == 1, p = o.static and o.static(rng)},
                           label = (dim and ("dim " .. dim) or "all dims") .. (i == 3 and " non-contiguous" or "") ..
                               (i == 4 and " 0-size allowed" or "")}
      end
      return list
    end,
    run = function(i, s)
      if s.dim then return method_dim(i[1], s.dim, s.keep, s.p) end
      return method_all(i[1], s.p)
    end,
    ref = function(i, s)
      local x = ref_of(i[1])
      local outs = {}
      for k = 1, o.nout or 1 do
        local f = o.nout and fn[k] or fn
        local nested, shape = R.reduce(x.data, x.shape, s.dim and {s.dim} or nil, s.dim and s.keep, function(l) return f(l, s.p) end)
        local flat = {}
        local function walk(t)
          if type(t) == "table" then for _, e in ipairs(t) do walk(e) end else flat[#flat + 1] = t end
        end
        walk(nested)
        outs[k] = {shape = shape, data = flat}
      end
      return o.nout and outs or outs[1]
    end,
    tol = o.tol,
  }
end

-- a view (or a copy of one): out element at coords c is input element map(c, in_shape, static)
local function view(method, out_shape, map, gen)
  return {
    family = "view",
    cases = function(rng)
      local list = {}
      for i = 1, 4 do
        local c = gen(rng, i)
        local x = t_of(rng, c.shape)
        if i == 3 then x = noncontig(x) end
        list[#list + 1] = {inputs = {x}, static = c.static, label = (i == 3 and "non-contiguous " or "") .. "shape {" ..
                           table.concat(c.shape, ",") .. "}"}
      end
      return list
    end,
    run = function(i, s) return method(i[1], s) end,
    ref = function(i, s)
      local x = ref_of(i[1])
      return build(out_shape(x.shape, s), function(c) return x.data[flat_index(map(c, x.shape, s), x.shape)] end)
    end,
    tol = 0,
    exact = true,
  }
end

-- ---------------------------------------------------------------- factories
local function fopts(dtype, mesh_opts)
  local o = {dtype = dtype}
  if mesh_opts then o.device_mesh, o.placements = mesh_opts.device_mesh, mesh_opts.placements end
  return o
end
local function factory_cases(rng, extra)
  local list = {}
  for i = 1, 3 do
    local shape = rand_shape(rng, rng.int(1, 3), i == 3 and 0 or 1, 5)
    list[#list + 1] = {inputs = {}, static = {shape = shape, dtype = ({"float32", "float64", "int64"})[i], x = extra and extra(rng, i)},
                       label = "shape {" .. table.concat(shape, ",") .. "}"}
  end
  return list
end

ops.empty = {
  family = "factory", factory = true,
  cases = factory_cases,
  run = function(_, s, m) return dt.empty(s.shape, fopts(s.dtype, m)) end,
  check = function(out, _, s) -- values undefined: shape and dtype only
    assert.are.same(s.shape, out:size())
    assert.are.equal(s.dtype, out.dtype)
  end,
  shape_only = true,
}
ops.full = {
  family = "factory", factory = true, exact = true,
  cases = function(rng) return factory_cases(rng, function(r) return r.int(-9, 9) end) end,
  run = function(_, s, m) return dt.full(s.shape, s.x, fopts(s.dtype, m)) end,
  ref = function(_, s) return build(s.shape, function() return s.x end) end,
  tol = 0,
}
ops.arange = {
  family = "factory", dist = false, dist_reason = "no mesh form (doc/dtensor.md: factories on a mesh)",
  cases = function(rng)
    local list = {}
    for _, c in ipairs {{0, 7, 1}, {-3, 4, 2}, {5, -2, -3}, {0.5, 2.5, 0.25}, {2, 2, 1}} do
      list[#list + 1] = {inputs = {}, static = {a = c[1], b = c[2], st = c[3]}, label = table.concat(c, ",")}
    end
    return list
  end,
  run = function(_, s) return dt.arange(s.a, s.b, s.st, {dtype = "float64"}) end,
  ref = function(_, s)
    local d = {}
    local k = 0
    while (s.st > 0 and s.a + k * s.st < s.b) or (s.st < 0 and s.a + k * s.st > s.b) do
      d[#d + 1] = s.a + k * s.st
      k = k + 1
    end
    return {shape = {#d}, data = d}
  end,
  tol = 0,
}
ops.eye = {
  family = "factory", dist = false, dist_reason = "no mesh form (doc/dtensor.md: factories on a mesh)",
  cases = function(rng)
    local list = {}
    for i = 1, 3 do
      local n, m = rng.int(0, 5), rng.int(1, 5)
      list[#list + 1] = {inputs = {}, static = {n = n, m = m}, label = n .. "x" .. m}
    end
    return list
  end,
  run = function(_, s) return dt.eye(s.n, s.m) end,
  ref = function(_, s) return build({s.n, s.m}, function(c) return c[1] == c[2] and 1 or 0 end) end,
  tol = 0,
}

-- ---------------------------------------------------------------- copies and casts
local function same_values(i) return ref_of(i[1]) end
ops.clone = unary(function(x) return x:clone() end, function(v) return v end, {tol = 0})
ops.clone.exact = true
ops.to = {
  family = "pointwise", exact = true, tol = 0,
  cases = function(rng)
    local list = {}
    for i, pair in ipairs {{"float64", "float32"}, {"float32", "float64"}, {"int64", "float64"}, {"float64", "bfloat16"},
                           {"int32", "int64"}, {"float64", "float64"}} do
      local x = t_of(rng, rand_shape(rng, rng.int(1, 3), i == 2 and 0 or 1), pair[1])
      if i == 3 then x = noncontig(x) end
      list[#list + 1] = {inputs = {x}, static = {dtype = pair[2]}, label = pair[1] .. " -> " .. pair[2]}
    end
    return list
  end,
  run = function(i, s) return i[1]:to(s.dtype) end,
  ref = same_values, -- quarters and small integers are exact in every dtype here
}
ops.contiguous = {
  family = "pointwise", exact = true, tol = 0,
  cases = function(rng)
    return {{inputs = {noncontig(t_of(rng, {3, 4}))}, static = {}, label = "non-contiguous"},
            {inputs = {t_of(rng, {2, 0, 3})}, static = {}, label = "0-size"},
            {inputs = {t_of(rng, rand_shape(rng, 3, 1))}, static = {}, label = "contiguous"}}
  end,
  run = function(i) return i[1]:contiguous() end,
  ref = same_values,
  check_extra = function(out) assert.is_true(out:is_contiguous()) end,
}
ops.copy_ = {
  family = "inplace", exact = true, tol = 0,
  cases = function(rng)
    local list = {}
    for i = 1, 4 do
      local sa = rand_shape(rng, rng.int(1, 3), i == 4 and 0 or 1)
      local src = t_of(rng, broadcastable(rng, sa), i == 2 and "float32" or "float64")
      local dst = t_of(rng, sa)
      if i == 3 then dst = noncontig(dst) end
      list[#list + 1] = {inputs = {dst, src}, static = {}, label = (i == 3 and "non-contiguous self, " or "") .. "broadcast src"}
    end
    return list
  end,
  run = function(i) return i[1]:clone():copy_(i[2]) end,
  ref = function(i)
    local src = ref_of(i[2])
    return build(i[1]:size(), function(c) return at(src, c) end)
  end,
}
ops.fill_ = {
  family = "inplace", exact = true, tol = 0,
  cases = function(rng)
    local list = {}
    for i = 1, 3 do
      local x = t_of(rng, rand_shape(rng, rng.int(1, 3), i == 2 and 0 or 1))
      list[#list + 1] = {inputs = {i == 3 and noncontig(x) or x}, static = {v = rng.int(-5, 5) / 2}, label = "case " .. i}
    end
    return list
  end,
  run = function(i, s) return i[1]:clone():fill_(s.v) end,
  ref = function(i, s) return build(i[1]:size(), function() return s.v end) end,
}
ops.zero_ = {
  family = "inplace", exact = true, tol = 0,
  cases = ops.fill_.cases,
  run = function(i) return i[1]:clone():zero_() end,
  ref = function(i) return build(i[1]:size(), function() return 0 end) end,
}

-- ---------------------------------------------------------------- pointwise unary
local function sig(v) return 1 / (1 + math.exp(-v)) end
ops.neg = unary(function(x) return x:neg() end, function(v) return -v end, {tol = 0, partial = "linear"})
ops.abs = unary(function(x) return x:abs() end, math.abs, {tol = 0})
ops.exp = unary(function(x) return x:exp() end, math.exp)
ops.log = unary(function(x) return x:log() end, function(v) return math.log(v) end, {kind = "positive"})
ops.sqrt = unary(function(x) return x:sqrt() end, math.sqrt, {kind = "positive"})
ops.rsqrt = unary(function(x) return x:rsqrt() end, function(v) return 1 / math.sqrt(v) end, {kind = "positive"})
ops.tanh = unary(function(x) return x:tanh() end, function(v) return (math.exp(2 * v) - 1) / (math.exp(2 * v) + 1) end)
ops.sigmoid = unary(function(x) return x:sigmoid() end, sig)
ops.relu = unary(function(x) return x:relu() end, function(v) return math.max(v, 0) end, {tol = 0})
ops.gelu = unary(function(x, s) return dt.F.gelu(x, s.tanh and {approximate = "tanh"} or nil) end, function(v, s)
  if s.tanh then return 0.5 * v * (1 + math.tanh(math.sqrt(2 / math.pi) * (v + 0.044715 * v ^ 3))) end
  return 0.5 * v * (1 + erf(v / math.sqrt(2)))
end, {static = function(rng) return {tanh = rng.int(1, 2) == 1} end, tol = 1e-11})
ops.silu = unary(function(x) return x:silu() end, function(v) return v * sig(v) end)
ops.sin = unary(function(x) return x:sin() end, math.sin)
ops.cos = unary(function(x) return x:cos() end, math.cos)
ops.clamp = unary(function(x, s) return x:clamp(s.lo, s.hi) end, function(v, s)
  if s.lo and v < s.lo then v = s.lo end
  if s.hi and v > s.hi then v = s.hi end
  return v
end, {tol = 0, static = function(rng)
  local k = rng.int(1, 3)
  return {lo = k ~= 2 and rng.int(-8, 0) / 4 or nil, hi = k ~= 1 and rng.int(0, 8) / 4 or nil}
end})

ops.hardtanh = unary(function(x, s) return x:hardtanh(s.lo, s.hi) end,
  function(v, s) return math.min(math.max(v, s.lo), s.hi) end, {tol = 0, static = function(rng)
    local lo = rng.int(-8, 0) / 4
    return {lo = lo, hi = lo + rng.int(0, 8) / 4}
  end})
ops.leaky_relu = unary(function(x, s) return dt.F.leaky_relu(x, s.slope) end,
  function(v, s) return v > 0 and v or v * s.slope end,
  {tol = 0, static = function(rng) return {slope = rng.int(0, 8) / 16} end})

-- ---------------------------------------------------------------- pointwise binary
local function lua_rem(a, b) return a - math.floor(a / b) * b end
ops.add = binary(function(a, b) return a:add(b) end, function(a, b) return a + b end,
                 {int = true, rscalar = 2, rmethod = function(s, x) return s + x end, tol = 1e-12, partial = "linear"})
ops.sub = binary(function(a, b) return a:sub(b) end, function(a, b) return a - b end,
                 {int = true, rscalar = 2, rmethod = function(s, x) return s - x end, partial = "linear"})
ops.mul = binary(function(a, b) return a:mul(b) end, function(a, b) return a * b end,
                 {int = true, rscalar = 2, rmethod = function(s, x) return s * x end, partial = "linear"})
ops.div = binary(function(a, b) return a:div(b) end, function(a, b) return a / b end,
                 {kind_b = "nonzero", rscalar = 2, rmethod = function(s, x) return s / x end, partial = "linear"})
ops.pow = binary(function(a, b) return a:pow(b) end, function(a, b) return a ^ b end,
                 {kind_a = "positive", scalar = 2, rscalar = 2, rmethod = function(s, x) return s ^ x end})
ops.remainder = binary(function(a, b) return a:remainder(b) end, lua_rem,
                       {kind_b = "nonzero", int = true, rscalar = 5, rmethod = function(s, x) return s % x end})
ops.eq = cmp(function(a, b) return a:eq(b) end, function(a, b) return a == b end)
ops.ne = cmp(function(a, b) return a:ne(b) end, function(a, b) return a ~= b end)
ops.lt = cmp(function(a, b) return a:lt(b) end, function(a, b) return a < b end)
ops.le = cmp(function(a, b) return a:le(b) end, function(a, b) return a <= b end)
ops.gt = cmp(function(a, b) return a:gt(b) end, function(a, b) return a > b end)
ops.ge = cmp(function(a, b) return a:ge(b) end, function(a, b) return a >= b end)
ops.add_ = binary(function(a, b) return a:clone():add_(b) end, function(a, b) return a + b end, {rscalar = nil})
ops.add_.family = "inplace"
ops.mul_ = binary(function(a, b) return a:clone():mul_(b) end, function(a, b) return a * b end, {rscalar = nil})
ops.mul_.family = "inplace"
-- in place: b broadcasts to a's shape (not the other way)
for _, name in ipairs {"add_", "mul_"} do
  local base = ops[name].cases
  ops[name].cases = function(rng)
    local list = {}
    for _, c in ipairs(base(rng)) do
      if c.static.form ~= "tt" or #broadcast_shape(c.inputs[1]:size(), c.inputs[2]:size()) == c.inputs[1]:dim() then
        local ok = true
        if c.static.form == "tt" then
          local bs = broadcast_shape(c.inputs[1]:size(), c.inputs[2]:size())
          for d, v in ipairs(bs) do if v ~= c.inputs[1]:size(d) then ok = false end end
        end
        if ok then list[#list + 1] = c end
      end
    end
    return list
  end
end
ops.where = {
  family = "pointwise", exact = true, tol = 0,
  cases = function(rng)
    local list = {}
    for i = 1, 4 do
      local sc = rand_shape(rng, rng.int(1, 3), i == 4 and 0 or 1)
      local cond = t_of(rng, sc):gt(0)
      local a, b = t_of(rng, broadcastable(rng, sc)), t_of(rng, broadcastable(rng, sc))
      if i == 3 then cond, a = noncontig(cond), noncontig(a) end
      list[#list + 1] = {inputs = {cond, a, b}, static = {}, label = "case " .. i}
    end
    local x = t_of(rng, {3, 4})
    list[#list + 1] = {inputs = {x:gt(0), x}, static = {scalar = -1}, label = "scalar b"}
    return list
  end,
  run = function(i, s) return dt.where(i[1], i[2], s.scalar or i[3]) end,
  ref = function(i, s)
    local c, a = ref_of(i[1]), ref_of(i[2])
    local b = s.scalar and {shape = {}, data = {s.scalar}} or ref_of(i[3])
    return build(broadcast_shape(c.shape, a.shape, b.shape), function(k)
      return at(c, k) ~= 0 and at(a, k) or at(b, k)
    end)
  end,
}

ops.masked_fill = {
  family = "pointwise", exact = true, tol = 0,
  cases = function(rng)
    local list = {}
    for i = 1, 4 do
      local sx = rand_shape(rng, rng.int(1, 3), i == 4 and 0 or 1)
      local x = t_of(rng, sx, i == 2 and "float32" or "float64")
      local mask = t_of(rng, broadcastable(rng, sx)):gt(0)
      if i == 3 then x, mask = noncontig(x), noncontig(mask) end
      list[#list + 1] = {inputs = {x, mask}, static = {v = rng.int(-8, 8) / 4}, label = "case " .. i}
    end
    return list
  end,
  run = function(i, s) return i[1]:masked_fill(i[2], s.v) end,
  ref = function(i, s)
    local x, m = ref_of(i[1]), ref_of(i[2])
    return build(x.shape, function(c) return at(m, c) ~= 0 and s.v or at(x, c) end)
  end,
}

-- whole-tensor answers (a Lua boolean, here as a 0-d 0/1 tensor); on DTensors dt.equal and
-- dt.allclose are composed in Lua and agree the answer over the world (dtensor_compare_spec)
local function compare_all(method, fn)
  return {
    family = "compare", exact = true, tol = 0,
    dist = false, dist_reason = "a Lua boolean; DTensors: dt.equal/dt.allclose agree it over the world",
    cases = function(rng)
      local list = {}
      for i = 1, 5 do
        local shape = rand_shape(rng, rng.int(1, 3), i == 4 and 0 or 1)
        local a = t_of(rng, shape)
        local b = a:clone()
        if i == 2 and a:numel() > 0 then b = b + (rng.int(1, 4) / 4) end -- differs (by >= 0.25)
        if i == 3 then b = noncontig(b):float() end -- same values, another layout and dtype
        if i == 5 then b = t_of(rng, {shape[1] + 1}) end -- another shape
        list[#list + 1] = {inputs = {a, b}, static = {}, label = "case " .. i}
      end
      return list
    end,
    run = function(i) return dt.tensor(method(i[1], i[2]) and 1 or 0) end,
    ref = function(i)
      local a, b = ref_of(i[1]), ref_of(i[2])
      return {shape = {}, data = {fn(a, b) and 1 or 0}}
    end,
  }
end
local function same_values(a, b, close)
  if #a.shape ~= #b.shape and not close then return false end
  for d = 1, math.max(#a.shape, #b.shape) do if a.shape[d] ~= b.shape[d] then return false end end
  for k, v in ipairs(a.data) do
    if close then if math.abs(v - b.data[k]) > 1e-8 + 1e-5 * math.abs(b.data[k]) then return false end
    elseif v ~= b.data[k] then return false end
  end
  return true
end
ops.equal = compare_all(function(a, b) return a:equal(b) end, function(a, b) return same_values(a, b) end)
ops.allclose = compare_all(function(a, b) return a:allclose(b) end, function(a, b) return same_values(a, b, true) end)
-- allclose broadcasts: other shapes are an error there, not false
local allclose_cases = ops.allclose.cases
ops.allclose.cases = function(rng)
  local list = {}
  for _, c in ipairs(allclose_cases(rng)) do if c.label ~= "case 5" then list[#list + 1] = c end end
  return list
end

-- 1-based ids checked against 1..hi and made 0-based (int64); the error names the first bad value
ops.ids_to_zero_based = {
  family = "ids", exact = true, tol = 0,
  dist = false, dist_reason = "plain ids: F.embedding / F.cross_entropy agree a DTensor's range, then check it with this op",
  cases = function(rng)
    local list = {}
    for i = 1, 4 do
      local shape = rand_shape(rng, rng.int(1, 3), i == 4 and 0 or 1)
      local hi = rng.int(1, 9)
      local flat = {}
      for k = 1, numel(shape) do flat[k] = rng.int(1, hi) end
      local t = make(flat, shape, ({"int64", "int32", "uint8", "int64"})[i])
      if i == 2 then t = noncontig(t) end
      list[#list + 1] = {inputs = {t}, static = {hi = hi}, label = "case " .. i}
    end
    return list
  end,
  run = function(i, s) return dt._ids_to_zero_based(i[1], s.hi) end,
  ref = function(i)
    local x = ref_of(i[1])
    local data = {}
    for k, v in ipairs(x.data) do data[k] = v - 1 end
    return {shape = x.shape, data = data}
  end,
  check_extra = function(out) assert.are.equal("int64", out.dtype) end,
}

-- ---------------------------------------------------------------- reductions
ops.sum = reduce(function(x, d, k) return x:sum(d, k) end, function(x) return x:sum() end, R.sum)
ops.mean = reduce(function(x, d, k) return x:mean(d, k) end, function(x) return x:mean() end, R.mean)
ops.prod = reduce(function(x, d, k) return x:prod(d, k) end, function(x) return x:prod() end, R.prod)
ops.amax = reduce(function(x, d, k) return x:amax(d, k) end, function(x) return x:amax() end, R.max, {nonempty = true, tol = 0})
ops.amin = reduce(function(x, d, k) return x:amin(d, k) end, function(x) return x:amin() end, R.min, {nonempty = true, tol = 0})
ops.max = reduce(function(x, d, k) return x:max(d, k) end, function(x) return x:max(1, false) end, {R.max, R.argmax},
                 {nonempty = true, tol = 0, nout = 2, kind = "distinct"})
ops.min = reduce(function(x, d, k) return x:min(d, k) end, function(x) return x:min(1, false) end, {R.min, R.argmin},
                 {nonempty = true, tol = 0, nout = 2, kind = "distinct"})
-- max/min without a dim reduce dim 1 here (the all-dims form is amax's)
for _, name in ipairs {"max", "min"} do
  local e = ops[name]
  local cases = e.cases
  e.cases = function(rng)
    local list = cases(rng)
    for _, c in ipairs(list) do if not c.static.dim then c.static.dim, c.label = 1, "dim 1" end end
    return list
  end
end
ops.argmax = reduce(function(x, d, k) return x:argmax(d, k) end, function(x) return x:argmax() end, R.argmax,
                    {nonempty = true, tol = 0, kind = "distinct"})
ops.argmin = reduce(function(x, d, k) return x:argmin(d, k) end, function(x) return x:argmin() end, R.argmin,
                    {nonempty = true, tol = 0, kind = "distinct"})
local function corr(rng) return rng.int(0, 1) end
ops.var = reduce(function(x, d, k, c) return x:var(d, {keepdim = k, correction = c}) end,
                 function(x, c) return x:var(nil, {correction = c}) end, function(l, c) return R.var(c)(l) end, {static = corr})
ops.std = reduce(function(x, d, k, c) return x:std(d, {keepdim = k, correction = c}) end,
                 function(x, c) return x:std(nil, {correction = c}) end, function(l, c) return math.sqrt(R.var(c)(l)) end,
                 {static = corr})
ops.norm = reduce(function(x, d, k, p) return x:norm(p, d, k) end, function(x, p) return x:norm(p) end,
                  function(l, p) return #l == 0 and 0 or R.norm(p)(l) end, {static = function(rng) return rng.pick {1, 2, 3, math.huge} end})

local function along(x, d, fn) -- applies fn(list) -> list along dim d of a reference
  local out = {shape = x.shape, data = {}}
  local groups = {}
  for i = 1, #x.data do
    local c = coords(i, x.shape)
    local key = c[d]
    c[d] = 1
    local g = flat_index(c, x.shape)
    groups[g] = groups[g] or {idx = {}, v = {}}
    groups[g].idx[key], groups[g].v[key] = i, x.data[i]
  end
  for _, g in pairs(groups) do
    local r = fn(g.v)
    for k, i in pairs(g.idx) do out.data[i] = r[k] end
  end
  return out
end
local function softmax_list(l, log)
  local m = R.max(l)
  local s = 0
  for _, v in ipairs(l) do s = s + math.exp(v - m) end
  local r = {}
  for k, v in ipairs(l) do r[k] = log and (v - m - math.log(s)) or math.exp(v - m) / s end
  return r
end
for _, name in ipairs {"softmax", "log_softmax"} do
  ops[name] = {
    family = "softmax",
    cases = function(rng)
      local list = {}
      for i = 1, 4 do
        local nd = rng.int(1, 3)
        local x = t_of(rng, rand_shape(rng, nd, i == 4 and 0 or 1), i == 2 and "float32" or "float64")
        if i == 3 then x = noncontig(x) end
        list[#list + 1] = {inputs = {x}, static = {dim = rng.int(1, nd)}, label = "case " .. i}
      end
      return list
    end,
    run = function(i, s) return i[1][name](i[1], s.dim) end,
    ref = function(i, s) return along(ref_of(i[1]), s.dim, function(l) return softmax_list(l, name == "log_softmax") end) end,
  }
end

-- ---------------------------------------------------------------- linear algebra
local function ref_matmul(a, b) -- PyTorch rules on references
  local sa, sb = {table.unpack(a.shape)}, {table.unpack(b.shape)}
  local va, vb = #sa == 1, #sb == 1
  if va then table.insert(sa, 1, 1) end
  if vb then sb[#sb + 1] = 1 end
  local n, k, m = sa[#sa - 1], sa[#sa], sb[#sb]
  local ba, bb = {table.unpack(sa, 1, #sa - 2)}, {table.unpack(sb, 1, #sb - 2)}
  local batch = broadcast_shape(ba, bb)
  local full = {table.unpack(batch)}
  full[#full + 1], full[#full + 2] = n, m
  local A = {shape = sa, data = a.data}
  local B = {shape = sb, data = b.data}
  local out = build(full, function(c)
    local nb = #batch
    local s = 0
    for kk = 1, k do
      local ca, cb = {}, {}
      for d = 1, nb do ca[d], cb[d] = c[d], c[d] end
      ca[nb + 1], ca[nb + 2] = c[nb + 1], kk
      cb[nb + 1], cb[nb + 2] = kk, c[nb + 2]
      s = s + at(A, ca) * at(B, cb)
    end
    return s
  end)
  local shape = {table.unpack(batch)}
  if not va then shape[#shape + 1] = n end
  if not vb then shape[#shape + 1] = m end
  out.shape = shape
  return out
end
local function linalg(run, gen, ref)
  return {
    family = "matmul",
    cases = function(rng)
      local list = {}
      for i = 1, 5 do
        local shapes, static = gen(rng, i)
        local ins = {}
        for j, s in ipairs(shapes) do
          ins[j] = t_of(rng, s, i == 2 and "float32" or "float64")
          if i == 3 then ins[j] = noncontig(ins[j]) end
        end
        local lab = {}
        for j, s in ipairs(shapes) do lab[j] = "{" .. table.concat(s, ",") .. "}" end
        list[#list + 1] = {inputs = ins, static = static or {}, label = table.concat(lab, " x ")}
      end
      return list
    end,
    run = run,
    ref = ref or function(i) return ref_matmul(ref_of(i[1]), ref_of(i[2])) end,
  }
end
ops.matmul = linalg(function(i) return i[1]:matmul(i[2]) end, function(rng, i)
  local n, k, m, b = rng.int(1, 4), rng.int(i == 4 and 0 or 1, 4), rng.int(1, 4), rng.int(1, 3)
  return ({{{k}, {k}}, {{n, k}, {k}}, {{k}, {k, m}}, {{n, k}, {k, m}}, {{b, 1, n, k}, {2, k, m}}})[i] or {{n, k}, {k, m}}
end)
ops.mm = linalg(function(i) return i[1]:mm(i[2]) end, function(rng, i)
  local n, k, m = rng.int(1, 5), rng.int(i == 4 and 0 or 1, 5), rng.int(1, 5)
  return {{n, k}, {k, m}}
end)
ops.bmm = linalg(function(i) return i[1]:bmm(i[2]) end, function(rng, i)
  local b, n, k, m = rng.int(1, 3), rng.int(1, 4), rng.int(i == 4 and 0 or 1, 4), rng.int(1, 4)
  return {{b, n, k}, {b, k, m}}
end)
ops.addmm = linalg(function(i, s) return dt.addmm(i[1], i[2], i[3], {beta = s.beta, alpha = s.alpha}) end, function(rng, i)
  local n, k, m = rng.int(1, 5), rng.int(i == 4 and 0 or 1, 5), rng.int(1, 5)
  return {rng.int(1, 2) == 1 and {m} or {n, m}, {n, k}, {k, m}}, {beta = rng.int(-2, 2) / 2, alpha = rng.int(1, 4) / 2}
end, function(i, s)
  local ab, c = ref_matmul(ref_of(i[2]), ref_of(i[3])), ref_of(i[1])
  return build(ab.shape, function(k) return s.beta * at(c, k) + s.alpha * ab.data[flat_index(k, ab.shape)] end)
end)

-- ---------------------------------------------------------------- views
local function shape_gen(ndlo, ndhi)
  return function(rng, i) return {shape = rand_shape(rng, rng.int(ndlo, ndhi), i == 4 and 0 or 1)} end
end
local function rowmajor(c, in_shape, out_shape) -- same flat position
  return coords(flat_index(c, out_shape), in_shape)
end
local function reshape_gen(rng, i)
  local shape = rand_shape(rng, rng.int(1, 3), i == 4 and 0 or 1)
  local n = numel(shape)
  local to = {n}
  if n > 0 and n % 2 == 0 then to = {2, n // 2} end
  if rng.int(1, 2) == 1 and #to == 2 then to[2] = -1 end
  return {shape = shape, static = {to = to}}
end
local function resolved(s, x_shape)
  local out, known, free = {}, 1, nil
  for d, v in ipairs(s.to) do if v == -1 then free = d else known = known * v end out[d] = v end
  if free then out[free] = known == 0 and 0 or numel(x_shape) // known end
  return out
end
ops.view = view(function(x, s) return x:contiguous():view(s.to) end, function(sh, s) return resolved(s, sh) end,
                function(c, sh, s) return rowmajor(c, sh, resolved(s, sh)) end, reshape_gen)
ops.reshape = view(function(x, s) return x:reshape(s.to) end, function(sh, s) return resolved(s, sh) end,
                   function(c, sh, s) return rowmajor(c, sh, resolved(s, sh)) end, reshape_gen)
ops.transpose = view(function(x, s) return x:transpose(s.a, s.b) end,
  function(sh, s) local o = {table.unpack(sh)} o[s.a], o[s.b] = sh[s.b], sh[s.a] return o end,
  function(c, _, s) local o = {table.unpack(c)} o[s.a], o[s.b] = c[s.b], c[s.a] return o end,
  function(rng, i)
    local nd = rng.int(2, 3)
    return {shape = rand_shape(rng, nd, i == 4 and 0 or 1), static = {a = rng.int(1, nd), b = rng.int(1, nd)}}
  end)
ops.permute = view(function(x, s) return x:permute(s.order) end,
  function(sh, s) local o = {} for d, p in ipairs(s.order) do o[d] = sh[p] end return o end,
  function(c, _, s) local o = {} for d, p in ipairs(s.order) do o[p] = c[d] end return o end,
  function(rng, i)
    local nd = rng.int(1, 4)
    local order = {}
    for d = 1, nd do order[d] = d end
    for d = nd, 2, -1 do local j = rng.int(1, d) order[d], order[j] = order[j], order[d] end
    return {shape = rand_shape(rng, nd, i == 4 and 0 or 1), static = {order = order}}
  end)
ops.narrow = view(function(x, s) return x:narrow(s.dim, s.start, s.len) end,
  function(sh, s) local o = {table.unpack(sh)} o[s.dim] = s.len return o end,
  function(c, _, s) local o = {table.unpack(c)} o[s.dim] = c[s.dim] + s.start - 1 return o end,
  function(rng, i)
    local shape = rand_shape(rng, rng.int(1, 3), 1)
    local dim = rng.int(1, #shape)
    local start = rng.int(1, shape[dim])
    local len = i == 4 and 0 or rng.int(0, shape[dim] - start + 1)
    return {shape = shape, static = {dim = dim, start = start, len = len}}
  end)
ops.slice = view(function(x, s)
  local key = {}
  for d = 1, x:dim() do key[d] = {} end
  key[s.dim] = {s.start, s.stop, s.step}
  return x[key]
end, function(sh, s) local o = {table.unpack(sh)} o[s.dim] = (s.stop - s.start) // s.step + 1 return o end,
  function(c, _, s) local o = {table.unpack(c)} o[s.dim] = s.start + (c[s.dim] - 1) * s.step return o end,
  function(rng)
    local shape = rand_shape(rng, rng.int(1, 3), 1, 6)
    local dim = rng.int(1, #shape)
    local start = rng.int(1, shape[dim])
    return {shape = shape, static = {dim = dim, start = start, stop = rng.int(start, shape[dim]), step = rng.int(1, 3)}}
  end)
ops.select = view(function(x, s) return x:select(s.dim, s.idx) end,
  function(sh, s) local o = {table.unpack(sh)} table.remove(o, s.dim) return o end,
  function(c, _, s) local o = {table.unpack(c)} table.insert(o, s.dim, s.idx) return o end,
  function(rng, i)
    local shape = rand_shape(rng, rng.int(1, 3), 1)
    if i == 4 and #shape > 1 then shape[#shape] = 0 end
    local dim = rng.int(1, #shape)
    if shape[dim] == 0 then dim = 1 end
    return {shape = shape, static = {dim = dim, idx = rng.int(1, shape[dim])}}
  end)
ops.unsqueeze = view(function(x, s) return x:unsqueeze(s.dim) end,
  function(sh, s) local o = {table.unpack(sh)} table.insert(o, s.dim, 1) return o end,
  function(c, _, s) local o = {table.unpack(c)} table.remove(o, s.dim) return o end,
  function(rng, i)
    local shape = rand_shape(rng, rng.int(0, 3), i == 4 and 0 or 1)
    return {shape = shape, static = {dim = rng.int(1, #shape + 1)}}
  end)
ops.squeeze = view(function(x, s) if s.dim then return x:squeeze(s.dim) end return x:squeeze() end,
  function(sh, s)
    local o = {}
    for d, v in ipairs(sh) do if not (v == 1 and (s.dim == nil or s.dim == d)) then o[#o + 1] = v end end
    return o
  end,
  function(c, sh, s)
    local o, k = {}, 1
    for d, v in ipairs(sh) do
      if v == 1 and (s.dim == nil or s.dim == d) then o[d] = 1 else o[d], k = c[k], k + 1 end
    end
    return o
  end,
  function(rng, i)
    local shape = rand_shape(rng, rng.int(1, 4), i == 4 and 0 or 1, 3)
    shape[rng.int(1, #shape)] = 1
    return {shape = shape, static = {dim = rng.int(1, 2) == 1 and rng.int(1, #shape) or nil}}
  end)
ops.expand = view(function(x, s) return x:expand(s.to) end,
  function(sh, s) local o = {} for d, v in ipairs(s.to) do o[d] = v == -1 and sh[d - (#s.to - #sh)] or v end return o end,
  function(c, sh) local o = {} for d = 1, #sh do o[d] = sh[d] == 1 and 1 or c[d + #c - #sh] end return o end,
  function(rng, i)
    local shape = rand_shape(rng, rng.int(1, 3), 1, 3)
    local to = {}
    for d, v in ipairs(shape) do to[d] = v == 1 and rng.int(i == 4 and 0 or 1, 4) or (rng.int(1, 2) == 1 and -1 or v) end
    if rng.int(1, 2) == 1 then table.insert(to, 1, rng.int(1, 3)) end
    return {shape = shape, static = {to = to}}
  end)
ops.flatten = view(function(x, s) return x:flatten(s.a, s.b) end,
  function(sh, s)
    if #sh == 0 then return {1} end
    local o = {}
    for d = 1, s.a - 1 do o[#o + 1] = sh[d] end
    local m = 1
    for d = s.a, s.b do m = m * sh[d] end
    o[#o + 1] = m
    for d = s.b + 1, #sh do o[#o + 1] = sh[d] end
    return o
  end,
  function(c, sh, s)
    if #sh == 0 then return {} end
    local mid = {}
    for d = s.a, s.b do mid[#mid + 1] = sh[d] end
    local inner = coords(c[s.a], mid)
    local o = {}
    for d = 1, s.a - 1 do o[d] = c[d] end
    for d = s.a, s.b do o[d] = inner[d - s.a + 1] end
    for d = s.b + 1, #sh do o[d] = c[d - (s.b - s.a)] end
    return o
  end,
  function(rng, i)
    local nd = rng.int(1, 4)
    local a = rng.int(1, nd)
    return {shape = rand_shape(rng, nd, i == 4 and 0 or 1, 3), static = {a = a, b = rng.int(a, nd)}}
  end)

-- ---------------------------------------------------------------- joins
for _, name in ipairs {"cat", "stack"} do
  ops[name] = {
    family = "join", exact = true, tol = 0,
    cases = function(rng)
      local list = {}
      for i = 1, 4 do
        local shape = rand_shape(rng, rng.int(1, 3), i == 4 and 0 or 1)
        local dim = rng.int(1, #shape + (name == "stack" and 1 or 0))
        local ins = {}
        for j = 1, rng.int(1, 3) do
          local s = {table.unpack(shape)}
          if name == "cat" and dim <= #s then s[dim] = rng.int(0, 3) end
          ins[j] = t_of(rng, s, j == 2 and "float32" or "float64")
          if i == 3 then ins[j] = noncontig(ins[j]) end
        end
        list[#list + 1] = {inputs = ins, static = {dim = dim}, label = #ins .. " tensors, dim " .. dim}
      end
      return list
    end,
    run = function(i, s) return dt[name](i, s.dim) end,
    ref = function(i, s)
      local refs = {}
      for j, t in ipairs(i) do refs[j] = ref_of(t) end
      local shape = {table.unpack(refs[1].shape)}
      if name == "stack" then
        table.insert(shape, s.dim, #refs)
        return build(shape, function(c)
          local o = {table.unpack(c)}
          local j = table.remove(o, s.dim)
          return refs[j].data[flat_index(o, refs[j].shape)]
        end)
      end
      local offs, total = {}, 0
      for j, r in ipairs(refs) do offs[j], total = total, total + r.shape[s.dim] end
      shape[s.dim] = total
      return build(shape, function(c)
        local j = #refs
        while offs[j] >= c[s.dim] do j = j - 1 end
        local o = {table.unpack(c)}
        o[s.dim] = c[s.dim] - offs[j]
        return refs[j].data[flat_index(o, refs[j].shape)]
      end)
    end,
  }
end

-- ---------------------------------------------------------------- indexing
ops.index_select = {
  family = "index", exact = true, tol = 0,
  cases = function(rng)
    local list = {}
    for i = 1, 4 do
      local shape = rand_shape(rng, rng.int(1, 3), 1)
      local dim = rng.int(1, #shape)
      local ids = {}
      for k = 1, (i == 4 and 0 or rng.int(1, 5)) do ids[k] = rng.int(1, shape[dim]) end
      local x = t_of(rng, shape)
      if i == 3 then x = noncontig(x) end
      list[#list + 1] = {inputs = {x, make(ids, {#ids}, i == 2 and "int32" or "int64")}, static = {dim = dim},
                         label = "dim " .. dim .. ", " .. #ids .. " indices"}
    end
    return list
  end,
  run = function(i, s) return i[1]:index_select(s.dim, i[2]) end,
  ref = function(i, s)
    local x, ids = ref_of(i[1]), ref_of(i[2])
    local shape = {table.unpack(x.shape)}
    shape[s.dim] = #ids.data
    return build(shape, function(c)
      local o = {table.unpack(c)}
      o[s.dim] = ids.data[c[s.dim]]
      return x.data[flat_index(o, x.shape)]
    end)
  end,
}

-- index_add: repeated indices accumulate; 0-size index; the source's dims follow x's
ops.index_add = {
  family = "index",
  cases = function(rng)
    local list = {}
    for i = 1, 4 do
      local shape = rand_shape(rng, rng.int(1, 3), 1)
      local dim = rng.int(1, #shape)
      local ids = {}
      for k = 1, (i == 4 and 0 or rng.int(1, 6)) do ids[k] = rng.int(1, shape[dim]) end
      local sshape = {table.unpack(shape)}
      sshape[dim] = #ids
      local x, src = t_of(rng, shape), t_of(rng, sshape)
      if i == 3 then x, src = noncontig(x), noncontig(src) end
      list[#list + 1] = {inputs = {x, make(ids, {#ids}, i == 2 and "int32" or "int64"), src}, static = {dim = dim},
                         label = "dim " .. dim .. ", " .. #ids .. " indices"}
    end
    return list
  end,
  run = function(i, s) return i[1]:index_add(s.dim, i[2], i[3]) end,
  ref = function(i, s)
    local x, ids, src = ref_of(i[1]), ref_of(i[2]), ref_of(i[3])
    local out = {shape = x.shape, data = {table.unpack(x.data)}}
    for k = 1, #src.data do
      local c = coords(k, src.shape)
      c[s.dim] = ids.data[c[s.dim]]
      local f = flat_index(c, x.shape)
      out.data[f] = out.data[f] + src.data[k]
    end
    return out
  end,
}

-- t[k] = v (the op index_put_): random keys of selections, stepped ranges and whole dims
ops.index_put_ = {
  family = "inplace", exact = true, tol = 0,
  cases = function(rng)
    local list = {}
    for i = 1, 4 do
      local shape = rand_shape(rng, rng.int(1, 3), 1)
      local key, rshape = {}, {}
      for d = 1, #shape do
        local c = rng.int(1, 3)
        if c == 1 then key[d] = rng.int(1, shape[d])
        elseif c == 2 then
          local a = rng.int(1, shape[d])
          local b, st = rng.int(a, shape[d]), rng.int(1, 2)
          key[d], rshape[#rshape + 1] = {a, b, st}, (b - a) // st + 1
        else key[d], rshape[#rshape + 1] = {}, shape[d] end
      end
      local x = t_of(rng, shape)
      if i == 3 then x = noncontig(x) end
      local v = t_of(rng, rshape)
      list[#list + 1] = {inputs = {x, v}, static = {key = key, num = i == 4 and 1.5 or nil},
                         label = (i == 4 and "a number" or "a tensor") .. " into {" .. table.concat(shape, ",") .. "}"}
    end
    return list
  end,
  run = function(i, s)
    local x = i[1]:clone()
    x[s.key] = s.num or i[2]
    return x
  end,
  ref = function(i, s)
    local x, v = ref_of(i[1]), ref_of(i[2])
    return build(x.shape, function(c)
      local r = {}
      for d = 1, #x.shape do
        local k = s.key[d]
        if type(k) == "number" then
          if c[d] ~= k then return at(x, c) end
        elseif #k == 0 then r[#r + 1] = c[d]
        else
          if c[d] < k[1] or c[d] > k[2] or (c[d] - k[1]) % k[3] ~= 0 then return at(x, c) end
          r[#r + 1] = (c[d] - k[1]) // k[3] + 1
        end
      end
      return s.num or at(v, r)
    end)
  end,
}

-- ---------------------------------------------------------------- neural-network functions
ops.embedding = {
  family = "nn", exact = true, tol = 0,
  cases = function(rng)
    local list = {}
    for i = 1, 4 do
      local v, d = rng.int(1, 6), rng.int(1, 4)
      local ishape = rand_shape(rng, rng.int(1, 2), i == 4 and 0 or 1)
      local ids = {}
      for k = 1, numel(ishape) do ids[k] = rng.int(1, v) end
      local w = t_of(rng, {v, d})
      list[#list + 1] = {inputs = {make(ids, ishape, "int64"), i == 3 and noncontig(w) or w}, static = {},
                         label = "vocab " .. v .. " dim " .. d}
    end
    return list
  end,
  run = function(i) return dt.F.embedding(i[1], i[2]) end,
  ref = function(i)
    local ids, w = ref_of(i[1]), ref_of(i[2])
    local shape = {table.unpack(ids.shape)}
    shape[#shape + 1] = w.shape[2]
    return build(shape, function(c)
      local o = {table.unpack(c)}
      local col = table.remove(o)
      return w.data[(ids.data[flat_index(o, ids.shape)] - 1) * w.shape[2] + col]
    end)
  end,
}
local function norm_ref(i, s, rms)
  local x = ref_of(i[1])
  local k = #s.nshape
  local inner = numel(s.nshape)
  local w = s.w and ref_of(i[2]) or nil
  local b = s.b and ref_of(i[3]) or nil
  local out = {shape = x.shape, data = {}}
  for g = 0, #x.data // math.max(inner, 1) - 1 do
    local m, v = 0, 0
    for j = 1, inner do m = m + x.data[g * inner + j] end
    m = rms and 0 or m / inner
    for j = 1, inner do v = v + (x.data[g * inner + j] - m) ^ 2 end
    v = v / inner
    for j = 1, inner do
      local y = (x.data[g * inner + j] - m) / math.sqrt(v + s.eps)
      if w then y = y * w.data[j] end
      if b then y = y + b.data[j] end
      out.data[g * inner + j] = y
    end
  end
  return out, k
end
-- case i of a norm: x's shape (case 4: a 0-size batch) and its last k dims
local function norm_shapes(rng, i)
  local shape = rand_shape(rng, rng.int(1, 3), 1)
  if i == 4 then shape[1] = 0 end
  local k = rng.int(1, #shape)
  return shape, {table.unpack(shape, #shape - k + 1)}
end
for _, name in ipairs {"layer_norm", "rms_norm"} do
  ops[name] = {
    family = "nn",
    cases = function(rng)
      local list = {}
      for i = 1, 4 do
        local shape, nshape = norm_shapes(rng, i)
        local x = t_of(rng, shape, i == 2 and "float32" or "float64")
        local ins = {i == 3 and noncontig(x) or x}
        local s = {nshape = nshape, eps = 1e-5, w = rng.int(1, 2) == 1, b = name == "layer_norm" and rng.int(1, 2) == 1}
        ins[2] = s.w and t_of(rng, nshape, x.dtype) or dt.ones(nshape, {dtype = x.dtype})
        ins[3] = s.b and t_of(rng, nshape, x.dtype) or dt.zeros(nshape, {dtype = x.dtype})
        list[#list + 1] = {inputs = ins, static = s, label = "case " .. i}
      end
      return list
    end,
    run = function(i, s)
      if name == "rms_norm" then return dt.F.rms_norm(i[1], s.nshape, s.w and i[2] or nil, s.eps) end
      return dt.F.layer_norm(i[1], s.nshape, s.w and i[2] or nil, s.b and i[3] or nil, s.eps)
    end,
    ref = function(i, s) return (norm_ref(i, s, name == "rms_norm")) end,
    tol = 1e-10,
  }
end
ops.cross_entropy = {
  family = "nn",
  cases = function(rng)
    local list = {}
    for i = 1, 4 do
      local nrow, c = rng.int(1, 5), rng.int(2, 5)
      local t = {}
      for k = 1, nrow do t[k] = rng.int(1, c) end
      if i == 3 then t[1] = -100 end
      local x = t_of(rng, {nrow, c}, i == 2 and "float32" or "float64")
      list[#list + 1] = {inputs = {i == 4 and noncontig(x) or x, make(t, {nrow}, "int64")},
                         static = {reduction = ({"mean", "sum", "mean", "none"})[i]}, label = "case " .. i}
    end
    return list
  end,
  run = function(i, s) return dt.F.cross_entropy(i[1], i[2], {reduction = s.reduction, ignore_index = s.ignore}) end,
  ref = function(i, s)
    local x, t = ref_of(i[1]), ref_of(i[2])
    local c = x.shape[2]
    local losses, sum, cnt = {}, 0, 0
    for r = 1, x.shape[1] do
      local l = 0
      if t.data[r] ~= -100 then
        local row = {}
        for j = 1, c do row[j] = x.data[(r - 1) * c + j] end
        l = -softmax_list(row, true)[t.data[r]]
        sum, cnt = sum + l, cnt + 1
      end
      losses[r] = l
    end
    if s.reduction == "none" then return {shape = {x.shape[1]}, data = losses} end
    return {shape = {}, data = {s.reduction == "sum" and sum or sum / cnt}}
  end,
}
ops.scaled_dot_product_attention = {
  family = "nn",
  cases = function(rng)
    local list = {}
    for i = 1, 4 do
      local b, L, S, E = rng.int(1, 2), rng.int(1, 4), rng.int(1, 4), rng.int(1, 4)
      if i == 2 then S = L end
      local q, k, v = t_of(rng, {b, L, E}), t_of(rng, {b, S, E}), t_of(rng, {b, S, rng.int(1, 3)})
      list[#list + 1] = {inputs = {q, i == 3 and noncontig(k) or k, v}, static = {causal = i == 2}, label = "case " .. i}
    end
    return list
  end,
  run = function(i, s)
    return dt.F.scaled_dot_product_attention(i[1], i[2], i[3], {attn_mask = i[4], is_causal = s.causal, scale = s.scale})
  end,
  ref = function(i, s)
    local q, k, v = ref_of(i[1]), ref_of(i[2]), ref_of(i[3])
    local B, L, E = table.unpack(q.shape)
    local S, Ev = k.shape[2], v.shape[3]
    local out = {shape = {B, L, Ev}, data = {}}
    for b = 1, B do
      for l = 1, L do
        local sc = {}
        for j = 1, S do
          local d = 0
          for e = 1, E do d = d + q.data[((b - 1) * L + l - 1) * E + e] * k.data[((b - 1) * S + j - 1) * E + e] end
          sc[j] = (s.causal and j > l) and -math.huge or d / math.sqrt(E)
        end
        local p = softmax_list(sc)
        for e = 1, Ev do
          local acc = 0
          for j = 1, S do acc = acc + p[j] * v.data[((b - 1) * S + j - 1) * Ev + e] end
          out.data[((b - 1) * L + l - 1) * Ev + e] = acc
        end
      end
    end
    return out
  end,
  tol = 1e-10,
}

-- ---------------------------------------------------------------- random ops
-- Values are not a function of the inputs: each check asserts the documented properties, and
-- the specs check that the same seed gives the same draw (bitwise) and, on DTensors, that the
-- full tensor is the single-device draw.
local function random_entry(e)
  e.family, e.random, e.exact, e.tol = e.family or "random", true, true, 0
  return e
end
local function each(t, f) for _, v in ipairs(vals(t)) do f(v) end end
ops.rand = random_entry {
  factory = true,
  cases = function(rng) return factory_cases(rng, function() return nil end) end,
  run = function(_, s, m) return dt.rand(s.shape, fopts(s.dtype == "int64" and "float32" or s.dtype, m)) end,
  check = function(out, _, s)
    assert.are.same(s.shape, out:size())
    each(out, function(v) assert.is_true(v >= 0 and v < 1, "rand value " .. v) end)
  end,
}
ops.randn = random_entry {
  factory = true,
  cases = ops.rand.cases,
  run = function(_, s, m) return dt.randn(s.shape, fopts(s.dtype == "int64" and "float64" or s.dtype, m)) end,
  check = function(out, _, s)
    assert.are.same(s.shape, out:size())
    each(out, function(v) assert.is_true(v == v and math.abs(v) < 10, "randn value " .. v) end)
  end,
}
ops.randint = random_entry {
  factory = true,
  cases = function(rng) return factory_cases(rng, function(r) local lo = r.int(-5, 5) return {lo, lo + r.int(1, 9)} end) end,
  run = function(_, s, m) return dt.randint(s.x[1], s.x[2], s.shape, fopts(s.dtype == "float32" and "int64" or s.dtype, m)) end,
  check = function(out, _, s)
    assert.are.same(s.shape, out:size())
    each(out, function(v) assert.is_true(v >= s.x[1] and v < s.x[2] and v == math.floor(v), "randint value " .. v) end)
  end,
}
for _, name in ipairs {"uniform_", "normal_"} do
  ops[name] = random_entry {
    family = "inplace",
    cases = function(rng)
      local list = {}
      for i = 1, 3 do
        local x = t_of(rng, rand_shape(rng, rng.int(1, 3), i == 2 and 0 or 1), i == 1 and "float32" or "float64")
        list[#list + 1] = {inputs = {i == 3 and noncontig(x) or x}, static = {a = -1, b = 3}, label = "case " .. i}
      end
      return list
    end,
    run = function(i, s) local c = i[1]:clone() return c[name](c, s.a, s.b) end,
    check = function(out, i, s)
      assert.are.same(i[1]:size(), out:size())
      each(out, function(v)
        if name == "uniform_" then assert.is_true(v >= s.a and v < s.b, "uniform_ value " .. v)
        else assert.is_true(v == v and math.abs(v - s.a) < 10 * s.b, "normal_ value " .. v) end
      end)
    end,
  }
end
ops.bernoulli = random_entry {
  family = "random_pointwise",
  cases = function(rng)
    local list = {}
    for i = 1, 3 do
      local shape = rand_shape(rng, rng.int(1, 3), i == 2 and 0 or 1)
      local p = {}
      for k = 1, numel(shape) do p[k] = rng.pick {0, 1, 0.5, 0.25} end
      local x = make(p, shape, i == 1 and "float32" or "float64")
      list[#list + 1] = {inputs = {i == 3 and noncontig(x) or x}, static = {}, label = "case " .. i}
    end
    return list
  end,
  run = function(i) return dt.bernoulli(i[1]) end,
  check = function(out, i)
    assert.are.equal(i[1].dtype, out.dtype)
    local p, o = vals(i[1]), vals(out)
    for k = 1, #p do
      assert.is_true(o[k] == 0 or o[k] == 1)
      if p[k] == 0 or p[k] == 1 then assert.are.equal(p[k], o[k]) end
    end
  end,
  partial = false,
}
ops.dropout = random_entry {
  family = "random_pointwise",
  cases = function(rng)
    local list = {}
    for i = 1, 3 do
      local x = t_of(rng, rand_shape(rng, rng.int(1, 3), i == 2 and 0 or 1), i == 1 and "float32" or "float64")
      list[#list + 1] = {inputs = {i == 3 and noncontig(x) or x}, static = {p = ({0.5, 0.25, 0.75})[i]}, label = "case " .. i}
    end
    return list
  end,
  run = function(i, s) return dt._dropout(i[1], s.p) end,
  check = function(outs, i, s)
    local y, keep = outs[1], outs[2]
    assert.are.equal("bool", keep.dtype)
    local x, yv, kv = vals(i[1]), vals(y), vals(keep)
    for k = 1, #x do
      local want = kv[k] == 1 and x[k] / (1 - s.p) or 0
      assert.is_true(math.abs(yv[k] - want) <= 1e-6 * math.max(1, math.abs(want)), "dropout value")
    end
  end,
}
ops.dropout_backward = {
  family = "pointwise", exact = false,
  cases = function(rng)
    local list = {}
    for i = 1, 3 do
      local shape = rand_shape(rng, rng.int(1, 3), i == 2 and 0 or 1)
      local g = t_of(rng, shape)
      list[#list + 1] = {inputs = {i == 3 and noncontig(g) or g, t_of(rng, shape):gt(0)}, static = {p = ({0.5, 0.25, 0.75})[i]},
                         label = "case " .. i}
    end
    return list
  end,
  run = function(i, s) return dt._dropout_backward(i[1], i[2], s.p) end,
  ref = function(i, s)
    local g, k = ref_of(i[1]), ref_of(i[2])
    local d = {}
    for j = 1, #g.data do d[j] = k.data[j] == 1 and g.data[j] / (1 - s.p) or 0 end
    return {shape = g.shape, data = d}
  end,
  partial = "linear",
}
ops.randperm = random_entry {
  factory = true, refuses = {S = "randperm: gives a replicated DTensor", ["2-d"] = "randperm: gives a replicated DTensor"},
  cases = function(rng)
    local list = {}
    for _, n in ipairs {0, 1, rng.int(2, 9), 17} do list[#list + 1] = {inputs = {}, static = {n = n}, label = "n = " .. n} end
    return list
  end,
  run = function(_, s, m) return dt.randperm(s.n, fopts("int64", m and {device_mesh = m.device_mesh, placements = m.placements})) end,
  check = function(out, _, s)
    local v = vals(out)
    table.sort(v)
    assert.are.equal(s.n, #v)
    for k = 1, s.n do assert.are.equal(k, v[k]) end
  end,
  shard_1d_only = true,
}
ops.multinomial = random_entry {
  family = "random_pointwise",
  cases = function(rng)
    local list = {}
    for i = 1, 4 do
      local r, c = rng.int(1, 3), rng.int(2, 5)
      local w, onehot = {}, i == 1
      for row = 1, r do
        local hot = rng.int(1, c)
        for j = 1, c do w[(row - 1) * c + j] = onehot and (j == hot and 1 or 0) or (j == 1 and 1 or rng.int(0, 4) / 2) end
      end
      local x = i == 4 and make({table.unpack(w, 1, c)}, {c}) or make(w, {r, c})
      local replacement = i ~= 3
      local k = replacement and rng.int(1, 4) or 1
      list[#list + 1] = {inputs = {x}, static = {k = k, replacement = replacement}, label = "case " .. i}
    end
    return list
  end,
  run = function(i, s) return i[1]:multinomial(s.k, s.replacement) end,
  check = function(out, i, s)
    local w = ref_of(i[1])
    local c = w.shape[#w.shape]
    local rows = #w.shape == 2 and w.shape[1] or 1
    assert.are.equal("int64", out.dtype)
    local o = vals(out)
    assert.are.equal(rows * s.k, #o)
    for row = 1, rows do
      for j = 1, s.k do
        local v = o[(row - 1) * s.k + j]
        assert.is_true(v >= 1 and v <= c and w.data[(row - 1) * c + v] > 0, "multinomial index " .. v)
      end
    end
  end,
  partial = false,
}

-- ---------------------------------------------------------------- shape and index family
-- gather, scatter/scatter_add, sort, topk, flip, roll, repeat, tril/triu, diag (op_list.h's
-- SHAPE block; their gradient cases follow in the same block)

-- a random index tensor for gather/scatter: x's ndim, each size <= x's (dim's: 0..5), values
-- 1..x's size along dim; unique: each line along dim a distinct prefix of a permutation
-- (scatter's overwrites have a gradient only then); alike: the other dims' sizes are x's
local function index_for(rng, shape, dim, o)
  local ishape = {}
  for d = 1, #shape do
    ishape[d] = d == dim and (o.unique and rng.int(0, shape[d]) or rng.int(0, 5))
      or (o.alike and shape[d] or rng.int(0, shape[d]))
  end
  local v, n = {}, numel(ishape)
  for i = 1, n do
    local c = coords(i, ishape)
    if o.unique then
      v[i] = c[dim] -- a rotation by a per-line amount keeps the line's values distinct
      local line = 0
      for d = 1, #c do if d ~= dim then line = line * 7 + c[d] end end
      v[i] = (c[dim] - 1 + line) % shape[dim] + 1
    else v[i] = rng.int(1, shape[dim]) end
  end
  return make(v, ishape, o.dtype or "int64")
end

local function index_cases(rng, nin, o)
  local list = {}
  for i = 1, 5 do
    local shape = rand_shape(rng, rng.int(1, 3), 1)
    local dim = rng.int(1, #shape)
    local ix = index_for(rng, shape, dim, {alike = i <= 2, unique = o.unique, dtype = i == 2 and "int32" or nil})
    local x = t_of(rng, shape)
    if i == 3 then x = noncontig(x) end
    local ins = {x, ix}
    if nin == 3 then ins[3] = t_of(rng, ix:size()) end
    list[#list + 1] = {inputs = ins, static = {dim = dim}, label = "dim " .. dim .. ", index {" .. table.concat(ix:size(), ",") .. "}"}
  end
  return list
end

ops.gather = {
  family = "shape", exact = true, tol = 0,
  cases = function(rng) return index_cases(rng, 2, {}) end,
  run = function(i, s) return i[1]:gather(s.dim, i[2]) end,
  ref = function(i, s)
    local x, ix = ref_of(i[1]), ref_of(i[2])
    return build(ix.shape, function(c)
      local o = {table.unpack(c)}
      o[s.dim] = ix.data[flat_index(c, ix.shape)]
      return x.data[flat_index(o, x.shape)]
    end)
  end,
}

local function scatter_entry(method, add)
  return {
    family = "shape", exact = not add, tol = not add and 0 or nil,
    cases = function(rng) return index_cases(rng, 3, {unique = not add}) end,
    run = function(i, s) return method(i[1], s.dim, i[2], i[3]) end,
    ref = function(i, s)
      local x, ix, src = ref_of(i[1]), ref_of(i[2]), ref_of(i[3])
      local out = {shape = x.shape, data = {table.unpack(x.data)}}
      for k = 1, #ix.data do -- row-major order: a later write wins (scatter), or adds
        local c = coords(k, ix.shape)
        c[s.dim] = ix.data[k]
        local f = flat_index(c, x.shape)
        out.data[f] = add and out.data[f] + src.data[k] or src.data[k]
      end
      return out
    end,
  }
end
ops.scatter = scatter_entry(function(x, d, ix, src) return x:scatter(d, ix, src) end)
ops.scatter_add = scatter_entry(function(x, d, ix, src) return x:scatter_add(d, ix, src) end, true)

-- the positions of list l in the stable order (NaN largest), the first k of them
local function order_of(l, descending)
  local pos = {}
  for p = 1, #l do pos[p] = p end
  local function key_before(a, b)
    local x, y = l[a], l[b]
    local nx, ny = x ~= x, y ~= y
    if nx or ny then
      if nx ~= ny then
        if descending then return nx end
        return ny
      end
    elseif x ~= y then
      if descending then return x > y end
      return x < y
    end
    return a < b
  end
  table.sort(pos, key_before)
  return pos
end

-- values and 1-based indices along dim of the first k of each line's order
local function sorted_ref(x, dim, k, descending)
  local nd = #x.shape
  local shape = {table.unpack(x.shape)}
  if nd > 0 then shape[dim] = k end
  local v, ix = {shape = shape, data = {}}, {shape = shape, data = {}}
  local cache = {}
  for i = 1, numel(shape) do
    local c = coords(i, shape)
    local line = {table.unpack(c)}
    if nd > 0 then line[dim] = 1 end
    local key = table.concat(line, ",")
    if not cache[key] then
      local l = {}
      for p = 1, (nd > 0 and x.shape[dim] or 1) do
        if nd > 0 then line[dim] = p end
        l[p] = x.data[nd > 0 and flat_index(line, x.shape) or 1]
      end
      cache[key] = {l = l, pos = order_of(l, descending)}
    end
    local e = cache[key]
    local p = e.pos[nd > 0 and c[dim] or 1]
    v.data[i], ix.data[i] = e.l[p], p
  end
  return v, ix
end

-- distinct values first (the gradient check takes the first three), then ties (the stable
-- order), an integer tensor, NaN, a 0-size dim and a 0-d tensor
local function sort_cases(rng, with_k)
  local list = {}
  local function add(x, label)
    local dim = x:dim() > 0 and rng.int(1, x:dim()) or 1
    local size = x:dim() > 0 and x:size(dim) or 1
    local s = {dim = dim, descending = rng.int(0, 1) == 1, k = with_k and (x:dim() == 0 and 1 or rng.int(0, size)) or nil}
    list[#list + 1] = {inputs = {x}, static = s, label = label .. ", dim " .. dim .. (s.descending and " descending" or "")}
  end
  for i = 1, 3 do
    local x = t_of(rng, rand_shape(rng, rng.int(1, 3), 1), i == 2 and "float32" or "float64", "distinct")
    add(i == 3 and noncontig(x) or x, "distinct values")
  end
  local ties = make({1, 2, 1, 2, 1, 0.5, 2, 1, 0.5, 1, 2, 2}, {2, 6})
  add(ties, "ties")
  add(t_of(rng, rand_shape(rng, 2, 1), "int64"), "int64")
  add(make({0 / 0, 1, -1, 0 / 0, 3, 1}, {6}), "NaN")
  add(t_of(rng, {0, 3}), "0-size")
  add(make({2.5}, {}), "0-d")
  return list
end

ops.sort = {
  family = "shape", exact = true, tol = 0,
  cases = function(rng) return sort_cases(rng) end,
  run = function(i, s) return i[1]:sort(s.dim, s.descending) end,
  ref = function(i, s)
    local x = ref_of(i[1])
    return {sorted_ref(x, s.dim, #x.shape > 0 and x.shape[s.dim] or 1, s.descending)}
  end,
}
ops.topk = {
  family = "shape", exact = true, tol = 0,
  cases = function(rng) return sort_cases(rng, true) end,
  run = function(i, s) return i[1]:topk(s.k, s.dim, s.descending) end, -- descending: largest
  ref = function(i, s) return {sorted_ref(ref_of(i[1]), s.dim, s.k, s.descending)} end,
}

-- the one-input rearrangements: f(rng, x) -> static; src(c, shape, s) -> the input coordinates
-- of output coordinates c (nil: a zero); oshape(shape, s) the output's shape
local function rearrange(method, static, src, oshape, o)
  o = o or {}
  return {
    family = "shape", exact = true, tol = 0,
    cases = function(rng)
      local list = {}
      for i = 1, 5 do
        local nd = o.ndims and rng.pick(o.ndims) or rng.int(1, 3)
        local x = t_of(rng, rand_shape(rng, nd, i == 5 and 0 or 1), i == 2 and "float32" or i == 4 and "int64" or "float64")
        if i == 3 then x = noncontig(x) end
        local s = static(rng, x)
        list[#list + 1] = {inputs = {x}, static = s, label = (s.label or "") .. " on {" .. table.concat(x:size(), ",") .. "}"}
      end
      return list
    end,
    run = function(i, s) return method(i[1], s) end,
    ref = function(i, s)
      local x = ref_of(i[1])
      return build(oshape and oshape(x.shape, s) or x.shape, function(c)
        local sc = src(c, x.shape, s)
        return sc and x.data[flat_index(sc, x.shape)] or 0
      end)
    end,
  }
end

local function some_dims(rng, nd)
  local dims = {}
  for d = 1, nd do if rng.int(0, 1) == 1 then dims[#dims + 1] = rng.pick {d, d - nd - 1} end end
  return dims
end
local function pos_dim(d, nd) return d < 0 and d + nd + 1 or d end

ops.flip = rearrange(function(x, s) return x:flip(s.dims) end,
  function(rng, x) local d = some_dims(rng, x:dim()) return {dims = d, label = "dims {" .. table.concat(d, ",") .. "}"} end,
  function(c, shape, s)
    local o = {table.unpack(c)}
    for _, d in ipairs(s.dims) do d = pos_dim(d, #shape) o[d] = shape[d] + 1 - c[d] end
    return o
  end)

ops.roll = rearrange(function(x, s)
    if s.flat then return x:roll(s.shifts[1]) end
    return x:roll(s.shifts, s.dims)
  end,
  function(rng, x)
    if rng.int(1, 4) == 1 then return {flat = true, shifts = {rng.int(-7, 7)}, label = "flattened"} end
    local dims, shifts = {}, {}
    for k = 1, rng.int(1, x:dim()) do dims[k], shifts[k] = rng.int(1, x:dim()), rng.int(-7, 7) end
    return {dims = dims, shifts = shifts, label = "shifts {" .. table.concat(shifts, ",") .. "} dims {" .. table.concat(dims, ",") .. "}"}
  end,
  function(c, shape, s)
    if s.flat then
      local n = numel(shape)
      return coords((flat_index(c, shape) - 1 - s.shifts[1]) % n + 1, shape)
    end
    local o = {table.unpack(c)}
    for k, d in ipairs(s.dims) do o[d] = (o[d] - 1 - s.shifts[k]) % shape[d] + 1 end
    return o
  end)

ops["repeat"] = rearrange(function(x, s) return x["repeat"](x, s.reps) end,
  function(rng, x)
    local reps = {}
    for k = 1, x:dim() + rng.int(0, 1) do reps[k] = rng.int(0, 3) end
    if rng.int(0, 1) == 1 then for k = 1, #reps do reps[k] = math.max(reps[k], 1) end end
    return {reps = reps, label = "repeats {" .. table.concat(reps, ",") .. "}"}
  end,
  function(c, shape, s)
    local lead, o = #s.reps - #shape, {}
    for d = 1, #shape do o[d] = (c[d + lead] - 1) % shape[d] + 1 end
    return o
  end,
  function(shape, s)
    local lead, o = #s.reps - #shape, {}
    for e = 1, #s.reps do o[e] = s.reps[e] * (e <= lead and 1 or shape[e - lead]) end
    return o
  end)

local function triangle(name, keep)
  return rearrange(function(x, s) return x[name](x, s.diagonal) end,
    function(rng) local k = rng.int(-2, 2) return {diagonal = k, label = "diagonal " .. k} end,
    function(c, shape, s)
      local nd = #c
      if keep(c[nd] - c[nd - 1], s.diagonal) then return c end
    end, nil, {ndims = {2, 2, 3}})
end
ops.tril = triangle("tril", function(above, k) return above <= k end)
ops.triu = triangle("triu", function(above, k) return above >= k end)

ops.diag = rearrange(function(x, s) return x:diag(s.diagonal) end,
  function(rng) local k = rng.int(-2, 2) return {diagonal = k, label = "diagonal " .. k} end,
  function(c, shape, s)
    local k = s.diagonal
    if #shape == 1 then
      if c[2] - c[1] ~= k then return nil end
      return {k >= 0 and c[1] or c[2]}
    end
    return k >= 0 and {c[1], c[1] + k} or {c[1] - k, c[1]}
  end,
  function(shape, s)
    local k = s.diagonal
    if #shape == 1 then return {shape[1] + math.abs(k), shape[1] + math.abs(k)} end
    local n = k >= 0 and math.min(shape[1], shape[2] - k) or math.min(shape[1] + k, shape[2])
    return {math.max(n, 0)}
  end, {ndims = {1, 2}})

-- factories on a mesh take Shard and Replicate only (doc/dtensor.md)
for name, e in pairs(ops) do
  if e.factory and e.dist ~= false then
    e.refuses = e.refuses or {}
    e.refuses.P = name .. ": factories take Shard and Replicate placements only"
  end
end

-- ---------------------------------------------------------------- fused backward kernels
-- (the backward rules call them; they have no gradient of their own: nondiff below)
local function gelu_d(v, tanh_form)
  if tanh_form then
    local k0, k1 = math.sqrt(2 / math.pi), 0.044715
    local t = math.tanh(k0 * (v + k1 * v ^ 3))
    return 0.5 * (1 + t) + 0.5 * v * (1 - t * t) * k0 * (1 + 3 * k1 * v * v)
  end
  return 0.5 * (1 + erf(v / math.sqrt(2))) + v * math.exp(-v * v / 2) / math.sqrt(2 * math.pi)
end
ops.gelu_backward = {
  family = "pointwise",
  cases = function(rng)
    local list = {}
    for i = 1, 5 do
      local dtype = i == 2 and "float32" or "float64"
      local shape = rand_shape(rng, rng.int(1, 3), i == 4 and 0 or 1)
      local g, x = t_of(rng, shape, dtype), t_of(rng, shape, dtype)
      if i == 3 then g, x = noncontig(g), noncontig(x) end
      if i == 5 then g = t_of(rng, {shape[#shape]}, dtype) end -- broadcast along the leading dims
      list[#list + 1] = {inputs = {g, x}, static = {tanh = rng.int(1, 2) == 1}, label = dtype .. " case " .. i}
    end
    return list
  end,
  run = function(i, s) return dt._gelu_backward(i[1], i[2], s.tanh) end,
  ref = function(i, s)
    local g, x = ref_of(i[1]), ref_of(i[2])
    local d, ng = {}, #g.data
    for j = 1, #x.data do d[j] = g.data[(j - 1) % ng + 1] * gelu_d(x.data[j], s.tanh) end
    return {shape = x.shape, data = d}
  end,
  tol = 1e-11,
  nondiff = "the fused backward of gelu, called by gelu's rule: no second derivative",
}

-- layer_norm_backward(grad, x, w?): dx, dw = sum of grad * xhat and db = sum of grad over the
-- leading dims, from the formulas in plain Lua
ops.layer_norm_backward = {
  family = "nn",
  cases = function(rng)
    local list = {}
    for i = 1, 5 do
      local shape, nshape = norm_shapes(rng, i)
      local dtype = i == 2 and "float32" or "float64"
      local g, x = t_of(rng, shape, dtype), t_of(rng, shape, dtype)
      local s = {nshape = nshape, eps = 1e-5, w = i ~= 5, rms = rng.int(1, 2) == 1}
      local ins = {i == 3 and noncontig(g) or g, i == 3 and noncontig(x) or x}
      if s.w then ins[3] = t_of(rng, nshape, dtype) end
      list[#list + 1] = {inputs = ins, static = s, label = "case " .. i .. (s.rms and " rms" or "")}
    end
    return list
  end,
  run = function(i, s) return dt._layer_norm_backward(i[1], i[2], s.w and i[3] or nil, s.nshape, s.eps, s.rms) end,
  ref = function(i, s)
    local g, x, w = ref_of(i[1]), ref_of(i[2]), s.w and ref_of(i[3]) or nil
    local inner = 1
    for _, d in ipairs(s.nshape) do inner = inner * d end
    local dx, dw, db = {shape = x.shape, data = {}}, {shape = s.nshape, data = {}}, {shape = s.nshape, data = {}}
    for j = 1, inner do dw.data[j], db.data[j] = 0, 0 end
    for r = 0, (inner > 0 and #x.data // inner or 0) - 1 do -- a 0-size normalized shape: no rows
      local m, v = 0, 0
      for j = 1, inner do m = m + x.data[r * inner + j] end
      m = s.rms and 0 or m / inner
      for j = 1, inner do v = v + (x.data[r * inner + j] - m) ^ 2 end
      local rstd = 1 / math.sqrt(v / inner + s.eps)
      local xh, gy, a, b = {}, {}, 0, 0
      for j = 1, inner do
        xh[j] = (x.data[r * inner + j] - m) * rstd
        gy[j] = g.data[r * inner + j] * (w and w.data[j] or 1)
        a, b = a + gy[j] / inner, b + gy[j] * xh[j] / inner
      end
      for j = 1, inner do
        dx.data[r * inner + j] = rstd * (gy[j] - (s.rms and 0 or a) - xh[j] * b)
        dw.data[j] = dw.data[j] + g.data[r * inner + j] * xh[j]
        db.data[j] = db.data[j] + g.data[r * inner + j]
      end
    end
    return {dx, dw, db}
  end,
  tol = 1e-10,
  nondiff = "the fused backward of layer_norm and rms_norm, called by their rules: no second derivative",
}

-- ---------------------------------------------------------------- gradients
-- Rows whose backward column is `none`, and why (op_table_spec.lua's grad column; every other
-- row's gradient is checked against finite differences, tests/spec/support/grad_check.lua).
local nondiff = {
  empty = "a factory: no tensor input", full = "a factory: no tensor input", arange = "a factory: no tensor input",
  eye = "a factory: no tensor input", rand = "a random factory: no tensor input",
  randn = "a random factory: no tensor input", randint = "a random factory with an integer result",
  randperm = "a random factory with an integer result",
  eq = "a bool result", ne = "a bool result", lt = "a bool result", le = "a bool result", gt = "a bool result",
  ge = "a bool result", equal = "a bool result", allclose = "a bool result",
  ids_to_zero_based = "an integer result (index values)",
  argmax = "an integer (index) result", argmin = "an integer (index) result",
  multinomial = "integer samples: no gradient with respect to the weights (as torch)",
  bernoulli = "a draw: piecewise constant in the probabilities (torch gives no gradient either)",
}
for name, why in pairs(nondiff) do ops[name].nondiff = why end

-- cases for the gradient only, where the row's first cases miss a form
local function grad_list(rng, shape_lists, static)
  local list = {}
  for k, shapes in ipairs(shape_lists) do
    local ins, lab = {}, {}
    for j, s in ipairs(shapes) do
      ins[j] = t_of(rng, s)
      if k == #shape_lists then ins[j] = noncontig(ins[j]) end
      lab[j] = "{" .. table.concat(s, ",") .. "}"
    end
    list[k] = {inputs = ins, static = static and static(k) or {}, label = table.concat(lab, " x ")}
  end
  return list
end
-- cat beside 1-d empty tensors, which it skips (they take no gradient; dims count from the
-- first tensor it keeps)
ops.cat.grad_cases = function(rng)
  local list = {}
  for k, c in ipairs(ops.cat.cases(rng)) do if k <= 3 then list[#list + 1] = c end end
  list[#list + 1] = {inputs = {t_of(rng, {0}), t_of(rng, {2, 3}), t_of(rng, {0}), t_of(rng, {1, 3})}, static = {dim = 1},
                     label = "1-d empty tensors skipped"}
  return list
end
-- t[k] = v with v broadcast to the region (its gradient sums over the broadcast dims)
ops.index_put_.grad_cases = function(rng)
  local list = {}
  for k, c in ipairs(ops.index_put_.cases(rng)) do if k <= 2 then list[#list + 1] = c end end
  local more = {
    {{3, 4}, {{}, {1, 4, 2}}, {2}}, {{3, 4}, {2}, {1}}, {{2, 3, 4}, {{1, 2}, 2, {}}, {1, 4}},
    {{3, 0}, {{}, {}}, {0}}, {{4, 3}, {{2, 4, 2}, {}}, {2, 1}},
  }
  for j, m in ipairs(more) do
    local x = t_of(rng, m[1])
    list[#list + 1] = {inputs = {j == #more and noncontig(x) or x, t_of(rng, m[3])}, static = {key = m[2]},
                       label = "{" .. table.concat(m[3], ",") .. "} broadcast into {" .. table.concat(m[1], ",") .. "}"}
  end
  return list
end
-- layer_norm/rms_norm: every case (a 0-size batch included)
for _, name in ipairs {"layer_norm", "rms_norm"} do ops[name].grad_cases = function(rng) return ops[name].cases(rng) end end
-- cross_entropy: each reduction, ignore_index (a class id too), spatial dims [n, c, d], 1-d
-- logits with a 0-d target, 0 samples
ops.cross_entropy.grad_cases = function(rng)
  local list = {}
  local function add(shape, tshape, targets, s, label)
    local x = t_of(rng, shape)
    list[#list + 1] = {inputs = {#list == 2 and noncontig(x) or x, make(targets, tshape, "int64")}, static = s, label = label}
  end
  add({4, 3}, {4}, {1, 3, 2, 3}, {reduction = "mean"}, "mean")
  add({4, 3}, {4}, {1, 3, -100, 3}, {reduction = "sum"}, "sum, one ignored")
  add({4, 3}, {4}, {2, 3, 2, 1}, {reduction = "mean", ignore = 2}, "mean, ignore_index = class 2")
  add({3, 4}, {3}, {4, 1, 2}, {reduction = "none", ignore = 1}, "none, ignore_index = class 1")
  add({2, 3, 2}, {2, 2}, {1, 3, 2, 2}, {reduction = "mean"}, "spatial [n, c, d]")
  add({2, 3, 2}, {2, 2}, {1, 3, 2, 2}, {reduction = "none"}, "spatial, none")
  add({4}, {}, {3}, {reduction = "mean"}, "1-d logits")
  add({0, 3}, {0}, {}, {reduction = "sum"}, "0 samples")
  return list
end
-- sdpa: float and bool masks (broadcast), causal with L ~= S, scale, batch dims broadcast, 0-size
ops.scaled_dot_product_attention.grad_cases = function(rng)
  local list = {}
  local function add(q, k, v, s, mask, label)
    local ins = {t_of(rng, q), t_of(rng, k), t_of(rng, v), mask}
    if #list == 1 then ins[2] = noncontig(ins[2]) end
    list[#list + 1] = {inputs = ins, static = s, label = label}
  end
  add({2, 3, 2}, {2, 4, 2}, {2, 4, 3}, {}, nil, "plain")
  add({1, 3, 2}, {1, 3, 2}, {1, 3, 2}, {causal = true}, nil, "causal, non-contiguous k")
  add({2, 4, 2}, {2, 3, 2}, {2, 3, 1}, {causal = true, scale = 0.7}, nil, "causal L > S, scale")
  add({2, 2, 2}, {2, 4, 2}, {2, 4, 2}, {causal = true}, nil, "causal L < S")
  add({2, 3, 2}, {2, 4, 2}, {2, 4, 2}, {}, t_of(rng, {3, 4}), "float mask [L, S]")
  add({2, 2, 3, 2}, {3, 2}, {3, 2}, {}, t_of(rng, {2, 1, 1, 3}), "batch broadcast, float mask [2, 1, 1, S]")
  add({2, 3, 2}, {2, 4, 2}, {2, 4, 2}, {}, make({1, 0, 1, 1, 0, 1, 0, 0, 1, 1, 1, 0}, {3, 4}, "bool"), "bool mask")
  add({2, 0, 2}, {2, 3, 2}, {2, 3, 2}, {}, nil, "L = 0")
  add({2, 3, 2}, {2, 0, 2}, {2, 0, 2}, {}, nil, "S = 0")
  return list
end
-- index_select: repeated indices (their gradients add up), a 0-d index, a 0-d tensor
ops.index_select.grad_cases = function(rng)
  local list = {}
  for k, c in ipairs(ops.index_select.cases(rng)) do if k <= 3 then list[#list + 1] = c end end
  list[#list + 1] = {inputs = {t_of(rng, {3, 2}), make({2, 2, 1, 2}, {4}, "int64")}, static = {dim = 1}, label = "repeats"}
  list[#list + 1] = {inputs = {noncontig(t_of(rng, {3, 4})), make({3}, {}, "int64")}, static = {dim = 2}, label = "0-d index"}
  list[#list + 1] = {inputs = {t_of(rng, {}), make({1}, {1}, "int64")}, static = {dim = 1}, label = "0-d tensor"}
  return list
end
-- every PyTorch form: 1-d x 1-d, 1-d x N-d, N-d x 1-d, batch dims broadcast either way,
-- a batched a with a 2-d b (one flattened product), 0-size dims; the last non-contiguous
ops.matmul.grad_cases = function(rng)
  return grad_list(rng, {{{3}, {3}}, {{2, 3}, {3}}, {{3}, {3, 2}}, {{3}, {2, 3, 4}}, {{2, 2, 3}, {3}},
    {{2, 1, 2, 3}, {2, 3, 2}}, {{2, 3, 2}, {2, 2}}, {{2, 3}, {2, 3, 2}}, {{2, 0}, {0, 3}}, {{0, 2, 3}, {3, 2}},
    {{2, 3, 1}, {1, 2}}, {{2, 2, 3}, {2, 3, 2}}})
end

-- ---------------------------------------------------------------- comparing
-- ---------------------------------------------------------------- gradient forms
-- The gradient check takes a row's first three small cases (grad_check.lua); these rows have
-- forms further down their list (a number operand, another approximation or order) whose
-- rules differ, so their gradient cases add them.
local function small(c)
  for _, x in ipairs(c.inputs) do if dt.is_tensor(x) and x:numel() > 64 then return false end end
  return true
end
local function grad_also(name, extra)
  local e = ops[name]
  e.grad_cases = function(rng)
    local list = {}
    for _, c in ipairs(e.cases(rng)) do
      if small(c) and (#list < 3 or extra(c)) then list[#list + 1] = c end
    end
    return list
  end
end
for _, name in ipairs {"div", "pow", "remainder", "add_", "mul_"} do
  grad_also(name, function(c) return c.static.form ~= "tt" end)
end
grad_also("where", function(c) return c.static.scalar ~= nil end)
-- every variant of the static args, on a small float64 tensor (kind: see t_of)
local function grad_variants(name, variants, kind)
  ops[name].grad_cases = function(rng)
    local list = {}
    for k, s in ipairs(variants) do
      local x = t_of(rng, {3, 4}, "float64", kind)
      if k % 2 == 0 then x = noncontig(x) end
      list[#list + 1] = {inputs = {x}, static = s, label = name .. " variant " .. k}
    end
    list[#list + 1] = {inputs = {t_of(rng, {0, 3})}, static = variants[1], label = "0-size"}
    return list
  end
end
grad_variants("gelu", {{tanh = false}, {tanh = true}})
grad_variants("clamp", {{lo = -1}, {hi = 0.5}, {lo = -0.75, hi = 1.25}, {lo = 1, hi = -1}})
do -- norm: every branch of the rule, over one dim and over all dims (no zeros: |x|^(p-1))
  local v = {}
  for _, p in ipairs {0, 0.5, 1, 1.5, 2, 3, math.huge, -math.huge} do
    v[#v + 1] = {p = p, dim = 2, keep = #v % 4 == 0}
    v[#v + 1] = {p = p}
  end
  grad_variants("norm", v, "nonzero")
end

-- ---------------------------------------------------------------- the math family
-- (op_list.h's last block: rounding and sign, erf, the floating-point tests, nan_to_num, lerp,
-- addcmul/addcdiv, masked_fill_, logsumexp, all/any, the scans, var_mean)
local function round_half_even(v)
  local f = math.floor(v)
  local d = v - f
  if d ~= 0.5 then return d > 0.5 and f + 1 or f end
  return f % 2 == 0 and f or f + 1
end
local function round_ref(v, d) -- torch's decimals: scaled by 10^|d| first
  if not d or d == 0 then return round_half_even(v) end
  local t = 10.0 ^ math.abs(d)
  return d > 0 and round_half_even(v * t) / t or round_half_even(v / t) * t
end
local function sign_of(v) return v > 0 and 1 or v < 0 and -1 or v end
local with_ints = {dtypes = {"float64", "float32", "float64", "int64"}, tol = 0}
ops.floor = unary(function(x) return x:floor() end, math.floor, with_ints)
ops.ceil = unary(function(x) return x:ceil() end, math.ceil, with_ints)
ops.trunc = unary(function(x) return x:trunc() end, function(v) return v >= 0 and math.floor(v) or math.ceil(v) end, with_ints)
ops.sign = unary(function(x) return x:sign() end, sign_of, with_ints)
ops.round = unary(function(x, s) return s.decimals and x:round(s.decimals) or x:round() end,
  function(v, s) return round_ref(v, s.decimals) end,
  {tol = 1e-15, static = function(rng) local d = rng.int(-1, 2) return {decimals = d ~= 0 and d or nil} end})
ops.erf = unary(function(x) return x:erf() end, erf, {dtypes = {"float64", "float32", "float64", "int64"}, tol = 1e-11})
-- piecewise constant: the gradient (zeros) is checked off the kinks (values k/4 + 1/8)
for _, name in ipairs {"floor", "ceil", "trunc", "sign", "round"} do
  ops[name].grad_cases = function(rng)
    local list = {}
    for k, s in ipairs {{}, {decimals = -1}, {}} do
      local x = t_of(rng, {3, 4}) + 0.125
      list[#list + 1] = {inputs = {k == 3 and noncontig(x) or x}, static = name == "round" and s or {}, label = "off the kinks " .. k}
    end
    return list
  end
end

-- values with NaN and infinities among the quarters (float dtypes; integers have none)
local specials = {0 / 0, math.huge, -math.huge}
local function with_specials(rng, shape, dtype)
  local x = t_of(rng, shape, dtype)
  if not dtype:match("float") then return x end
  local v = vals(x)
  for k = 1, #v do if rng.int(1, 3) == 1 then v[k] = specials[rng.int(1, 3)] end end
  return make(v, shape, dtype)
end
local function special_cases(rng, static)
  local list = {}
  for i, dtype in ipairs {"float64", "float32", "float64", "float64", "int64"} do
    local x = with_specials(rng, rand_shape(rng, rng.int(1, 3), i == 4 and 0 or 1), dtype)
    list[#list + 1] = {inputs = {i == 3 and noncontig(x) or x}, static = static and static(rng) or {},
                       label = dtype .. (i == 3 and " non-contiguous" or "") .. (i == 4 and " 0-size allowed" or "")}
  end
  return list
end
local function float_test(method, fn)
  return {
    family = "pointwise", exact = true, tol = 0,
    nondiff = "a bool result",
    cases = special_cases,
    run = function(i) return method(i[1]) end,
    ref = function(i)
      local x = ref_of(i[1])
      local d = {}
      for k, v in ipairs(x.data) do d[k] = fn(v) and 1 or 0 end
      return {shape = x.shape, data = d}
    end,
  }
end
ops.isnan = float_test(function(x) return x:isnan() end, function(v) return v ~= v end)
ops.isinf = float_test(function(x) return x:isinf() end, function(v) return v == math.huge or v == -math.huge end)
ops.isfinite = float_test(function(x) return x:isfinite() end, function(v) return v == v and v ~= math.huge and v ~= -math.huge end)

local finite_max = {float64 = 1.7976931348623157e308, float32 = 3.4028234663852886e38}
ops.nan_to_num = {
  family = "pointwise", exact = true, tol = 0,
  cases = function(rng)
    return special_cases(rng, function(r)
      local s = {}
      if r.int(1, 2) == 1 then s.nan = r.int(-8, 8) / 4 end
      if r.int(1, 2) == 1 then s.posinf = r.int(8, 40) / 4 end
      if r.int(1, 2) == 1 then s.neginf = -r.int(8, 40) / 4 end
      return s
    end)
  end,
  run = function(i, s) return i[1]:nan_to_num({nan = s.nan, posinf = s.posinf, neginf = s.neginf}) end,
  ref = function(i, s)
    local x = ref_of(i[1])
    local m = finite_max[i[1].dtype] or 0
    local d = {}
    for k, v in ipairs(x.data) do
      if v ~= v then v = s.nan or 0 elseif v == math.huge then v = s.posinf or m elseif v == -math.huge then v = s.neginf or -m end
      d[k] = v
    end
    return {shape = x.shape, data = d}
  end,
  -- finite replacements, so that the loss stays finite
  grad_cases = function(rng)
    local list = {}
    for k = 1, 3 do
      local x = with_specials(rng, {3, 4}, "float64")
      list[#list + 1] = {inputs = {k == 2 and noncontig(x) or x}, static = {nan = 0.5, posinf = 7, neginf = -7}, label = "case " .. k}
    end
    return list
  end,
}

local function lerp_ref(a, b, w)
  if math.abs(w) < 0.5 then return a + w * (b - a) end
  return b - (b - a) * (1 - w)
end
ops.lerp = {
  family = "pointwise",
  cases = function(rng)
    local list = {}
    for i = 1, 5 do
      local dtype = i == 2 and "float32" or "float64"
      local sa = rand_shape(rng, rng.int(1, 3), i == 4 and 0 or 1)
      local a, b = t_of(rng, sa, dtype), t_of(rng, broadcastable(rng, sa), dtype)
      local w = i == 5 and rng.int(-4, 8) / 4 or t_of(rng, broadcastable(rng, sa), dtype)
      if i == 3 then a, b = noncontig(a), noncontig(b) end
      list[#list + 1] = {inputs = i == 5 and {a, b} or {a, b, w}, static = {w = i == 5 and w or nil},
                         label = dtype .. (i == 5 and " number weight" or " tensor weight") .. (i == 3 and " non-contiguous" or "")}
    end
    return list
  end,
  run = function(i, s) return dt.lerp(i[1], i[2], s.w or i[3]) end,
  ref = function(i, s)
    local a, b = ref_of(i[1]), ref_of(i[2])
    local w = s.w and {shape = {}, data = {s.w}} or ref_of(i[3])
    return build(broadcast_shape(a.shape, b.shape, w.shape), function(c) return lerp_ref(at(a, c), at(b, c), at(w, c)) end)
  end,
}

local function addc(name, fn)
  return {
    family = "pointwise",
    cases = function(rng)
      local list = {}
      for i = 1, 5 do
        local dtype = ({"float64", "float32", "float64", "float64", "int64"})[i]
        if name == "addcdiv" and dtype == "int64" then dtype = "float64" end
        local sa = rand_shape(rng, rng.int(1, 3), i == 4 and 0 or 1)
        local x, t1 = t_of(rng, sa, dtype), t_of(rng, broadcastable(rng, sa), dtype)
        local t2 = t_of(rng, broadcastable(rng, sa), dtype, "nonzero")
        if i == 3 then x, t2 = noncontig(x), noncontig(t2) end
        local v = dtype == "int64" and rng.int(-3, 3) or rng.int(-8, 8) / 4
        list[#list + 1] = {inputs = {x, t1, t2}, static = {value = i ~= 1 and v or nil},
                           label = dtype .. (i == 3 and " non-contiguous" or "") .. (i == 1 and ", default value" or "")}
      end
      return list
    end,
    run = function(i, s) return dt[name](i[1], i[2], i[3], s.value and {value = s.value} or nil) end,
    ref = function(i, s)
      local x, a, b = ref_of(i[1]), ref_of(i[2]), ref_of(i[3])
      return build(broadcast_shape(x.shape, a.shape, b.shape), function(c) return fn(at(x, c), at(a, c), at(b, c), s.value or 1) end)
    end,
  }
end
ops.addcmul = addc("addcmul", function(x, a, b, v) return x + v * a * b end)
ops.addcdiv = addc("addcdiv", function(x, a, b, v) return x + v * a / b end)

ops.masked_fill_ = {
  family = "inplace", exact = true, tol = 0,
  cases = ops.masked_fill.cases,
  run = function(i, s) return i[1]:clone():masked_fill_(i[2], s.v) end,
  ref = ops.masked_fill.ref,
}

local function all_dims(x) local d = {} for k = 1, x:dim() do d[k] = k end return d end
local function lse(l)
  local m = -math.huge
  for _, v in ipairs(l) do if v > m then m = v end end
  if m == -math.huge then return m end
  local s = 0
  for _, v in ipairs(l) do s = s + math.exp(v - m) end
  return m + math.log(s)
end
ops.logsumexp = reduce(function(x, d, k) return x:logsumexp(d, k) end, function(x) return x:logsumexp(all_dims(x)) end, lse)

-- all/any on 0/1 values of the input's dtype with both answers likely (x >= -2 for all, x >= 2
-- for any), and on a bool tensor
local function logic(name, fn, cut)
  local e = reduce(function(x, d, k) return x[name](x, d, k) end, function(x) return x[name](x) end,
                   function(l) return fn(l) and 1 or 0 end, {tol = 0})
  local base = e.cases
  e.cases = function(rng)
    local list = base(rng)
    for _, c in ipairs(list) do c.inputs[1] = c.inputs[1]:ge(cut):to(c.inputs[1].dtype) end
    local x = t_of(rng, {3, 4}):ge(cut)
    list[#list + 1] = {inputs = {x}, static = {dim = 2, keep = false}, label = "bool, dim 2"}
    return list
  end
  e.exact, e.nondiff = true, "a bool result"
  return e
end
ops.all = logic("all", function(l) for _, v in ipairs(l) do if v == 0 then return false end end return true end, -2)
ops.any = logic("any", function(l) for _, v in ipairs(l) do if v ~= 0 then return true end end return false end, 2)

local function scan(name, fn)
  return {
    family = "reduce",
    cases = function(rng)
      local list = {}
      for i = 1, 5 do
        local nd = rng.int(1, 3)
        local dtype = ({"float64", "float32", "float64", "float64", "int64"})[i]
        local x = t_of(rng, rand_shape(rng, nd, i == 4 and 0 or 1), dtype)
        if i == 3 then x = noncontig(x) end
        list[#list + 1] = {inputs = {x}, static = {dim = rng.int(1, nd), dtype = i == 1 and "float32" or nil},
                           label = dtype .. (i == 1 and " -> float32" or "") .. (i == 3 and " non-contiguous" or "")}
      end
      list[#list + 1] = {inputs = {make({1, 0, 1, 1}, {4}, "bool")}, static = {dim = 1}, label = "bool -> int64"}
      return list
    end,
    run = function(i, s) return i[1][name](i[1], s.dim, s.dtype and {dtype = s.dtype} or nil) end,
    ref = function(i, s)
      return along(ref_of(i[1]), s.dim, function(l)
        local r, acc = {}, name == "cumsum" and 0 or 1
        for k, v in ipairs(l) do acc = fn(acc, v) r[k] = acc end
        return r
      end)
    end,
  }
end
ops.cumsum = scan("cumsum", function(a, v) return a + v end)
ops.cumprod = scan("cumprod", function(a, v) return a * v end)
-- cumprod is a polynomial (no kinks): exact zeros, none, one or several, without jitter
ops.cumprod.grad_jitter = false
ops.cumprod.grad_cases = function(rng)
  local list = {}
  for k, v in ipairs {{0.5, -1.25, 2, 0.75}, {0, 1.5, -2, 0.5}, {1.5, 0, -0.5, 0}, {0, 0, 2, 3}, {2, -1, 1.5, 0}} do
    list[#list + 1] = {inputs = {make(v, {4})}, static = {dim = 1}, label = "zeros " .. k}
  end
  local x = t_of(rng, {3, 4})
  list[#list + 1] = {inputs = {noncontig(x)}, static = {dim = 2}, label = "2-d, dim 2"}
  list[#list + 1] = {inputs = {x}, static = {dim = 1}, label = "2-d, dim 1"}
  return list
end

ops.var_mean = reduce(function(x, d, k, c) return x:var_mean(d, {keepdim = k, correction = c}) end,
                      function(x, c) return x:var_mean(nil, {correction = c}) end,
                      {function(l, c) return R.var(c)(l) end, function(l) return R.mean(l) end},
                      {static = corr, nout = 2})

-- Asserts got (a tensor) equals the reference {shape, data} within tol (relative; nan == nan).
function M.check_ref(got, want, tol, what)
  assert.are.same(want.shape, got:size(), what .. ": shape")
  local g = vals(got)
  assert.are.equal(#want.data, #g, what .. ": element count")
  for k = 1, #g do
    local a, b = g[k], want.data[k]
    if b ~= b then
      assert.is_true(a ~= a, what .. ": element " .. k .. " is " .. tostring(a) .. ", expected nan")
    elseif b == math.huge or b == -math.huge then
      assert.are.equal(b, a, what .. ": element " .. k)
    else
      local err = math.abs(a - b)
      assert.is_true(err <= tol * math.max(1, math.abs(b)),
        string.format("%s: element %d is %.17g, expected %.17g (tolerance %g)", what, k, a, b, tol))
    end
  end
end

-- The tolerance of an entry for a result of this dtype.
function M.tol(entry, dtype)
  if entry.tol then
    if entry.tol == 0 then return 0 end
    if dtype == "float32" then return math.max(entry.tol, 1e-5) end
    return entry.tol
  end
  return dtype == "float32" and 1e-5 or 1e-12
end

-- ---------------------------------------------------------------- fused training-step ops
-- adam_step_(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq?): Adam/AdamW's update of
-- lua/dtensor/optim/adam.lua, written out in plain Lua (optim_spec.lua checks it bitwise
-- against the composed ops)
local function adam_ref(i, s)
  local p, g, m, v = ref_of(i[1]), ref_of(i[2]), ref_of(i[3]), ref_of(i[4])
  local vmax = s.amsgrad and ref_of(i[5]) or nil
  local out = {shape = p.shape, data = {}}
  for j = 1, #p.data do
    local gj, pj = s.maximize and -g.data[j] or g.data[j], p.data[j]
    if s.decoupled then pj = pj * s.decay elseif s.decay ~= 0 then gj = gj + s.decay * pj end
    local mj = m.data[j] + (1 - s.beta1) * (gj - m.data[j])
    local vj = v.data[j] * s.beta2 + (1 - s.beta2) * gj * gj
    local second = vmax and math.max(vmax.data[j], vj) or vj
    out.data[j] = pj - s.step_size * mj / (math.sqrt(second) / s.bc2 + s.eps)
  end
  return out
end
ops.adam_step_ = {
  family = "inplace",
  refuses = {P = "adam_step_: an in-place op keeps its input's placements (Partial(sum))"},
  cases = function(rng)
    local list = {}
    for i = 1, 5 do
      local dtype = i == 2 and "float32" or "float64"
      local shape = rand_shape(rng, rng.int(1, 3), i == 4 and 0 or 1)
      local ins = {t_of(rng, shape, dtype), t_of(rng, shape, dtype), t_of(rng, shape, dtype), t_of(rng, shape, dtype, "positive")}
      local step = rng.int(1, 20)
      local s = {beta1 = 0.9, beta2 = 0.999, eps = 1e-8, decoupled = i % 2 == 1, maximize = i == 3, amsgrad = i >= 4}
      local lr, wd = 0.01 * rng.int(1, 4), i == 2 and 0 or 0.1
      s.step_size, s.bc2 = lr / (1 - s.beta1 ^ step), math.sqrt(1 - s.beta2 ^ step)
      s.decay = s.decoupled and 1 - lr * wd or wd
      if s.amsgrad then ins[5] = t_of(rng, shape, dtype, "positive") end
      list[#list + 1] = {inputs = ins, static = s, label = dtype .. " case " .. i .. (s.amsgrad and " amsgrad" or "")}
    end
    return list
  end,
  run = function(i, s)
    local p = i[1]:clone()
    dt._adam_step_(p, i[2], i[3]:clone(), i[4]:clone(), s.amsgrad and i[5]:clone() or nil, s.step_size, s.bc2, s.beta1,
                   s.beta2, s.eps, s.decay, s.decoupled, s.maximize)
    return p
  end,
  ref = adam_ref,
  tol = 1e-12,
  nondiff = "the optimizer's update: runs under no_grad, no gradient",
}

-- cross_entropy_backward(grad, logits, target): (softmax(logits) - onehot(target)) * w along
-- the class dim, w = grad (/ the count of targets not ignored for mean), 0 where ignored
ops.cross_entropy_backward = {
  family = "nn",
  dist = false, dist_reason = "LOCAL_ONLY like cross_entropy: on DTensors F.cross_entropy is composed in Lua",
  cases = function(rng)
    local list = {}
    for i = 1, 5 do
      local n, c, d = rng.int(i == 5 and 0 or 1, 4), rng.int(2, 5), i == 3 and rng.int(1, 3) or nil
      local shape, tshape = d and {n, c, d} or {n, c}, d and {n, d} or {n}
      local t = {}
      for k = 1, numel(tshape) do t[k] = rng.int(1, c) end
      if i == 2 and #t > 0 then t[1] = -100 end
      local s = {reduction = ({"mean", "sum", "none", "mean", "none"})[i], ignore = i == 4 and 2 or -100, d = d}
      local dtype = i == 2 and "float32" or "float64"
      local x = t_of(rng, shape, dtype)
      local g = t_of(rng, s.reduction == "none" and tshape or {}, dtype)
      list[#list + 1] = {inputs = {g, i == 4 and noncontig(x) or x, make(t, tshape, "int64")}, static = s,
                         label = dtype .. " " .. s.reduction .. " case " .. i}
    end
    return list
  end,
  run = function(i, s) return dt._cross_entropy_backward(i[1], i[2], i[3], s.ignore, s.reduction) end,
  ref = function(i, s)
    local g, x, t = ref_of(i[1]), ref_of(i[2]), ref_of(i[3])
    local n, c, inner = x.shape[1], x.shape[2], s.d or 1
    local cnt = 0
    for _, v in ipairs(t.data) do if v ~= s.ignore then cnt = cnt + 1 end end
    local out = {shape = x.shape, data = {}}
    for r = 0, n - 1 do
      for p = 1, inner do
        local row = {}
        for j = 1, c do row[j] = x.data[(r * c + j - 1) * inner + p] end
        local sm, tg = softmax_list(row), t.data[r * inner + p]
        local w = s.reduction == "none" and g.data[r * inner + p] or s.reduction == "mean" and g.data[1] / cnt or g.data[1]
        if tg == s.ignore then w = 0 end
        for j = 1, c do out.data[(r * c + j - 1) * inner + p] = (sm[j] - (j == tg and 1 or 0)) * w end
      end
    end
    return out
  end,
  nondiff = "the fused backward of cross_entropy, called by its rule: no second derivative",
}

-- sdpa_backward(grad, q, k, v, mask?) -> dq, dk, dv, from the formulas in plain Lua: P =
-- softmax(scale q k^T + mask), dv = P^T g, dS = P (g v^T - rowsum(g v^T * P)), dq = scale dS k,
-- dk = scale dS^T q
ops.sdpa_backward = {
  family = "nn",
  cases = function(rng)
    local list = {}
    for i = 1, 5 do
      local b, L, S, E, Ev = rng.int(1, 2), rng.int(1, 4), rng.int(1, 4), rng.int(1, 4), rng.int(1, 3)
      if i == 2 then S = L end
      if i == 5 then L = 0 end
      local dtype = i == 4 and "float32" or "float64"
      local q, k, v = t_of(rng, {b, L, E}, dtype), t_of(rng, {b, S, E}, dtype), t_of(rng, {b, S, Ev}, dtype)
      local ins = {t_of(rng, {b, L, Ev}, dtype), q, i == 3 and noncontig(k) or k, v}
      local st = {causal = i == 2 or i == 4, scale = i == 3 and 0.75 or nil}
      if i == 1 then -- a bool mask broadcast over the batch, each row keeping its first key
        local m = {}
        for l = 1, L do for j = 1, S do m[#m + 1] = (j == 1 or rng.int(0, 1) == 1) and 1 or 0 end end
        ins[5] = make(m, {L, S}, "int64"):ne(0)
      end
      list[#list + 1] = {inputs = ins, static = st, label = dtype .. " case " .. i .. (st.causal and " causal" or "")}
    end
    return list
  end,
  run = function(i, s) return dt._sdpa_backward(i[1], i[2], i[3], i[4], i[5], s.causal, s.scale) end,
  ref = function(i, s)
    local g, q, k, v = ref_of(i[1]), ref_of(i[2]), ref_of(i[3]), ref_of(i[4])
    local mask = i[5] and ref_of(i[5]) or nil
    local B, L, E = table.unpack(q.shape)
    local S, Ev = k.shape[2], v.shape[3]
    local scale = s.scale or 1 / math.sqrt(E)
    local dq, dk, dv = {shape = q.shape, data = {}}, {shape = k.shape, data = {}}, {shape = v.shape, data = {}}
    for j = 1, #q.data do dq.data[j] = 0 end
    for j = 1, #k.data do dk.data[j] = 0 end
    for j = 1, #v.data do dv.data[j] = 0 end
    local function at(t, b, r, c, n, w) return t.data[((b - 1) * n + r - 1) * w + c] end
    for b = 1, B do
      for l = 1, L do
        local sc = {}
        for j = 1, S do
          local d = 0
          for e = 1, E do d = d + at(q, b, l, e, L, E) * at(k, b, j, e, S, E) end
          local off = (s.causal and j > l) or (mask and mask.data[(l - 1) * S + j] == 0)
          sc[j] = off and -math.huge or d * scale
        end
        local p, dp, rs = softmax_list(sc), {}, 0
        for j = 1, S do
          dp[j] = 0
          for e = 1, Ev do
            dp[j] = dp[j] + at(g, b, l, e, L, Ev) * at(v, b, j, e, S, Ev)
            local o = ((b - 1) * S + j - 1) * Ev + e
            dv.data[o] = dv.data[o] + p[j] * at(g, b, l, e, L, Ev)
          end
          rs = rs + dp[j] * p[j]
        end
        for j = 1, S do
          local ds = p[j] * (dp[j] - rs) * scale
          for e = 1, E do
            local oq, ok = ((b - 1) * L + l - 1) * E + e, ((b - 1) * S + j - 1) * E + e
            dq.data[oq] = dq.data[oq] + ds * at(k, b, j, e, S, E)
            dk.data[ok] = dk.data[ok] + ds * at(q, b, l, e, L, E)
          end
        end
      end
    end
    return {dq, dk, dv}
  end,
  tol = 1e-10,
  nondiff = "the fused backward of scaled_dot_product_attention, called by its rule: no second derivative",
}

-- softmax_backward(grad, y, dim) = y (grad - sum(grad y)) and log_softmax_backward(grad, y,
-- dim) = grad - exp(y) sum(grad) along dim (y any values: the formulas hold for any)
for _, name in ipairs {"softmax_backward", "log_softmax_backward"} do
  local log = name == "log_softmax_backward"
  ops[name] = {
    family = "softmax",
    cases = function(rng)
      local list = {}
      for i = 1, 5 do
        local nd = rng.int(1, 3)
        local dtype = i == 2 and "float32" or "float64"
        local shape = rand_shape(rng, nd, i == 4 and 0 or 1)
        local g, y = t_of(rng, shape, dtype), t_of(rng, shape, dtype)
        if i == 3 then g, y = noncontig(g), noncontig(y) end
        list[#list + 1] = {inputs = {g, y}, static = {dim = i == 5 and nd or rng.int(1, nd)}, label = dtype .. " case " .. i}
      end
      return list
    end,
    run = function(i, s) return dt._softmax_backward(i[1], i[2], s.dim, log) end,
    ref = function(i, s)
      local g, y = ref_of(i[1]), ref_of(i[2])
      local both = {shape = g.shape, data = {}}
      for k = 1, #g.data do both.data[k] = {g.data[k], y.data[k]} end
      local r = along(both, s.dim, function(l)
        local sum, out = 0, {}
        for _, p in ipairs(l) do sum = sum + (log and p[1] or p[1] * p[2]) end
        for k, p in ipairs(l) do out[k] = log and p[1] - math.exp(p[2]) * sum or p[2] * (p[1] - sum) end
        return out
      end)
      return r
    end,
    tol = 1e-11,
    nondiff = "the fused backward of " .. (log and "log_softmax" or "softmax") .. ", called by its rule: no second derivative",
  }
end

-- The rows of the table without an entry here, and the entries without a row.
function M.missing()
  local rows, missing, extra = {}, {}, {}
  for _, r in ipairs(dt._op_rows()) do
    rows[r.name] = true
    if not ops[r.name] then missing[#missing + 1] = r.name end
  end
  for name in pairs(ops) do if not rows[name] then extra[#extra + 1] = name end end
  table.sort(extra)
  return missing, extra
end

-- Asserts that every row of the table has an entry here and every entry a row.
function M.assert_complete()
  local missing, extra = M.missing()
  assert(#missing == 0, "rows of src/ops/op_list.h without a case in tests/spec/support/op_cases.lua: " ..
    table.concat(missing, ", "))
  assert(#extra == 0, "cases without a row in src/ops/op_list.h: " .. table.concat(extra, ", "))
end

return M
