-- dt.nn.LayerNorm and dt.nn.RMSNorm (torch.nn.LayerNorm, torch.nn.RMSNorm) over the last
-- dims of their input (normalized_shape: an integer or a table).
--   LayerNorm(shape, {eps = 1e-5, elementwise_affine = true, bias = true, dtype}): weight ones,
--   bias zeros.
--   RMSNorm(shape, {eps = nil, elementwise_affine = true, dtype}): weight ones; eps nil is the
--   machine epsilon of the input's type (F.rms_norm, as torch's eps=None).
local core = require "dtensor.core"
local F = require "dtensor.nn.functional"
local Module = require("dtensor.nn.module").nn.Module
local C = require "dtensor.nn.checks"

-- the normalized shape as a list of positive integers
local function shape_list(op, shape)
  local list = type(shape) == "table" and shape or {shape}
  if #list == 0 then C.fail(op .. ": normalized_shape must not be empty") end
  local out = {}
  for i, s in ipairs(list) do out[i] = C.positive_int(op, "normalized_shape", s) end
  return out
end

local function shape_text(s) return "[" .. table.concat(s, ", ") .. "]" end

local function affine(self, op, opts, with_bias)
  local dtype = C.float_dtype(op, opts.dtype)
  self.elementwise_affine = opts.elementwise_affine ~= false
  if self.elementwise_affine then
    self:register_parameter("weight", core.ones(self.normalized_shape, {dtype = dtype}))
    if with_bias then self:register_parameter("bias", core.zeros(self.normalized_shape, {dtype = dtype})) end
  end
end

local LayerNorm = Module:extend("LayerNorm")
local layer_norm_options = {eps = true, elementwise_affine = true, bias = true, dtype = true}
function LayerNorm:init(normalized_shape, opts)
  opts = C.options("LayerNorm", opts, layer_norm_options)
  self.normalized_shape = shape_list("LayerNorm", normalized_shape)
  self.eps = opts.eps or 1e-5
  affine(self, "LayerNorm", opts, opts.bias ~= false)
end
function LayerNorm:forward(x) return F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps) end
function LayerNorm:extra_repr()
  return shape_text(self.normalized_shape) .. ", eps=" .. tostring(self.eps) .. ", elementwise_affine=" ..
         tostring(self.elementwise_affine)
end

local RMSNorm = Module:extend("RMSNorm")
local rms_norm_options = {eps = true, elementwise_affine = true, dtype = true}
function RMSNorm:init(normalized_shape, opts)
  opts = C.options("RMSNorm", opts, rms_norm_options)
  self.normalized_shape = shape_list("RMSNorm", normalized_shape)
  self.eps = opts.eps
  affine(self, "RMSNorm", opts, false)
end
function RMSNorm:forward(x) return F.rms_norm(x, self.normalized_shape, self.weight, self.eps) end
function RMSNorm:extra_repr()
  return shape_text(self.normalized_shape) .. ", eps=" .. tostring(self.eps) .. ", elementwise_affine=" ..
         tostring(self.elementwise_affine)
end

return {nn = {LayerNorm = LayerNorm, RMSNorm = RMSNorm}}
