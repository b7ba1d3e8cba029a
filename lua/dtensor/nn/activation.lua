-- Activation modules (torch.nn's): ReLU, GELU(approximate = "none"), SiLU, Tanh, Sigmoid,
-- LeakyReLU(negative_slope = 0.01), Hardtanh(min_val = -1, max_val = 1), Softmax(dim),
-- LogSoftmax(dim).  Each forward is the tensor op (so DTensors go through the dispatcher);
-- none has parameters.
local Module = require("dtensor.nn.module").nn.Module
local C = require "dtensor.nn.checks"
local nn = {}

-- a class whose forward is x:method(...) with the instance's fields as arguments
local function activation(name, method, fields)
  local cls = Module:extend(name)
  fields = fields or {}
  function cls:forward(x)
    local args = {}
    for i, f in ipairs(fields) do args[i] = self[f] end
    return x[method](x, table.unpack(args, 1, #fields))
  end
  function cls:extra_repr()
    local parts = {}
    for i, f in ipairs(fields) do parts[i] = f .. "=" .. tostring(self[f]) end
    return table.concat(parts, ", ")
  end
  nn[name] = cls
  return cls
end

activation("ReLU", "relu")
activation("SiLU", "silu")
activation("Tanh", "tanh")
activation("Sigmoid", "sigmoid")

local function number(op, what, v, default)
  if v == nil then return default end
  if type(v) ~= "number" then C.fail(op .. ": " .. what .. " must be a number, got " .. C.type_name(v)) end
  return v
end

-- GELU("tanh") or GELU({approximate = "tanh"})
local GELU = activation("GELU", "gelu", {"approximate"})
local gelu_options = {approximate = true}
function GELU:init(approximate)
  if type(approximate) == "table" then approximate = C.options("GELU", approximate, gelu_options).approximate end
  approximate = approximate or "none"
  if approximate ~= "none" and approximate ~= "tanh" then
    C.fail('GELU: approximate must be "none" or "tanh", got ' .. tostring(approximate))
  end
  self.approximate = approximate
end

local LeakyReLU = activation("LeakyReLU", "leaky_relu", {"negative_slope"})
function LeakyReLU:init(negative_slope)
  self.negative_slope = number("LeakyReLU", "negative_slope", negative_slope, 0.01)
end

local Hardtanh = activation("Hardtanh", "hardtanh", {"min_val", "max_val"})
function Hardtanh:init(min_val, max_val)
  self.min_val = number("Hardtanh", "min_val", min_val, -1)
  self.max_val = number("Hardtanh", "max_val", max_val, 1)
  if not (self.min_val < self.max_val) then
    C.fail("Hardtanh: min_val must be below max_val, got " .. self.min_val .. " and " .. self.max_val)
  end
end

-- Softmax(dim) and LogSoftmax(dim): dim required (torch's implicit dim is deprecated)
for _, spec in ipairs {{"Softmax", "softmax"}, {"LogSoftmax", "log_softmax"}} do
  local cls = activation(spec[1], spec[2], {"dim"})
  function cls:init(dim)
    if math.type(dim) ~= "integer" or dim == 0 then
      C.fail(spec[1] .. ": dim must be a non-zero integer (1-based, negative from the end), got " .. tostring(dim))
    end
    self.dim = dim
  end
end

return {nn = nn}
