-- dt.optim.SGD: stochastic gradient descent with momentum (Nesterov optional), dampening,
-- weight decay and maximize, as torch.optim.SGD (its single-tensor update, step by step).
local base = require "dtensor.optim.optimizer"
local check = require "dtensor.optim.check"

local function check_group(g, name)
  check.at_least_zero(g, "lr", name, "learning rate")
  local momentum = check.at_least_zero(g, "momentum", name, "momentum value")
  local dampening = check.number(g, "dampening", name)
  check.at_least_zero(g, "weight_decay", name, "weight_decay value")
  if check.boolean(g, "nesterov", name) and (momentum <= 0 or dampening ~= 0) then
    error(string.format("%s: Nesterov momentum requires a momentum and zero dampening (momentum %s, dampening %s)",
                        name, check.show(momentum), check.show(dampening)), 0)
  end
  check.boolean(g, "maximize", name)
end

local function update(opt, g)
  local lr, momentum, dampening, wd = g.lr, g.momentum, g.dampening, g.weight_decay
  for _, p in ipairs(g.params) do
    local grad = p.grad
    if grad ~= nil then
      if g.maximize then grad = -grad end
      if wd ~= 0 then grad = grad:add(p, wd) end
      if momentum ~= 0 then
        local state = opt:state_of(p)
        local buf = state.momentum_buffer
        if buf == nil then
          buf = grad:clone() -- the first step's buffer is the gradient itself
          state.momentum_buffer = buf
        else
          buf:mul_(momentum):add_(grad, 1 - dampening)
        end
        if g.nesterov then grad = grad:add(buf, momentum) else grad = buf end
      end
      p:add_(grad, -lr)
    end
  end
end

return base.define {
  name = "SGD",
  defaults = {lr = 1e-3, momentum = 0, dampening = 0, weight_decay = 0, nesterov = false, maximize = false},
  check = check_group,
  update = update,
}
