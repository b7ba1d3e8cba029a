-- dt.optim.lr_scheduler: learning-rate schedules that write each parameter group's lr, as
-- torch.optim.lr_scheduler (the same recurrences, so the same floating-point sequences):
-- StepLR, CosineAnnealingLR, LinearLR, LambdaLR, SequentialLR, and cosine_with_warmup (a
-- linear warmup then a cosine decay to min_lr, in closed form).  sched:step() after each
-- opt:step(); sched:get_last_lr(); sched:state_dict() / load_state_dict().
local check = require "dtensor.optim.check"
local M = {}
local lr_value = check.lr_value
-- writes a group's lr: a tensor lr in place (a dt.compile'd step reads it at each replay)
local function set_lr(g, v)
  if type(g.lr) == "userdata" then g.lr:fill_(v) else g.lr = v end
end

local Scheduler = {}
Scheduler.__index = Scheduler

local function group_lrs(opt)
  local lrs = {}
  for i, g in ipairs(opt.param_groups) do lrs[i] = lr_value(g.lr) end
  return lrs
end

local function map_groups(self, f)
  local out = {}
  for i, g in ipairs(self.optimizer.param_groups) do out[i] = f(lr_value(g.lr), self.base_lrs[i], i) end
  return out
end

-- sched:step(): the next epoch (step); its lrs are written into the optimizer's groups.
-- sched:step(epoch) jumps to epoch with the closed form (torch's deprecated form, which
-- SequentialLR uses at its milestones).
function Scheduler:step(epoch)
  self._step_count = self._step_count + 1
  local values
  if epoch == nil then
    self.last_epoch = self.last_epoch + 1
    values = self._class.get_lr(self)
  else
    self.last_epoch = epoch
    values = (self._class.closed_form or self._class.get_lr)(self)
  end
  for i, g in ipairs(self.optimizer.param_groups) do
    set_lr(g, values[i])
  end
  self._last_lr = group_lrs(self.optimizer)
end

-- the lrs the last step set, one per parameter group (a new list)
function Scheduler:get_last_lr() return {table.unpack(self._last_lr)} end

local function copy_list(t)
  local c = {}
  for i, v in ipairs(t) do c[i] = v end
  return c
end

-- sched:state_dict(): every field but the optimizer and functions (as torch: a LambdaLR's
-- function is not saved; the scheduler made again with it restores the rest)
function Scheduler:state_dict()
  local sd = {}
  for k, v in pairs(self) do
    if k ~= "optimizer" and k ~= "_class" and type(v) ~= "function" then
      if type(v) == "table" then
        if k == "_schedulers" then
          local subs = {}
          for i, s in ipairs(v) do subs[i] = s:state_dict() end
          v = subs
        elseif k ~= "lr_lambdas" then
          v = copy_list(v)
        else
          v = nil
        end
      end
      sd[k] = v
    end
  end
  return sd
end

function Scheduler:load_state_dict(sd)
  if type(sd) ~= "table" then error(self._class.name .. ": load_state_dict: expected a table, got " .. type(sd), 2) end
  for k, v in pairs(sd) do
    if k == "_schedulers" then
      for i, s in ipairs(v) do self._schedulers[i]:load_state_dict(s) end
    elseif type(v) == "table" then
      self[k] = copy_list(v)
    else
      self[k] = v
    end
  end
end

function Scheduler:__tostring() return self._class.name .. "(last_epoch=" .. self.last_epoch .. ")" end

-- Arguments as torch's, positional after the optimizer or by name in one table:
-- StepLR(opt, 30, 0.1) or StepLR(opt, {step_size = 30, gamma = 0.1}).
local function read_args(class, args)
  local named = {}
  if args.n == 1 and type(args[1]) == "table" and getmetatable(args[1]) == nil and #args[1] == 0 then
    for k, v in pairs(args[1]) do named[k] = v end
    local known = {}
    for _, a in ipairs(class.args) do known[a[1]] = true end
    for k in pairs(named) do
      if not known[k] then
        local names = {}
        for i, a in ipairs(class.args) do names[i] = a[1] end
        error(string.format("%s: unknown option '%s' (options: %s)", class.name, check.show(k), table.concat(names, ", ")), 0)
      end
    end
  else
    for i, a in ipairs(class.args) do named[a[1]] = args[i] end
  end
  for _, a in ipairs(class.args) do
    local key, default = a[1], a[2]
    if named[key] == nil then
      if default == nil then error(string.format("%s: missing argument %s", class.name, key), 0) end
      named[key] = default
    end
  end
  return named
end

local function check_optimizer(name, opt)
  if type(opt) ~= "table" or type(opt.param_groups) ~= "table" then
    error(name .. ": expected an optimizer (from dt.optim) as the first argument, got " .. type(opt), 0)
  end
end

-- torch's LRScheduler.__init__: initial_lr per group, base_lrs, then a first step
local function init(self, opt, last_epoch)
  local name = self._class.name
  if last_epoch ~= math.tointeger(last_epoch) or last_epoch < -1 then
    error(string.format("%s: last_epoch must be an integer >= -1, got %s", name, check.show(last_epoch)), 0)
  end
  self.optimizer = opt
  for i, g in ipairs(opt.param_groups) do
    if last_epoch == -1 then
      if g.initial_lr == nil then g.initial_lr = lr_value(g.lr) end
    elseif g.initial_lr == nil then
      error(string.format("%s: param_groups[%d] has no initial_lr, which resuming (last_epoch %d) needs", name, i, last_epoch), 0)
    end
  end
  self.base_lrs = {}
  for i, g in ipairs(opt.param_groups) do self.base_lrs[i] = g.initial_lr end
  self.last_epoch = last_epoch
  self._step_count = 0
  self:step()
end

-- a scheduler class: its name, its arguments {{name, default}} after the optimizer (nil
-- default: required), a check, get_lr (torch's recurrence) and closed_form (optional)
local function class(def)
  def.__index = def
  setmetatable(def, {__index = Scheduler})
  def.__tostring = Scheduler.__tostring
  return function(opt, ...)
    check_optimizer(def.name, opt)
    local a = read_args(def, table.pack(...))
    local self = setmetatable({_class = def}, def)
    for _, arg in ipairs(def.args) do if arg[1] ~= "last_epoch" then self[arg[1]] = a[arg[1]] end end
    if def.check then def.check(self, opt) end
    init(self, opt, a.last_epoch)
    return self
  end
end

local function positive(self, key)
  local v = self[key]
  if type(v) ~= "number" or not (v > 0) then
    error(string.format("%s: %s must be a positive number, got %s", self._class.name, key, check.show(v)), 0)
  end
end

-- StepLR(opt, step_size, gamma = 0.1): lr * gamma every step_size steps
M.StepLR = class {
  name = "StepLR",
  args = {{"step_size"}, {"gamma", 0.1}, {"last_epoch", -1}},
  check = function(self) positive(self, "step_size") end,
  get_lr = function(self)
    if self.last_epoch == 0 or self.last_epoch % self.step_size ~= 0 then return map_groups(self, function(lr) return lr end) end
    return map_groups(self, function(lr) return lr * self.gamma end)
  end,
  closed_form = function(self)
    return map_groups(self, function(_, base) return base * self.gamma ^ (self.last_epoch // self.step_size) end)
  end,
}

-- CosineAnnealingLR(opt, T_max, eta_min = 0): eta_min + (base - eta_min)(1 + cos(pi t / T_max)) / 2
M.CosineAnnealingLR = class {
  name = "CosineAnnealingLR",
  args = {{"T_max"}, {"eta_min", 0}, {"last_epoch", -1}},
  check = function(self) positive(self, "T_max") end,
  get_lr = function(self)
    local t, T, eta = self.last_epoch, self.T_max, self.eta_min
    if t == 0 then return map_groups(self, function(lr) return lr end) end
    if self._step_count == 1 and t > 0 then
      return map_groups(self, function(_, base) return eta + (base - eta) * (1 + math.cos(t * math.pi / T)) / 2 end)
    end
    if (t - 1 - T) % (2 * T) == 0 then
      return map_groups(self, function(lr, base) return lr + (base - eta) * (1 - math.cos(math.pi / T)) / 2 end)
    end
    return map_groups(self, function(lr)
      return (1 + math.cos(math.pi * t / T)) / (1 + math.cos(math.pi * (t - 1) / T)) * (lr - eta) + eta
    end)
  end,
  closed_form = function(self)
    return map_groups(self, function(_, base)
      return self.eta_min + (base - self.eta_min) * (1 + math.cos(math.pi * self.last_epoch / self.T_max)) / 2
    end)
  end,
}

-- LinearLR(opt, start_factor = 1/3, end_factor = 1, total_iters = 5): the factor moves
-- linearly from start_factor to end_factor over total_iters steps, then stays
M.LinearLR = class {
  name = "LinearLR",
  args = {{"start_factor", 1 / 3}, {"end_factor", 1.0}, {"total_iters", 5}, {"last_epoch", -1}},
  check = function(self)
    if type(self.start_factor) ~= "number" or not (self.start_factor > 0 and self.start_factor <= 1) then
      error("LinearLR: start_factor must be in (0, 1], got " .. check.show(self.start_factor), 0)
    end
    if type(self.end_factor) ~= "number" or not (self.end_factor >= 0 and self.end_factor <= 1) then
      error("LinearLR: end_factor must be in [0, 1], got " .. check.show(self.end_factor), 0)
    end
    positive(self, "total_iters")
  end,
  get_lr = function(self)
    local t, s, e, n = self.last_epoch, self.start_factor, self.end_factor, self.total_iters
    if t == 0 then return map_groups(self, function(lr) return lr * s end) end
    if t > n then return map_groups(self, function(lr) return lr end) end
    return map_groups(self, function(lr) return lr * (1.0 + (e - s) / (n * s + (t - 1) * (e - s))) end)
  end,
  closed_form = function(self)
    local s, e, n = self.start_factor, self.end_factor, self.total_iters
    return map_groups(self, function(_, base) return base * (s + (e - s) * math.min(n, self.last_epoch) / n) end)
  end,
}

-- LambdaLR(opt, lr_lambda): base_lr * lr_lambda(t); lr_lambda is a function of the step or
-- a list of them, one per parameter group
M.LambdaLR = class {
  name = "LambdaLR",
  args = {{"lr_lambda"}, {"last_epoch", -1}},
  check = function(self, opt)
    local f, n = self.lr_lambda, #opt.param_groups
    local list = type(f) == "table" and f or {}
    if type(f) == "function" then for i = 1, n do list[i] = f end end
    if #list ~= n then
      error(string.format("LambdaLR: expected %d lr_lambdas (one per parameter group), got %d", n, #list), 0)
    end
    for i, g in ipairs(list) do
      if type(g) ~= "function" then error(string.format("LambdaLR: lr_lambda %d is a %s, not a function", i, type(g)), 0) end
    end
    self.lr_lambdas, self.lr_lambda = list, nil
  end,
  get_lr = function(self)
    return map_groups(self, function(_, base, i) return base * self.lr_lambdas[i](self.last_epoch) end)
  end,
}

-- cosine_with_warmup(opt, warmup, total, min_lr = 0), at step t (0-based, as last_epoch):
--   t < warmup:          base * (t + 1) / warmup
--   warmup <= t < total: min_lr + (base - min_lr) (1 + cos(pi (t - warmup) / (total - warmup))) / 2
--   t >= total:          min_lr
local function warmup_cosine_lr(self)
  local t, w, n, low = self.last_epoch, self.warmup, self.total, self.min_lr
  return map_groups(self, function(_, base)
    if t < w then return base * (t + 1) / w end
    if t >= n then return low end
    return low + (base - low) * (1 + math.cos(math.pi * (t - w) / (n - w))) / 2
  end)
end
M.cosine_with_warmup = class {
  name = "cosine_with_warmup",
  args = {{"warmup"}, {"total"}, {"min_lr", 0}, {"last_epoch", -1}},
  check = function(self)
    local w, n = self.warmup, self.total
    if math.tointeger(w) == nil or w < 0 or math.tointeger(n) == nil or n <= w then
      error(string.format("cosine_with_warmup: expected integers 0 <= warmup < total, got warmup %s, total %s",
                          check.show(w), check.show(n)), 0)
    end
    if type(self.min_lr) ~= "number" or self.min_lr < 0 then
      error("cosine_with_warmup: min_lr must be a number >= 0, got " .. check.show(self.min_lr), 0)
    end
  end,
  get_lr = warmup_cosine_lr,
  closed_form = warmup_cosine_lr,
}

-- SequentialLR(opt, schedulers, milestones): schedulers[i + 1] takes over at milestones[i]
-- (it restarts there from its own step 0), as torch.optim.lr_scheduler.SequentialLR
local Sequential = setmetatable({name = "SequentialLR"}, {__index = Scheduler})
Sequential.__index = Sequential
Sequential.__tostring = Scheduler.__tostring

local function undo(s) -- torch's recursive_undo: each scheduler's first step is taken back
  if s._schedulers then
    for _, sub in ipairs(s._schedulers) do undo(sub) end
  else
    s.last_epoch = s.last_epoch - 1
  end
end

function Sequential:step()
  self.last_epoch = self.last_epoch + 1
  local idx = 1 -- bisect_right(milestones, last_epoch) + 1
  while idx <= #self._milestones and self._milestones[idx] <= self.last_epoch do idx = idx + 1 end
  local s = self._schedulers[idx]
  if idx > 1 and self._milestones[idx - 1] == self.last_epoch then s:step(0) else s:step() end
  self._last_lr = s:get_last_lr()
end

function M.SequentialLR(opt, schedulers, milestones, last_epoch)
  if type(schedulers) == "table" and milestones == nil and schedulers.schedulers then
    schedulers, milestones, last_epoch = schedulers.schedulers, schedulers.milestones, schedulers.last_epoch
  end
  check_optimizer("SequentialLR", opt)
  if type(schedulers) ~= "table" or #schedulers == 0 then error("SequentialLR: expected a non-empty list of schedulers", 0) end
  for i, s in ipairs(schedulers) do
    if type(s) ~= "table" or s.optimizer ~= opt then
      error(string.format("SequentialLR: scheduler %d does not belong to the given optimizer (all must)", i), 0)
    end
  end
  if type(milestones) ~= "table" or #milestones ~= #schedulers - 1 then
    error(string.format("SequentialLR: expected %d milestones (one fewer than the %d schedulers), got %s", #schedulers - 1,
                        #schedulers, type(milestones) == "table" and tostring(#milestones) or type(milestones)), 0)
  end
  local self = setmetatable({_class = Sequential, optimizer = opt, _schedulers = schedulers,
                             _milestones = copy_list(milestones), last_epoch = (last_epoch or -1) + 1}, Sequential)
  for _, g in ipairs(opt.param_groups) do
    set_lr(g, g.initial_lr)
  end
  undo(self)
  schedulers[1]._step_count = 0
  schedulers[1]:step()
  self._last_lr = schedulers[1]:get_last_lr()
  return self
end

return M
