-- dt.nn.init: PyTorch's torch.nn.init.  Every function fills its tensor in place under
-- dt.no_grad and returns it; the numbers are the same whatever the tensor's mesh and
-- placements, because they come from the random ops (uniform_, normal_, rand), which draw
-- on DTensors bit for bit what they draw on one device (doc/random.md), and from pointwise
-- ops, which compute each element alike wherever it lives.  Fans are read from the global
-- shape.  This file returns {nn = {init = {...}}}.
local core = require "dtensor.core"
local ops = require("dtensor.dtensor_ops").module -- empty_like on DTensors
local C = require "dtensor.nn.checks"
local fail = C.fail

local init = {}

local function check_tensor(op, t)
  if not core.is_tensor(t) then fail(op .. ": expected a tensor, got " .. C.type_name(t)) end
  if not C.is_float_tensor(t) then fail(op .. ": expected a floating-point tensor, got " .. t.dtype) end
end

local function number(op, what, v, default)
  if v == nil then return default end
  if type(v) ~= "number" then fail(op .. ": " .. what .. " must be a number, got " .. C.type_name(v)) end
  return v
end

-- ---- writing values into any placements ----

-- true when t is a DTensor with a Partial placement (in-place ops refuse those: the value
-- is written into the local shards instead)
local function has_partial(t)
  if not core.is_dtensor(t) then return false end
  for _, p in ipairs(t.placements) do
    if p:is_partial() then return true end
  end
  return false
end

-- What this rank's local part of the Partial DTensor t holds: nil for the value itself, or
-- the identity that stands in for it: 0 off coordinate 0 of any Partial(sum) mesh dim, else 1
-- off coordinate 0 of a Partial(product) one; avg, max and min hold the value anywhere.
local function identity_here(t)
  local coord = t.device_mesh:get_coordinate()
  if not coord then return 0 end
  local product = false
  for m, p in ipairs(t.placements) do
    if p:is_partial() and coord[m] ~= 0 then
      if p.reduce_op == "sum" then return 0 end
      if p.reduce_op == "product" then product = true end
    end
  end
  return product and 1 or nil
end

-- t's values := v (a number, or a tensor whose values t takes: for a DTensor t, a DTensor
-- with t's placements, Partial ones Replicate), so that t stands for them on any placements
local function write(t, v)
  if not has_partial(t) then
    if type(v) == "number" then t:fill_(v) else t:copy_(v) end
    return t
  end
  local lt = t:to_local()
  local id = identity_here(t)
  if id then lt:fill_(id)
  elseif type(v) == "number" then lt:fill_(v)
  else lt:copy_(v:to_local()) end
  return t
end

-- runs fill(t) with grad mode off; returns t
local function in_place(t, fill)
  local _ <close> = core.no_grad()
  fill(t)
  return t
end

-- ---- gains and fans ----

local LINEAR_GAIN = {linear = true, identity = true, sigmoid = true, conv1d = true, conv2d = true, conv3d = true,
                     conv_transpose1d = true, conv_transpose2d = true, conv_transpose3d = true}

-- The recommended gain of a nonlinearity (torch.nn.init.calculate_gain).
function init.calculate_gain(nonlinearity, param)
  if LINEAR_GAIN[nonlinearity] then return 1 end
  if nonlinearity == "tanh" then return 5 / 3 end
  if nonlinearity == "relu" then return math.sqrt(2) end
  if nonlinearity == "selu" then return 3 / 4 end
  if nonlinearity == "leaky_relu" then
    local slope = param
    if slope == nil then slope = 0.01 end
    if type(slope) ~= "number" then
      fail("calculate_gain: negative_slope " .. tostring(slope) .. " is not a valid number")
    end
    return math.sqrt(2 / (1 + slope * slope))
  end
  fail("calculate_gain: unsupported nonlinearity " .. tostring(nonlinearity))
end

-- fan_in, fan_out of a weight [out, in, kernel...] (global shape)
local function fans(op, t)
  local s = t:size()
  if #s < 2 then
    fail(op .. ": fan in and fan out can not be computed for a tensor with fewer than 2 dimensions, got shape [" ..
         table.concat(s, ", ") .. "]")
  end
  local receptive = 1
  for d = 3, #s do receptive = receptive * s[d] end
  return s[2] * receptive, s[1] * receptive
end

-- ---- the initialisers ----

function init.uniform_(t, a, b)
  check_tensor("uniform_", t)
  a, b = number("uniform_", "a", a, 0), number("uniform_", "b", b, 1)
  return in_place(t, function() t:uniform_(a, b) end)
end

function init.normal_(t, mean, std)
  check_tensor("normal_", t)
  mean, std = number("normal_", "mean", mean, 0), number("normal_", "std", std, 1)
  return in_place(t, function() t:normal_(mean, std) end)
end

function init.constant_(t, val)
  check_tensor("constant_", t)
  val = number("constant_", "val", val)
  if val == nil then fail("constant_: val must be a number, got nil") end
  return in_place(t, function() write(t, val) end)
end

function init.zeros_(t)
  check_tensor("zeros_", t)
  return in_place(t, function() write(t, 0) end)
end

function init.ones_(t)
  check_tensor("ones_", t)
  return in_place(t, function() write(t, 1) end)
end

-- torch's optional arguments, positionally or as an options table
local function args(op, t, given, names)
  if type(given[1]) == "table" then
    local opts = C.options(op, given[1], names.allowed)
    local out = {}
    for i, n in ipairs(names) do out[i] = opts[n] end
    return out
  end
  return given
end

local XAVIER = {"gain", allowed = {gain = true}}

function init.xavier_uniform_(t, ...)
  check_tensor("xavier_uniform_", t)
  local gain = number("xavier_uniform_", "gain", args("xavier_uniform_", t, {...}, XAVIER)[1], 1)
  local fan_in, fan_out = fans("xavier_uniform_", t)
  local bound = math.sqrt(3) * gain * math.sqrt(2 / (fan_in + fan_out))
  return in_place(t, function() t:uniform_(-bound, bound) end)
end

function init.xavier_normal_(t, ...)
  check_tensor("xavier_normal_", t)
  local gain = number("xavier_normal_", "gain", args("xavier_normal_", t, {...}, XAVIER)[1], 1)
  local fan_in, fan_out = fans("xavier_normal_", t)
  local std = gain * math.sqrt(2 / (fan_in + fan_out))
  return in_place(t, function() t:normal_(0, std) end)
end

local KAIMING = {"a", "mode", "nonlinearity", allowed = {a = true, mode = true, nonlinearity = true}}

-- the standard deviation kaiming_* aims for; nil for an empty tensor (a no-op, as torch)
local function kaiming_std(op, t, ...)
  local a, mode, nonlinearity = table.unpack(args(op, t, {...}, KAIMING), 1, 3)
  a = number(op, "a", a, 0)
  mode, nonlinearity = mode or "fan_in", nonlinearity or "leaky_relu"
  if mode ~= "fan_in" and mode ~= "fan_out" then
    fail(op .. ': mode must be "fan_in" or "fan_out", got ' .. tostring(mode))
  end
  if t:numel() == 0 then return nil end
  local fan_in, fan_out = fans(op, t)
  local fan = mode == "fan_in" and fan_in or fan_out
  return init.calculate_gain(nonlinearity, a) / math.sqrt(fan)
end

function init.kaiming_uniform_(t, ...)
  check_tensor("kaiming_uniform_", t)
  local std = kaiming_std("kaiming_uniform_", t, ...)
  if not std then return t end
  local bound = math.sqrt(3) * std
  return in_place(t, function() t:uniform_(-bound, bound) end)
end

function init.kaiming_normal_(t, ...)
  check_tensor("kaiming_normal_", t)
  local std = kaiming_std("kaiming_normal_", t, ...)
  if not std then return t end
  return in_place(t, function() t:normal_(0, std) end)
end

-- ---- trunc_normal_: torch's inverse-CDF method ----

-- Phi(x), the standard normal CDF of a number, to ~1e-15: a series of positive terms in the
-- middle, the continued fraction of Mills' ratio in the tails.
local function norm_cdf(x)
  if x == math.huge then return 1 end
  if x == -math.huge then return 0 end
  local pdf = math.exp(-x * x / 2) / math.sqrt(2 * math.pi)
  if math.abs(x) <= 3 then
    local term, sum, n = x, x, 0
    repeat
      n = n + 1
      term = term * x * x / (2 * n + 1)
      sum = sum + term
    until math.abs(term) <= 1e-17 * math.abs(sum)
    return 0.5 + pdf * sum
  end
  local z, f = math.abs(x), math.abs(x)
  for k = 200, 1, -1 do f = z + k / f end
  local tail = pdf / f -- 1 - Phi(|x|)
  return x < 0 and tail or 1 - tail
end
init._norm_cdf = norm_cdf -- for the tests

-- Acklam's rational approximation of the inverse normal CDF (relative error below 1.15e-9),
-- on a float64 tensor u of probabilities in (0, 1), with pointwise ops only.
local A = {-3.969683028665376e+01, 2.209460984245205e+02, -2.759285104469687e+02, 1.383577518672690e+02,
           -3.066479806614716e+01, 2.506628277459239e+00}
local B = {-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02, 6.680131188771972e+01,
           -1.328068155288572e+01, 1}
local CC = {-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00, -2.549732539343734e+00,
            4.374664141464968e+00, 2.938163982698783e+00}
local D = {7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00, 3.754408661907416e+00, 1}
local P_LOW = 0.02425

local function horner(coeffs, x)
  local p = x * coeffs[1] + coeffs[2]
  for i = 3, #coeffs do p = p * x + coeffs[i] end
  return p
end

local function norm_icdf(u)
  local q = u - 0.5
  local r = q * q
  local central = horner(A, r) * q / horner(B, r)
  local lower = u:lt(0.5)
  local m = core.where(lower, u, 1 - u):clamp(1e-300) -- the tail's probability (never 0: log)
  local s = (m:log() * -2):sqrt()
  local tail = horner(CC, s) / horner(D, s) -- the lower tail's quantile (negative)
  tail = core.where(lower, tail, -tail)
  return core.where(m:lt(P_LOW), tail, central)
end
init._norm_icdf = norm_icdf -- for the tests

-- Values from N(mean, std) truncated to [a, b]: u uniform in [Phi(alpha), Phi(beta)) (alpha,
-- beta: a and b standardised), then mean + std * Phi^-1(u), clamped to [a, b] (torch draws
-- uniform(2 Phi(alpha) - 1, 2 Phi(beta) - 1) and takes erfinv: the same transform).  u is
-- float64 (two generator words per element), with t's shape and placements.
function init.trunc_normal_(t, mean, std, a, b)
  check_tensor("trunc_normal_", t)
  mean, std = number("trunc_normal_", "mean", mean, 0), number("trunc_normal_", "std", std, 1)
  a, b = number("trunc_normal_", "a", a, -2), number("trunc_normal_", "b", b, 2)
  if not (std > 0) then fail("trunc_normal_: std must be positive, got " .. tostring(std)) end
  if not (a < b) then fail("trunc_normal_: a must be below b, got a = " .. tostring(a) .. ", b = " .. tostring(b)) end
  local lo, hi = norm_cdf((a - mean) / std), norm_cdf((b - mean) / std)
  return in_place(t, function()
    local u = core.is_dtensor(t) and ops.empty_like(t, {dtype = "float64"}) or core.empty(t:size(), {dtype = "float64"})
    u:uniform_(lo, hi)
    write(t, (norm_icdf(u) * std + mean):clamp(a, b))
  end)
end

return {nn = {init = init}}
