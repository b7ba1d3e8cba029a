-- Hyperparameter checks the optimizers share; each raises "<optimizer>: invalid <what> <value>
-- (...)", as torch's ValueErrors.
local M = {}

local show = require "dtensor.value_text" -- a value for an error message
M.show = show

local function number(group, key, name)
  local v = group[key]
  if type(v) ~= "number" then
    error(string.format("%s: %s must be a number, got %s", name, key, type(v)), 0)
  end
  return v
end
M.number = number

function M.at_least_zero(group, key, name, what)
  local v = number(group, key, name)
  if not (v >= 0) then error(string.format("%s: invalid %s %s (must be >= 0)", name, what or key, show(v)), 0) end
  return v
end

function M.boolean(group, key, name)
  local v = group[key]
  if type(v) ~= "boolean" then error(string.format("%s: %s must be a boolean, got %s", name, key, type(v)), 0) end
  return v
end

-- a group's learning rate: a number >= 0, or (Adam, AdamW) a 0-d float64 plain tensor,
-- which dt.compile'd steps read at each replay (a number is a constant of the graph) and
-- lr schedulers write in place; returns its value as a number
function M.lr(group, name, tensor_ok)
  local v = group.lr
  if tensor_ok and type(v) == "userdata" and v.dtype ~= nil then
    if v.device_mesh ~= nil or v:dim() ~= 0 or v.dtype ~= "float64" then
      error(string.format("%s: a tensor lr must be a 0-d float64 plain tensor (exact as a Lua number), got %s of %d dims",
                          name, v.dtype, v:dim()), 0)
    end
    v = v:item()
    if not (v >= 0) then error(string.format("%s: invalid learning rate %s (must be >= 0)", name, show(v)), 0) end
    return v
  end
  return M.at_least_zero(group, "lr", name, "learning rate")
end

-- the number a group's lr holds (a tensor lr read; outside a compiled function)
function M.lr_value(lr)
  if type(lr) == "userdata" then return lr:item() end
  return lr
end

-- a number in [0, 1)
function M.beta(v, name, what)
  if type(v) ~= "number" or not (v >= 0 and v < 1) then
    error(string.format("%s: invalid %s %s (must be in [0, 1))", name, what, show(v)), 0)
  end
end

return M
