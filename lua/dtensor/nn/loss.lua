-- Loss modules (torch.nn's): CrossEntropyLoss({ignore_index = -100, reduction = "mean"})
-- (F.cross_entropy: 1-based class targets; DTensor logits too, loss parallel included) and
-- MSELoss({reduction = "mean"}): mean, sum or none of (input - target)^2.
local dtensor_nn = require("dtensor.dtensor_nn").functional -- F.cross_entropy on DTensors too
local Module = require("dtensor.nn.module").nn.Module
local C = require "dtensor.nn.checks"

local REDUCTIONS = {mean = true, sum = true, none = true}
local function reduction(op, r)
  r = r or "mean"
  if not REDUCTIONS[r] then C.fail(op .. ': reduction must be "mean", "sum" or "none", got ' .. tostring(r)) end
  return r
end

local CrossEntropyLoss = Module:extend("CrossEntropyLoss")
local ce_options = {ignore_index = true, reduction = true}
function CrossEntropyLoss:init(opts)
  opts = C.options("CrossEntropyLoss", opts, ce_options)
  self.ignore_index = opts.ignore_index or -100
  self.reduction = reduction("CrossEntropyLoss", opts.reduction)
end
function CrossEntropyLoss:forward(logits, target)
  return dtensor_nn.cross_entropy(logits, target, {ignore_index = self.ignore_index, reduction = self.reduction})
end
function CrossEntropyLoss:extra_repr() return "ignore_index=" .. self.ignore_index .. ", reduction=" .. self.reduction end

local MSELoss = Module:extend("MSELoss")
local mse_options = {reduction = true}
function MSELoss:init(opts)
  self.reduction = reduction("MSELoss", C.options("MSELoss", opts, mse_options).reduction)
end
function MSELoss:forward(input, target)
  local d = input - target
  local sq = d * d
  if self.reduction == "none" then return sq end
  if self.reduction == "sum" then return sq:sum() end
  return sq:mean()
end
function MSELoss:extra_repr() return "reduction=" .. self.reduction end

return {nn = {CrossEntropyLoss = CrossEntropyLoss, MSELoss = MSELoss}}
