-- The gradient check of the op-table spec: for a row with a backward rule, autograd's
-- gradient of L = sum_o sum(out_o * W_o) (W_o fixed random weights, float outputs only) with
-- respect to each floating input, against central finite differences of the same L in
-- float64.  The inputs are the row's cases (tests/spec/support/op_cases.lua) in float64,
-- jittered by up to +-0.05 so that no element sits on a kink (relu at 0, ties of max, clamp
-- bounds), non-contiguous layouts kept.
--
-- An entry of op_cases may set:
--   grad_cases(rng)  cases for the gradient only (default: the row's cases, up to 3 with at
--                    most 64 elements per input)
--   grad_wrt         which inputs to differentiate (default: every floating one)
--   grad_jitter      false: the values as the case made them
--   grad_tol         relative tolerance (default 1e-6)
--   nondiff          (rows without a backward rule) why the op has no gradient
local assert = require "luassert"
local M = {}

local H = 1e-6

local function is_float(t) return dt.is_tensor(t) and (t.dtype == "float64" or t.dtype == "float32") end

local function flat(t) return t:reshape(t:numel()):totable() end

-- x as float64 with values jittered (layout kept: a non-contiguous x gives a non-contiguous copy)
local function prepare(x, rng, jitter)
  local v = flat(x:to("float64"))
  if jitter then for k = 1, #v do v[k] = v[k] + (rng.int(-1000, 1000) / 1000) * 0.05 end end
  local c = dt.tensor(#v > 0 and v or {}, {dtype = "float64"}):reshape(x:size())
  if not x:is_contiguous() and x:dim() >= 2 then
    local nd = x:dim()
    c = c:transpose(1, nd):contiguous():transpose(1, nd)
  end
  return c
end

local function outputs(entry, inputs, static, seed)
  if seed then dt.manual_seed(seed) end
  return table.pack(entry.run(inputs, static))
end

-- L as a tensor (recorded when grad mode is on), or nil when no output is floating
local function loss(outs, weights)
  local L
  for j = 1, outs.n do
    local o = outs[j]
    if is_float(o) then
      weights[j] = weights[j] or dt.tensor(weights.make(o:numel())):reshape(o:size())
      local term = (o:to("float64") * weights[j]):sum()
      L = L and L + term or term
    end
  end
  return L
end

-- Checks one case; returns the number of inputs checked.
function M.check_case(entry, row, c, rng, what)
  local wrt = {}
  for i, x in ipairs(c.inputs) do
    if is_float(x) and (not entry.grad_wrt or entry.grad_wrt[i]) then wrt[i] = true end
  end
  if next(wrt) == nil then return 0 end
  local base = {}
  for i, x in ipairs(c.inputs) do
    base[i] = wrt[i] and prepare(x, rng, entry.grad_jitter ~= false) or x
  end
  local seed = entry.random and 4321 or nil
  local weights = {make = function(n)
    local w = {}
    for k = 1, n do w[k] = rng.int(-1000, 1000) / 1000 end
    return #w > 0 and w or {}
  end}
  -- inputs of an in-place row are written: it gets clones (their gradient flows to the leaf)
  local function feed(list)
    if not row.inplace then return list end
    local f = {}
    for i, x in ipairs(list) do f[i] = dt.is_tensor(x) and x:clone() or x end
    return f
  end
  -- autograd's gradient
  local leaves = {}
  for i, x in ipairs(base) do leaves[i] = wrt[i] and x:detach():requires_grad_() or x end
  local probe = outputs(entry, feed(leaves), c.static, seed)
  local L = loss(probe, weights)
  if not L then return 0 end
  if L.requires_grad then L:backward() end
  -- a float32 output (a cast down) rounds at 1e-7: a wider step and tolerance
  local step, tol = H, entry.grad_tol or 1e-6
  for j = 1, probe.n do
    if is_float(probe[j]) and probe[j].dtype ~= "float64" then step, tol = 1e-3, math.max(tol, 1e-3) end
  end
  -- finite differences, one element at a time
  local n = 0
  for i in pairs(wrt) do
    local x = base[i]
    local g = leaves[i].grad
    if g then
      assert.are.same(x:size(), g:size(), what .. ": the gradient of input " .. i .. " has the input's shape")
      assert.are.equal("float64", g.dtype, what .. ": the gradient of input " .. i .. " has the input's dtype")
    end
    local got = g and flat(g) or nil
    local v = flat(x)
    for k = 1, #v do
      local function at(delta)
        local vv = {table.unpack(v)}
        vv[k] = vv[k] + delta
        local inp = {}
        for j, y in ipairs(base) do inp[j] = y end
        inp[i] = dt.tensor(#vv > 0 and vv or {}, {dtype = "float64"}):reshape(x:size())
        return dt.no_grad(function() return loss(outputs(entry, feed(inp), c.static, seed), weights):item() end)
      end
      local fd = (at(step) - at(-step)) / (2 * step)
      local a = got and got[k] or 0
      assert.is_true(math.abs(a - fd) <= tol * math.max(1, math.abs(fd)),
        string.format("%s: d/d input %d element %d: autograd %.12g, finite differences %.12g", what, i, k, a, fd))
    end
    n = n + 1
  end
  return n
end

-- The cases a row's gradient is checked on.
function M.cases(entry, rng)
  if entry.grad_cases then return entry.grad_cases(rng) end
  local out = {}
  for _, c in ipairs(entry.cases(rng)) do
    local small = true
    for _, x in ipairs(c.inputs) do if dt.is_tensor(x) and x:numel() > 64 then small = false end end
    if small then out[#out + 1] = c end
    if #out == 3 then break end
  end
  return out
end

return M
