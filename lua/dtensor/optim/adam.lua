-- dt.optim.Adam and dt.optim.AdamW, as torch.optim.Adam / AdamW (their single-tensor update):
-- bias-corrected moments, weight decay as an L2 term (Adam) or decoupled (AdamW), amsgrad and
-- maximize optional.  State per parameter: step (a float32 0-d tensor), exp_avg, exp_avg_sq
-- and, with amsgrad, max_exp_avg_sq, made like the parameter.  fused (default true) runs each
-- parameter's update as one op, adam_step_ (src/kernels/cpu/optim.c: the same float operations
-- in the same order, so the same bits as fused = false, the composed ops below); on DTensors
-- it runs on the local shards when the state has the parameter's placements, as it is made.
-- Inside dt.compile the step count stays a tensor: the bias corrections are tensor ops of the
-- graph (bias_corrections) on the composed path; the fused op takes the step tensor and lr
-- itself and computes the corrections from them when it runs (the same double operations).
local core = require "dtensor.core"
local base = require "dtensor.optim.optimizer"
local check = require "dtensor.optim.check"
local placements_text = require "dtensor.placements_text"

local function check_group(g, name)
  check.lr(g, name, true)
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
local function layout(t) return placements_text(t.placements) end
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

-- lr / (1 - beta1^step) and sqrt(1 - beta2^step): Lua numbers when eager (the step read into
-- Lua); while dt.compile records, float32 0-d tensors computed from the step tensor in float64,
-- the same double operations rounded as a number operand is for p (float64 or float32).
local function bias_corrections(step_t, lr, beta1, beta2, p)
  if not core.is_compiling() then
    local step = step_t:item()
    return lr / (1 - beta1 ^ step), math.sqrt(1 - beta2 ^ step)
  end
  local step, dtype = step_t:to("float64"), p.dtype == "float64" and "float64" or "float32"
  return (lr / (1 - beta1 ^ step)):to(dtype), (1 - beta2 ^ step):sqrt():to(dtype)
end

local function updater(decoupled)
  return function(opt, g)
    local lr, eps, wd = g.lr, g.eps, g.weight_decay
    -- a tensor lr: read when eager (then as a number); a float64 tensor of the graph inside dt.compile
    local lr_tensor = core.is_tensor(lr) and core.is_compiling()
    if core.is_tensor(lr) and not lr_tensor then lr = lr:item() end
    local beta1, beta2 = g.betas[1], g.betas[2]
    for _, p in ipairs(g.params) do
      local grad = p.grad
      if grad ~= nil then
        local state = opt:state_of(p)
        if state.step == nil then init_state(state, p, g.amsgrad) end
        if g.amsgrad and state.max_exp_avg_sq == nil then state.max_exp_avg_sq = base.zeros_like(p) end
        state.step:add_(1)
        if g.fused and fusable(p, grad, state) and core.is_compiling() then
          -- a graph: the op reads the step count and lr when it runs and computes the bias
          -- corrections as the eager branch below does in Lua (one node per parameter)
          core._adam_step_from_count_(p, grad, state.exp_avg, state.exp_avg_sq, g.amsgrad and state.max_exp_avg_sq or nil,
                                      state.step, lr, beta1, beta2, eps, wd, decoupled, g.maximize)
          goto continue
        elseif g.fused and fusable(p, grad, state) then
          local step_size, bias_correction2_sqrt = bias_corrections(state.step, lr, beta1, beta2, p)
          core._adam_step_(p, grad, state.exp_avg, state.exp_avg_sq, g.amsgrad and state.max_exp_avg_sq or nil,
                           step_size, bias_correction2_sqrt, beta1, beta2, eps,
                           decoupled and 1 - lr * wd or wd, decoupled, g.maximize)
          goto continue
        end
        if g.maximize then grad = -grad end
        if decoupled then
          p:mul_(lr_tensor and (1 - lr * wd):to(p.dtype == "float64" and "float64" or "float32") or 1 - lr * wd)
        elseif wd ~= 0 then
          grad = grad:add(p, wd)
        end
        local exp_avg, exp_avg_sq = state.exp_avg, state.exp_avg_sq
        exp_avg:add_(grad - exp_avg, 1 - beta1) -- torch's lerp_(grad, 1 - beta1)
        exp_avg_sq:mul_(beta2):add_(grad * grad, 1 - beta2)
        local step_size, bias_correction2_sqrt = bias_corrections(state.step, lr, beta1, beta2, p)
        local second = exp_avg_sq
        if g.amsgrad then
          -- torch.maximum (NaN propagates), shard by shard
          state.max_exp_avg_sq:copy_(core.stack({state.max_exp_avg_sq, exp_avg_sq}):amax(1))
          second = state.max_exp_avg_sq
        end
        local denom = second:sqrt() / bias_correction2_sqrt + eps
        if type(step_size) == "number" then
          p:add_(exp_avg / denom, -step_size)
        else
          p:add_(-(exp_avg / denom * step_size)) -- add_'s alpha: (float)alpha * x, then the sum
        end
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
