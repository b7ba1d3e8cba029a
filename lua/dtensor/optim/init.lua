-- dt.optim (doc/optim.md): the optimizers SGD, Adam, AdamW on plain and DTensor parameters,
-- their learning-rate schedules, and gradient clipping (dt.nn.utils.clip_grad_norm_ and
-- clip_grad_value_).  Optimizer math runs on each rank's shards with no communication.
-- Returns {module = {optim = {...}}, nn_utils = {clip_grad_norm_, clip_grad_value_}}: init.lua
-- installs them into dt.optim and dt.nn.utils.
local optimizer = require "dtensor.optim.optimizer"
local adam = require "dtensor.optim.adam"
local clip = require "dtensor.optim.clip_grad"

local optim = {
  SGD = require "dtensor.optim.sgd",
  Adam = adam.Adam,
  AdamW = adam.AdamW,
  lr_scheduler = require "dtensor.optim.lr_scheduler",
  -- dt.optim.Optimizer{name =, defaults =, check =, update =}: the constructor of a new algorithm
  Optimizer = optimizer.define,
}

return {module = {optim = optim}, nn_utils = {clip_grad_norm_ = clip.clip_grad_norm_, clip_grad_value_ = clip.clip_grad_value_}}
