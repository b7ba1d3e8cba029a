-- What every dt.optim algorithm shares, as torch.optim.Optimizer: parameter groups with their
-- hyperparameters, per-parameter state, step() under no_grad, zero_grad, add_param_group,
-- state_dict / load_state_dict (doc/optim.md).  An algorithm is a definition
-- {name, defaults, check, update} made into a constructor by M.define.
--
-- Updates are in-place ops on each parameter and on state tensors made like it, so on a
-- DTensor parameter every op runs on the local shards (same placements everywhere): a step
-- issues no collective.
local core = require "dtensor.core"
local check = require "dtensor.optim.check"
local like = require("dtensor.dtensor_ops").module -- zeros_like keeps a DTensor's placements
local is_tensor, is_dtensor = core.is_tensor, core.is_dtensor
local M = {}

local Optimizer = {}
Optimizer.__index = Optimizer

local function deep_copy(v)
  if type(v) ~= "table" or is_tensor(v) then return v end
  local c = {}
  for k, x in pairs(v) do c[k] = deep_copy(x) end
  return c
end
M.deep_copy = deep_copy

local function sorted_keys(t)
  local keys = {}
  for k in pairs(t) do keys[#keys + 1] = k end
  table.sort(keys, function(a, b) return tostring(a) < tostring(b) end)
  return keys
end

local function shape_text(t) return "{" .. table.concat(t:size(), ",") .. "}" end

-- the parameters of one group: a tensor, or a list of tensors (module:parameters())
local function param_list(name, params, where)
  if is_tensor(params) then return {params} end
  if type(params) ~= "table" then
    error(string.format("%s: %s must be a tensor or a list of tensors, got %s", name, where, type(params)), 4)
  end
  local list = {}
  for i, p in ipairs(params) do
    if not is_tensor(p) then
      error(string.format("%s: %s[%d] is a %s; an optimizer takes tensors (or parameter groups {params = {...}, lr = ...})",
                          name, where, i, type(p)), 4)
    end
    if not p.is_leaf then
      error(string.format("%s: %s[%d] is not a leaf (it was computed by %s); optimize leaves (parameters), or detach it",
                          name, where, i, check.show(p.grad_fn)), 4)
    end
    if not (p.dtype:match("^float") or p.dtype == "bfloat16") then
      error(string.format("%s: %s[%d] has dtype %s; parameters must be floating point", name, where, i, p.dtype), 4)
    end
    list[i] = p
  end
  return list
end

-- Optimizer:add_param_group{params = {...}, lr = ...}: a group; missing hyperparameters take
-- the optimizer's defaults.  A parameter may belong to one group only.
function Optimizer:add_param_group(group, where)
  local name = self._def.name
  if type(group) ~= "table" or is_tensor(group) then
    error(string.format("%s: a parameter group must be a table {params = {...}, ...}, got %s", name,
                        is_tensor(group) and "a tensor" or type(group)), 2)
  end
  where = where or ("param_groups[" .. (#self.param_groups + 1) .. "].params")
  local g = {params = param_list(name, group.params, where)}
  for k, v in pairs(group) do if k ~= "params" then g[k] = deep_copy(v) end end
  for k, v in pairs(self.defaults) do if g[k] == nil then g[k] = deep_copy(v) end end
  self._def.check(g, name)
  for i, p in ipairs(g.params) do
    if self._owner[p] then
      error(string.format("%s: %s[%d] is already in parameter group %d (a parameter may be in one group only, once)",
                          name, where, i, self._owner[p]), 2)
    end
    self._owner[p] = #self.param_groups + 1
  end
  self.param_groups[#self.param_groups + 1] = g
end

-- the state table of parameter p (created empty)
function Optimizer:state_of(p)
  local s = self.state[p]
  if s == nil then
    s = {}
    self.state[p] = s
  end
  return s
end

-- a zero tensor like p: a DTensor with p's mesh and placements for a DTensor p
function M.zeros_like(p) return like.zeros_like(p) end

-- opt:step(closure?): one update of every parameter that has a .grad (the others are
-- skipped), under no_grad.  closure, when given, runs first with grad mode on (it should
-- zero the gradients, compute the loss and call backward); its result is returned.
function Optimizer:step(closure)
  local loss
  if closure ~= nil then loss = core.enable_grad(closure) end
  local _ <close> = core.no_grad()
  for _, group in ipairs(self.param_groups) do self._def.update(self, group) end
  return loss
end

-- opt:zero_grad(set_to_none = true): forgets every parameter's .grad (nil), or with false
-- writes zeros into it.
function Optimizer:zero_grad(set_to_none)
  if type(set_to_none) == "table" then set_to_none = set_to_none.set_to_none end
  set_to_none = set_to_none ~= false
  local _ <close> = core.no_grad()
  for _, group in ipairs(self.param_groups) do
    for _, p in ipairs(group.params) do
      if set_to_none then
        p.grad = nil
      else
        local g = p.grad
        if g ~= nil then g:zero_() end
      end
    end
  end
end

-- opt:state_dict(): torch's layout with Lua's 1-based positions:
--   {state = {[i] = {name = tensor or number}}, param_groups = {{lr = ..., params = {i, ...}}}}
-- where i numbers the parameters across the groups in order.  The state's tensors are the
-- optimizer's own (as torch: not copies); the hyperparameters are copies.
function Optimizer:state_dict()
  local index, n, groups = {}, 0, {}
  for gi, group in ipairs(self.param_groups) do
    local g = {}
    for k, v in pairs(group) do if k ~= "params" then g[k] = deep_copy(v) end end
    g.params = {}
    for j, p in ipairs(group.params) do
      n = n + 1
      index[p], g.params[j] = n, n
    end
    groups[gi] = g
  end
  local state = {}
  for p, s in pairs(self.state) do
    if index[p] then
      local c = {}
      for k, v in pairs(s) do c[k] = v end
      state[index[p]] = c
    end
  end
  return {state = state, param_groups = groups}
end

-- a loaded state value made like parameter p: its dtype (the step counter keeps its own),
-- its mesh and placements, and a copy (so the optimizer never shares the given tensors)
local function state_value(name, key, v, p, i)
  if not is_tensor(v) then return deep_copy(v) end
  if key == "step" then return v:clone() end
  if shape_text(v) ~= shape_text(p) then
    error(string.format("%s: load_state_dict: state '%s' of parameter %d has shape %s, the parameter %s",
                        name, key, i, shape_text(v), shape_text(p)), 4)
  end
  if is_dtensor(p) then
    if is_dtensor(v) then
      v = v:redistribute(p.device_mesh, p.placements)
    else -- a whole tensor (dt.load of a saved state): each rank keeps its chunk, no communication
      v = core.distribute_tensor(v, p.device_mesh, p.placements, {src_rank = false})
    end
  elseif is_dtensor(v) then
    v = v:full_tensor()
  end
  return v:to(p.dtype):clone()
end

-- opt:load_state_dict(sd): the hyperparameters and state of sd (from state_dict, maybe of
-- another run with other placements) replace this optimizer's; parameters correspond by
-- position.  State tensors are copied, cast to the parameter's dtype and brought to its
-- placements (a plain tensor for a DTensor parameter is chunked locally).
function Optimizer:load_state_dict(sd)
  local name = self._def.name
  if type(sd) ~= "table" or type(sd.param_groups) ~= "table" or type(sd.state) ~= "table" then
    error(name .. ": load_state_dict: expected a table {state = {...}, param_groups = {...}} (from state_dict)", 2)
  end
  if #sd.param_groups ~= #self.param_groups then
    error(string.format("%s: load_state_dict: the state dict has %d parameter groups, the optimizer %d",
                        name, #sd.param_groups, #self.param_groups), 2)
  end
  local by_index = {}
  for gi, saved in ipairs(sd.param_groups) do
    local group = self.param_groups[gi]
    if type(saved.params) ~= "table" or #saved.params ~= #group.params then
      error(string.format("%s: load_state_dict: parameter group %d of the state dict has %s parameters, the optimizer's %d",
                          name, gi, type(saved.params) == "table" and tostring(#saved.params) or "no list of", #group.params), 2)
    end
    for j, i in ipairs(saved.params) do by_index[i] = group.params[j] end
  end
  -- in sorted order, the same on every rank: bringing a value to its placements may be a
  -- collective (pairs' order differs between ranks' Lua states)
  local positions = {}
  for i in pairs(sd.state) do if by_index[i] ~= nil then positions[#positions + 1] = i end end
  table.sort(positions)
  local state = {}
  for _, i in ipairs(positions) do
    local s, p, c = sd.state[i], by_index[i], {}
    for _, k in ipairs(sorted_keys(s)) do c[k] = state_value(name, k, s[k], p, i) end
    state[p] = c
  end
  for gi, saved in ipairs(sd.param_groups) do
    local group = self.param_groups[gi]
    for k in pairs(group) do if k ~= "params" and saved[k] == nil then group[k] = nil end end
    for k, v in pairs(saved) do if k ~= "params" then group[k] = deep_copy(v) end end
    self._def.check(group, name)
  end
  self.state = state
end

function Optimizer:__tostring()
  local lines = {self._def.name .. " ("}
  for gi, group in ipairs(self.param_groups) do
    lines[#lines + 1] = "Parameter Group " .. gi
    for _, k in ipairs(sorted_keys(group)) do
      if k ~= "params" then
        local v = group[k]
        if type(v) == "table" then
          local parts = {}
          for i, x in ipairs(v) do parts[i] = tostring(x) end
          v = "{" .. table.concat(parts, ", ") .. "}"
        end
        lines[#lines + 1] = "    " .. k .. ": " .. tostring(v)
      end
    end
  end
  lines[#lines + 1] = ")"
  return table.concat(lines, "\n")
end

-- M.define{name =, defaults = {k = v}, check = fn(group, name), update = fn(opt, group)}:
-- the constructor name(params, opts) of an algorithm.  params: a tensor, a list of tensors,
-- or a list of groups {params = ..., hyperparameter = ...}; opts: the defaults' overrides
-- (a number is the learning rate).  check raises for a group's invalid hyperparameters;
-- update runs under no_grad and updates the group's parameters that have a .grad.
function M.define(def)
  return function(params, opts)
    local name = def.name
    if type(opts) == "number" then opts = {lr = opts} end
    if opts ~= nil and type(opts) ~= "table" then
      error(string.format("%s: options must be a table (or the learning rate), got %s", name, type(opts)), 2)
    end
    local defaults = deep_copy(def.defaults)
    for k, v in pairs(opts or {}) do
      if def.defaults[k] == nil then
        error(string.format("%s: unknown option '%s' (options: %s)", name, check.show(k),
                            table.concat(sorted_keys(def.defaults), ", ")), 2)
      end
      defaults[k] = deep_copy(v)
    end
    def.check(defaults, name)
    local self = setmetatable({defaults = defaults, param_groups = {}, state = {}, _def = def, _owner = {}}, Optimizer)
    if type(params) == "table" and not is_tensor(params) and type(params[1]) == "table" and not is_tensor(params[1]) then
      for _, g in ipairs(params) do self:add_param_group(g) end -- parameter groups
    else
      self:add_param_group({params = params}, "params")
    end
    if #self.param_groups == 1 and #self.param_groups[1].params == 0 then
      error(name .. ": got an empty parameter list", 2)
    end
    return self
  end
end

M.Optimizer = Optimizer
return M
