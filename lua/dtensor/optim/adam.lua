-- dt.optim.Adam and dt.optim.AdamW, as torch.optim.Adam / AdamW (their single-tensor update):
-- bias-corrected moments, weight decay as an L2 term (Adam) or decoupled (AdamW), amsgrad and
-- maximize optional.  State per parameter: step (a float32 0-d tensor), exp_avg, exp_avg_sq
-- and, with amsgrad, max_exp_avg_sq, made like the parameter.  fused (default true) runs each
-- parameter's update as one op, adam_step_ (src/kernels/cpu/optim.c: the same float operations
-- in the same order, so the same bits as fused = false, the composed ops below); on DTensors
-- it runs on the local shards when the state has the parameter's placements, as it is made.
local core = require "dtensor.core"
local base = require "dtensor.optim.optimizer"
local check = require "dtensor.optim.check"

local function check_group(g, name)
  check.at_least_zero(g, "lr", name, "learning rate")
  check.at_least_zero(g, "eps", name, "epsilon value")
  if type(g.betas) ~= "table" or #g.betas ~= 2 then
    error(string.format("%s: betas must be a list of two numbers {beta1, beta2}, got %s", name, type(g.betas)), 0)
  end
  check.beta(g.betas[1], name, "beta parameter at index 1:")
  check.beta(g.betas[2], name, "beta parameter at index 2:")
  check.at_least_zero(g, "weight_decay", name, "weight_decay value")
  check.boolean(g, "amsgrad", name)
  check.boolean(g, "maximize", name)
  check.boolean(g, "fused", name)
end

-- the fused op applies when every tensor it writes has the parameter's layout: same dtype
-- (grad too), and on DTensors the same mesh and placements (a state redistributed to match
-- would be written in a copy)
local function layout(t)
  local parts = {}
  for i, pl in ipairs(t.placements) do parts[i] = tostring(pl) end
  return table.concat(parts, ",")
end
local function fusable(p, grad, state)
  if grad.dtype ~= p.dtype then return false end
  local pd = core.is_dtensor(p)
  if core.is_dtensor(grad) ~= pd then return false end
  if not pd then return true end
  local mesh, key = p.device_mesh, layout(p)
  for _, t in ipairs({state.exp_avg, state.exp_avg_sq, state.max_exp_avg_sq}) do
    if not core.is_dtensor(t) or t.dtype ~= p.dtype or t.device_mesh ~= mesh or layout(t) ~= key then return false end
  end
  return true
end

local function init_state(state, p, amsgrad)
  state.step = core.tensor(0.0, {dtype = "float32"})
  state.exp_avg = base.zeros_like(p)
  state.exp_avg_sq = base.zeros_like(p)
  if amsgrad then state.max_exp_avg_sq = base.zeros_like(p) end
end

local function updater(decoupled)
  return function(opt, g)
    local lr, eps, wd = g.lr, g.eps, g.weight_decay
    local beta1, beta2 = g.betas[1], g.betas[2]
    for _, p in ipairs(g.params) do
      local grad = p.grad
      if grad ~= nil then
        local state = opt:state_of(p)
        if state.step == nil then init_state(state, p, g.amsgrad) end
        if g.amsgrad and state.max_exp_avg_sq == nil then state.max_exp_avg_sq = base.zeros_like(p) end
        state.step:add_(1)
        local step = state.step:item()
        if g.fused and fusable(p, grad, state) then
          core._adam_step_(p, grad, state.exp_avg, state.exp_avg_sq, g.amsgrad and state.max_exp_avg_sq or nil,
                           lr / (1 - beta1 ^ step), math.sqrt(1 - beta2 ^ step), beta1, beta2, eps,
                           decoupled and 1 - lr * wd or wd, decoupled, g.maximize)
          goto continue
        end
        if g.maximize then grad = -grad end
        if decoupled then
          p:mul_(1 - lr * wd)
        elseif wd ~= 0 then
          grad = grad:add(p, wd)
        end
        local exp_avg, exp_avg_sq = state.exp_avg, state.exp_avg_sq
        exp_avg:add_(grad - exp_avg, 1 - beta1) -- torch's lerp_(grad, 1 - beta1)
        exp_avg_sq:mul_(beta2):add_(grad * grad, 1 - beta2)
        local step_size = lr / (1 - beta1 ^ step)
        local bias_correction2_sqrt = math.sqrt(1 - beta2 ^ step)
        local second = exp_avg_sq
        if g.amsgrad then
          -- torch.maximum (NaN propagates), shard by shard
          state.max_exp_avg_sq:copy_(core.stack({state.max_exp_avg_sq, exp_avg_sq}):amax(1))
          second = state.max_exp_avg_sq
        end
        local denom = second:sqrt() / bias_correction2_sqrt + eps
        p:add_(exp_avg / denom, -step_size)
      end
      ::continue::
    end
  end
end

return {
  Adam = base.define {
    name = "Adam",
    defaults = {lr = 1e-3, betas = {0.9, 0.999}, eps = 1e-8, weight_decay = 0, amsgrad = false, maximize = false, fused = true},
    check = check_group,
    update = updater(false),
  },
  AdamW = base.define {
    name = "AdamW",
    defaults = {lr = 1e-3, betas = {0.9, 0.999}, eps = 1e-8, weight_decay = 1e-2, amsgrad = false, maximize = false, fused = true},
    check = check_group,
    update = updater(true),
  },
}
