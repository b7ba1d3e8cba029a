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

-- a number in [0, 1)
function M.beta(v, name, what)
  if type(v) ~= "number" or not (v >= 0 and v < 1) then
    error(string.format("%s: invalid %s %s (must be in [0, 1))", name, what, show(v)), 0)
  end
end

return M
