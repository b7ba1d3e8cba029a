-- Module:state_dict() and Module:load_state_dict(sd, {strict = true}) (the contract:
-- lua/dtensor/nn/module.lua).  A helper module of module.lua, which installs them; it reads
-- a module's registries (its raw fields) only.
local core = require "dtensor.core"
local C = require "dtensor.nn.checks"
local fail, type_name, shape_text = C.fail, C.type_name, C.shape_text

local S = {}

-- {name, tensor, kind} of every parameter and persistent buffer, dotted, depth first, as
-- torch (a tensor shared by two modules appears under both names)
local function state_entries(m, prefix, out)
  for _, name in ipairs(rawget(m, "_param_names")) do
    out[#out + 1] = {prefix .. name, rawget(m, "_parameters")[name], "parameter"}
  end
  local np = rawget(m, "_non_persistent")
  for _, name in ipairs(rawget(m, "_buffer_names")) do
    if not np[name] then out[#out + 1] = {prefix .. name, rawget(m, "_buffers")[name], "buffer"} end
  end
  for _, name in ipairs(rawget(m, "_module_names")) do
    state_entries(rawget(m, "_modules")[name], prefix .. name .. ".", out)
  end
  return out
end

-- pairs(sd) in the module's order, then any key added later (sorted): the same on every rank
local function ordered(t, keys)
  return setmetatable(t, {__pairs = function(tbl)
    local list, known = {}, {}
    for _, k in ipairs(keys) do
      known[k] = true
      if rawget(tbl, k) ~= nil then list[#list + 1] = k end
    end
    local extra = {}
    for k in next, tbl do
      if not known[k] then extra[#extra + 1] = k end
    end
    table.sort(extra, function(a, b) return tostring(a) < tostring(b) end)
    table.move(extra, 1, #extra, #list + 1, list)
    local i = 0
    return function()
      i = i + 1
      local k = list[i]
      if k ~= nil then return k, rawget(tbl, k) end
    end, tbl, nil
  end})
end

function S.state_dict(self, prefix, keep_vars)
  local out, keys = {}, {}
  for _, e in ipairs(state_entries(self, prefix and prefix ~= "" and prefix .. "." or "", {})) do
    if out[e[1]] == nil then keys[#keys + 1] = e[1] end
    out[e[1]] = keep_vars and e[2] or e[2]:detach()
  end
  return ordered(out, keys)
end

local function same_placements(a, b)
  if #a ~= #b then return false end
  for i = 1, #a do
    if a[i] ~= b[i] then return false end
  end
  return true
end

-- v's values into target, in place (under no_grad): across plain tensors and DTensors
local function copy_into(target, v)
  if core.is_dtensor(target) then
    if not core.is_dtensor(v) then
      v = core.distribute_tensor(v, target.device_mesh, target.placements)
    elseif not same_placements(v.placements, target.placements) then
      v = v:redistribute(target.device_mesh, target.placements)
    end
  elseif core.is_dtensor(v) then
    if not v.device_mesh:get_coordinate() then return end -- off v's mesh: no data to copy
    v = v:full_tensor()
  end
  target:copy_(v)
end

local load_options = {strict = true}
function S.load_state_dict(self, sd, opts)
  if type(sd) ~= "table" or C.is_module(sd) then fail("load_state_dict: expected a table name -> tensor, got " .. type_name(sd)) end
  if type(opts) == "boolean" then opts = {strict = opts} end -- torch's positional strict
  if opts ~= nil and type(opts) ~= "table" then fail("load_state_dict: options must be a table, got " .. type_name(opts)) end
  opts = opts or {}
  for k in pairs(opts) do
    if not load_options[k] then fail("load_state_dict: unknown option '" .. tostring(k) .. "'") end
  end
  local strict = opts.strict ~= false
  local entries = state_entries(self, "", {})
  local expected, missing, unexpected, problems = {}, {}, {}, {}
  for _, e in ipairs(entries) do
    local name, target = e[1], e[2]
    expected[name] = true
    local v = rawget(sd, name)
    if v == nil then
      missing[#missing + 1] = name
    elseif not core.is_tensor(v) then
      problems[#problems + 1] = "'" .. name .. "' is a " .. type_name(v) .. ", expected a tensor"
    else
      local a, b = v:size(), target:size()
      local same = #a == #b
      for d = 1, #a do same = same and a[d] == b[d] end
      if not same then
        problems[#problems + 1] = "size mismatch for " .. name .. ": copying a tensor of shape " .. shape_text(v) ..
                                  " into a " .. e[3] .. " of shape " .. shape_text(target)
      end
    end
  end
  for k in next, sd do
    if not expected[k] then unexpected[#unexpected + 1] = tostring(k) end
  end
  table.sort(unexpected)
  local errors = {}
  if strict and #missing > 0 then errors[#errors + 1] = "missing keys: " .. table.concat(missing, ", ") end
  if strict and #unexpected > 0 then errors[#errors + 1] = "unexpected keys: " .. table.concat(unexpected, ", ") end
  for _, p in ipairs(problems) do errors[#errors + 1] = p end
  if #errors > 0 then
    fail("load_state_dict: error(s) in loading the state_dict of " .. self.__name .. ": " .. table.concat(errors, "; "))
  end
  do
    local _ <close> = core.no_grad()
    for _, e in ipairs(entries) do
      local v = rawget(sd, e[1])
      if v ~= nil then copy_into(e[2], v) end
    end
  end
  return missing, unexpected
end

return S
