-- dt.nn.Linear and dt.nn.Identity (torch.nn.Linear, torch.nn.Identity).
--   Linear(in_features, out_features, {bias = true, dtype = "float32"}): weight [out, in],
--   bias [out], initialised as torch's: kaiming_uniform_(weight, a = sqrt(5)), i.e. uniform
--   in +-1/sqrt(in), and the bias uniform in +-1/sqrt(in).  forward: x @ weight^T + bias
--   (F.linear: matmul, t and +, which run on DTensors through the dispatcher).
local core = require "dtensor.core"
local F = require "dtensor.nn.functional"
local Module = require("dtensor.nn.module").nn.Module
local init = require("dtensor.nn.initializers").nn.init
local C = require "dtensor.nn.checks"

local Linear = Module:extend("Linear")

local linear_options = {bias = true, dtype = true}
function Linear:init(in_features, out_features, opts)
  C.positive_int("Linear", "in_features", in_features)
  C.positive_int("Linear", "out_features", out_features)
  opts = C.options("Linear", opts, linear_options)
  local dtype = C.float_dtype("Linear", opts.dtype)
  self.in_features, self.out_features = in_features, out_features
  local weight = core.empty({out_features, in_features}, {dtype = dtype})
  init.kaiming_uniform_(weight, math.sqrt(5))
  self:register_parameter("weight", weight)
  if opts.bias ~= false then
    local bound = 1 / math.sqrt(in_features)
    self:register_parameter("bias", init.uniform_(core.empty({out_features}, {dtype = dtype}), -bound, bound))
  end
end

function Linear:forward(x) return F.linear(x, self.weight, self.bias) end

function Linear:extra_repr()
  return string.format("in_features=%d, out_features=%d, bias=%s", self.in_features, self.out_features,
                       tostring(self.bias ~= nil))
end

-- returns its argument(s) unchanged: a placeholder (torch.nn.Identity)
local Identity = Module:extend("Identity")
function Identity.forward(_, ...) return ... end

return {nn = {Linear = Linear, Identity = Identity}}
