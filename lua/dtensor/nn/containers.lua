-- Containers (torch.nn's): Sequential, ModuleList, ModuleDict.  Their children are ordinary
-- submodules, named "1", "2", ... by position (Lua's 1-based indices; a ModuleDict or a
-- Sequential built from pairs: by key), so the state_dict keys read "layers.1.weight".
--   Sequential(m1, m2, ...) or Sequential({{"name", m}, ...}): forward feeds each module's
--   output to the next (the first gets all the arguments).
--   ModuleList({m1, m2, ...}): a list without forward: ml[i] (negative from the end; nil out of
--   range, as a Lua list), #ml,
--   ipairs(ml), ml[i] = m (replace), ml:append(m), ml:extend(list), ml:insert(i, m).
--   ModuleDict(t): t a table name -> module (its keys taken in sorted order) or a list of
--   {name, module} pairs (in that order): md.name, md[name], #md, md:keys(), md:values(),
--   md:items(), md:update(t), md:pop(name).
local Module = require("dtensor.nn.module").nn.Module
local is_module = require("dtensor.nn.module").nn.is_module
local C = require "dtensor.nn.checks"

-- ---- indexing by position (Sequential and ModuleList) ----

-- the 1-based position of i (negative from the end) among n, or an error naming op
local function position(self, op, i, n)
  local p = i < 0 and n + 1 + i or i
  if p < 1 or p > n then
    C.fail(op .. ": index " .. i .. " is out of range for a " .. self.__name .. " of " .. n .. " modules")
  end
  return p
end

-- m[i]: nil out of range, as for a Lua list (so ipairs stops there)
local function item(self, i)
  local names = rawget(self, "_module_names")
  local name = names[i < 0 and #names + 1 + i or i]
  return name and rawget(self, "_modules")[name]
end

local function length(self) return #rawget(self, "_module_names") end

local function module_arg(op, m, what)
  if not is_module(m) then C.fail(op .. ": " .. what .. " must be a Module, got " .. C.type_name(m)) end
  return m
end

-- the {name, module} pairs of a constructor's table: a list of pairs kept in order, or a
-- table name -> module taken in sorted key order
local function named_list(op, t)
  if type(t) ~= "table" or is_module(t) then C.fail(op .. ": expected a table of modules, got " .. C.type_name(t)) end
  local out = {}
  if #t > 0 then
    for i, p in ipairs(t) do
      if type(p) ~= "table" or is_module(p) or type(p[1]) ~= "string" then
        C.fail(op .. ": entry " .. i .. " must be a {name, module} pair, got " .. C.type_name(p))
      end
      out[i] = {p[1], module_arg(op, p[2], "entry " .. i .. "'s module")}
    end
    return out
  end
  local keys = {}
  for k in pairs(t) do
    if type(k) ~= "string" then C.fail(op .. ": keys must be strings, got " .. C.type_name(k)) end
    keys[#keys + 1] = k
  end
  table.sort(keys)
  for i, k in ipairs(keys) do out[i] = {k, module_arg(op, t[k], "'" .. k .. "'")} end
  return out
end

-- ---- Sequential ----

local Sequential = Module:extend("Sequential")
Sequential._item, Sequential.__len = item, length

function Sequential:init(...)
  local first = ...
  if select("#", ...) == 1 and type(first) == "table" and not is_module(first) then
    for _, p in ipairs(named_list("Sequential", first)) do self:add_module(p[1], p[2]) end
    return
  end
  for i = 1, select("#", ...) do
    self:add_module(tostring(i), module_arg("Sequential", select(i, ...), "argument " .. i))
  end
end

function Sequential:forward(...)
  local names = rawget(self, "_module_names")
  if #names == 0 then return ... end
  local modules = rawget(self, "_modules")
  local x = modules[names[1]](...)
  for i = 2, #names do x = modules[names[i]](x) end
  return x
end

function Sequential:append(m)
  self:add_module(tostring(#self + 1), module_arg("append", m, "the module"))
  return self
end

-- ---- ModuleList ----

local ModuleList = Module:extend("ModuleList")
ModuleList._item, ModuleList.__len = item, length

-- renames the children "1".."n" in list order
local function renumber(self, list)
  local modules, names = rawget(self, "_modules"), rawget(self, "_module_names")
  for k in pairs(modules) do modules[k] = nil end
  for i = #names, 1, -1 do names[i] = nil end
  for i, m in ipairs(list) do
    modules[tostring(i)] = m
    names[i] = tostring(i)
  end
end

local function list_of(self)
  local out = {}
  for i, name in ipairs(rawget(self, "_module_names")) do out[i] = rawget(self, "_modules")[name] end
  return out
end

function ModuleList:init(list)
  if list ~= nil then self:extend(list) end
end

function ModuleList:append(m)
  self:add_module(tostring(#self + 1), module_arg("append", m, "the module"))
  return self
end

function ModuleList:extend(list)
  if type(list) ~= "table" or is_module(list) then C.fail("extend: expected a list of modules, got " .. C.type_name(list)) end
  for i, m in ipairs(list) do module_arg("extend", m, "entry " .. i) end
  for _, m in ipairs(list) do self:append(m) end
  return self
end

-- inserts m before position i (#ml + 1: at the end); the later modules move up one
function ModuleList:insert(i, m)
  module_arg("insert", m, "the module")
  local list = list_of(self)
  if math.type(i) ~= "integer" then C.fail("insert: the index must be an integer, got " .. C.type_name(i)) end
  local p = i < 0 and #list + 1 + i or i
  if p < 1 or p > #list + 1 then C.fail("insert: index " .. i .. " is out of range for a ModuleList of " .. #list .. " modules") end
  table.insert(list, p, m)
  renumber(self, list)
  return self
end

-- ml[i] = m replaces the module at i; ml[i] = nil removes it (the later ones move down)
function ModuleList:_set_item(i, m)
  local list = list_of(self)
  local p = position(self, "ModuleList", i, #list)
  if m == nil then table.remove(list, p)
  else list[p] = module_arg("ModuleList", m, "the module") end
  renumber(self, list)
end

function ModuleList.forward()
  C.fail("forward: ModuleList has no forward (iterate over its modules)")
end

-- ---- ModuleDict ----

local ModuleDict = Module:extend("ModuleDict")
ModuleDict.__len = length

function ModuleDict:init(t)
  if t ~= nil then self:update(t) end
end

function ModuleDict:update(t)
  for _, p in ipairs(named_list("update", t)) do
    if rawget(self, "_modules")[p[1]] then self[p[1]] = p[2] else self:add_module(p[1], p[2]) end
  end
  return self
end

function ModuleDict:keys()
  return table.move(rawget(self, "_module_names"), 1, #self, 1, {})
end

function ModuleDict:values() return list_of(self) end

function ModuleDict:items()
  local out = {}
  for i, name in ipairs(rawget(self, "_module_names")) do out[i] = {name, rawget(self, "_modules")[name]} end
  return out
end

function ModuleDict:pop(key)
  local m = rawget(self, "_modules")[key]
  if m == nil then C.fail("pop: ModuleDict has no key '" .. tostring(key) .. "'") end
  self[key] = nil
  return m
end

function ModuleDict.forward()
  C.fail("forward: ModuleDict has no forward (index its modules)")
end

return {nn = {Sequential = Sequential, ModuleList = ModuleList, ModuleDict = ModuleDict}}
