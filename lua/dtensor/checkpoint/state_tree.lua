-- A checkpoint's state as a list of leaves: a nested table (model and optimizer state dicts,
-- step, RNG state, ...) walked in a fixed order, each leaf named by its dotted path as the
-- safetensors ecosystem names weights ("model.h.0.attn.w", "optim.state.1.exp_avg").
local core = require "dtensor.core"
local M = {}

local function key_order(a, b)
  local ta, tb = math.type(a) or type(a), math.type(b) or type(b)
  if ta ~= tb then return ta < tb end
  return a < b
end

-- flatten(state, op) -> list of {name =, path = {k1, k2, ...}, value =}, sorted by name:
-- the same list on every rank (pairs' order is not)
function M.flatten(state, op)
  if type(state) ~= "table" or core.is_tensor(state) then
    error(op .. ": state must be a table (e.g. {model = model:state_dict(), optim = opt:state_dict()}), got " ..
          (core.is_tensor(state) and "a tensor" or type(state)), 3)
  end
  local out, seen, names = {}, {}, {}
  local function walk(t, path)
    if seen[t] then error(op .. ": state." .. table.concat(path, ".") .. " is a table met twice (a cycle?)", 4) end
    seen[t] = true
    local keys = {}
    for k in pairs(t) do
      if type(k) ~= "string" and math.type(k) ~= "integer" then
        error(string.format("%s: state.%s has a %s key; keys are strings or integers", op, table.concat(path, "."),
                            type(k)), 4)
      end
      keys[#keys + 1] = k
    end
    table.sort(keys, key_order)
    for _, k in ipairs(keys) do
      local v, p = t[k], table.move(path, 1, #path, 1, {})
      p[#p + 1] = k
      local name = table.concat(p, ".")
      local tv = type(v)
      if core.is_tensor(v) or tv == "number" or tv == "string" or tv == "boolean" then
        if names[name] then error(op .. ": two entries of the state are both named '" .. name .. "'", 4) end
        names[name] = true
        out[#out + 1] = {name = name, path = p, value = v}
      elseif tv == "table" then
        walk(v, p)
      else
        error(string.format("%s: state.%s is a %s; a checkpoint holds tensors, numbers, strings and booleans", op,
                            name, tv), 4)
      end
    end
    seen[t] = nil
  end
  walk(state, {})
  table.sort(out, function(a, b) return a.name < b.name end)
  return out
end

-- set(state, path, v): state[path[1]]...[path[n]] = v, making the tables on the way
function M.set(state, path, v)
  local t = state
  for i = 1, #path - 1 do
    local nxt = t[path[i]]
    if type(nxt) ~= "table" or core.is_tensor(nxt) then
      nxt = {}
      t[path[i]] = nxt
    end
    t = nxt
  end
  t[path[#path]] = v
end

return M
