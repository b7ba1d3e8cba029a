-- dt.nn.Module: the base class of neural-network modules (PyTorch's torch.nn.Module).
--
-- THE CONTRACT (layers, optimizers, parallel styles and user modules are written against it):
--
-- * Classes.  `local Block = dt.nn.Module:extend("Block")` makes a subclass (extend works on
--   any subclass too).  `function Block:init(...)` is the constructor body, run after the
--   base's own setup; `function Block:forward(...)` the computation.  `Block(...)` makes an
--   instance; `m(...)` runs forward with the hooks.  The class is the instance's metatable;
--   `cls.super` is its parent class, `cls.__name` its name.  A subclass's init may call its
--   parent's: `Linear.init(self, ...)`.
-- * Parameters: `self:register_parameter(name, t)` (t a floating-point tensor or DTensor; it
--   is made to require grad, a non-leaf is detached first, as torch's nn.Parameter(t);
--   nil removes it), kept in `self._parameters[name]`, their order in `self._param_names`
--   (registration order: the iteration order, the same on every rank).  Buffers:
--   `self:register_buffer(name, t, persistent = true)` (`_buffers`, `_buffer_names`; no
--   grad; in the state_dict unless not persistent).  Submodules: `self:add_module(name, m)`
--   (`_modules`, `_module_names`).  Names are non-empty strings without dots, and one name
--   is one thing: a parameter, a buffer, a submodule, a method or a plain field.
-- * Fields: `m.weight`, `m.fc1` read parameters, buffers and submodules.  `m.weight = t`
--   replaces an existing parameter in place of the old one (how distribute_module and the
--   parallel styles swap a parameter for a DTensor), `m.buf = t` an existing buffer,
--   `m.fc1 = Linear(...)` registers (or replaces) a submodule, `m.x = nil` removes what x
--   names; any other assignment is a plain field.
-- * Iteration (lists, in registration order, recursing depth first):
--   `m:named_parameters(prefix?, recurse = true)` -> { {"fc1.weight", t}, ... } (each tensor
--   once, under its first name), `m:parameters()` -> {t, ...}; `named_buffers`/`buffers`;
--   `m:named_modules(prefix?)` -> { {"", m}, {"fc1", fc1}, ... } (each module once);
--   `m:children()`, `m:named_children()`; `m:get_submodule("layers.1.attn")`,
--   `m:get_parameter("fc1.weight")`.
-- * Hooks: `m:register_forward_pre_hook(fn)`, fn(module, inputs) with inputs the list of
--   forward's arguments (`inputs.n` its length) returning nil or a replacement list (a
--   non-table value stands for a list of one); `m:register_forward_hook(fn)`,
--   fn(module, inputs, output) returning nil or a replacement output (output: forward's
--   first result; further results pass through).  Both return a handle with `:remove()`.
--   `m(...)` = pre hooks, forward, hooks, each in registration order.
-- * State: `m:state_dict()` -> a table name -> tensor (parameters and persistent buffers,
--   dotted names, detached; DTensors stay DTensors; `pairs` walks it in the module's order).
--   `m:load_state_dict(sd, {strict = true})` copies the values into the existing tensors
--   in place under dt.no_grad (a DTensor target takes a plain full tensor, distributed as
--   dt.distribute_tensor does, or a DTensor, redistributed to its placements; a DTensor
--   value into a plain target is gathered, and left alone on a rank outside its mesh).  Missing and unexpected keys (strict) and shape
--   mismatches raise one error naming them all, before anything is copied; returns the lists
--   of missing and unexpected keys.
-- * Modes and conversions: `m:train(flag = true)`/`m:eval()` set `training` recursively;
--   `m:to(dtype)` converts the floating-point parameters (new leaves keeping requires_grad,
--   and their .grad) and buffers; `m:apply(fn)` calls fn on every module, children first;
--   `m:zero_grad(set_to_none = true)`; `m:requires_grad_(flag = true)`.  Each returns m
--   (zero_grad nothing).
-- * `tostring(m)`: the tree as torch prints it, `Linear(in_features=4, out_features=8,
--   bias=true)`, with a line per parameter and buffer: shape, dtype and, for DTensors, the
--   placements and the mesh's shape.  A class describes itself by `extra_repr()`.
--
-- This file returns {nn = {Module =, is_module =}}: init.lua installs them into dt.nn.
local core = require "dtensor.core"
local C = require "dtensor.nn.checks"
local fail, type_name, is_float_tensor, is_module = C.fail, C.type_name, C.is_float_tensor, C.is_module

-- ---- classes ----

local function is_class(c) return type(c) == "table" and rawget(c, "__is_module_class") == true end

-- A class's __index: the instance's parameters, buffers and submodules, then (integer keys)
-- the class's _item, then the class and its ancestors.
local function make_index(cls)
  return function(self, k)
    local p = rawget(self, "_parameters")
    if p then
      local v = p[k]
      if v ~= nil then return v end
      v = rawget(self, "_buffers")[k]
      if v ~= nil then return v end
      v = rawget(self, "_modules")[k]
      if v ~= nil then return v end
    end
    if math.type(k) == "integer" then
      local item = cls._item
      if item then return item(self, k) end
    end
    return cls[k]
  end
end

-- the base's own setup: the registries, modes and hooks every module has
local function setup(self)
  rawset(self, "_parameters", {})
  rawset(self, "_param_names", {})
  rawset(self, "_buffers", {})
  rawset(self, "_buffer_names", {})
  rawset(self, "_non_persistent", {})
  rawset(self, "_modules", {})
  rawset(self, "_module_names", {})
  rawset(self, "_forward_pre_hooks", {})
  rawset(self, "_forward_hooks", {})
  rawset(self, "training", true)
end

local function construct(cls, ...)
  local self = setmetatable({}, cls)
  setup(self)
  cls.init(self, ...)
  return self
end

local Module = {__name = "Module", __is_module_class = true}
Module.__index = make_index(Module)
setmetatable(Module, {__call = construct, __tostring = function() return "class Module" end})

-- metamethods a subclass inherits (Lua reads them from the metatable itself, not through
-- __index); __index is made per class
local METAMETHODS = {"__newindex", "__call", "__tostring", "__len"}

function Module.extend(parent, name)
  if not is_class(parent) then fail("extend: call it on a class (dt.nn.Module:extend(name)), got " .. type_name(parent)) end
  if type(name) ~= "string" or name == "" then fail("extend: the class needs a name (a string), got " .. type_name(name)) end
  local cls = {__name = name, super = parent, __is_module_class = true}
  for _, mm in ipairs(METAMETHODS) do cls[mm] = parent[mm] end
  cls.__index = make_index(cls)
  return setmetatable(cls, {__index = parent, __call = construct, __tostring = function() return "class " .. name end})
end

function Module.init() end

function Module.forward(self)
  fail("forward: " .. self.__name .. " does not define forward")
end

function Module.extra_repr() return "" end

-- ---- registration ----

local KINDS = {_parameters = "parameter", _buffers = "buffer", _modules = "submodule"}

-- name must be free for `kind` (one of KINDS' keys): not another kind's, a method or a field
local function check_name(op, self, name, kind)
  if type(name) ~= "string" then fail(op .. ": the name must be a string, got " .. type_name(name)) end
  if name == "" then fail(op .. ": the name must not be empty") end
  if name:find(".", 1, true) then fail(op .. ": the name must not contain '.', got '" .. name .. "'") end
  for k, what in pairs(KINDS) do
    if k ~= kind and rawget(self, k)[name] ~= nil then
      fail(op .. ": '" .. name .. "' is already a " .. what .. " of " .. self.__name)
    end
  end
  if rawget(self, name) ~= nil then fail(op .. ": '" .. name .. "' is already a field of " .. self.__name) end
  if getmetatable(self)[name] ~= nil then fail(op .. ": '" .. name .. "' is already a method of " .. self.__name) end
end

local function remove_name(list, name)
  for i, n in ipairs(list) do
    if n == name then table.remove(list, i) return end
  end
end

-- stores v under name in registry and its order list (replacing in place, or appending)
local function put(self, registry, order, name, v)
  local reg, names = rawget(self, registry), rawget(self, order)
  if v == nil then
    if reg[name] ~= nil then remove_name(names, name) end
  elseif reg[name] == nil then
    names[#names + 1] = name
  end
  reg[name] = v
end

function Module.register_parameter(self, name, t)
  check_name("register_parameter", self, name, "_parameters")
  if t ~= nil then
    if not core.is_tensor(t) then
      fail("register_parameter: parameter '" .. name .. "' must be a tensor or nil, got " .. type_name(t))
    end
    if not is_float_tensor(t) then
      fail("register_parameter: parameter '" .. name .. "' must be a floating-point tensor, got " .. t.dtype ..
           " (register integer tensors as buffers)")
    end
    if t.grad_fn ~= nil then t = t:detach() end -- a parameter is a leaf: torch's nn.Parameter(t)
    if not t.requires_grad then t:requires_grad_(true) end
  end
  put(self, "_parameters", "_param_names", name, t)
end

function Module.register_buffer(self, name, t, persistent)
  check_name("register_buffer", self, name, "_buffers")
  if t ~= nil and not core.is_tensor(t) then
    fail("register_buffer: buffer '" .. name .. "' must be a tensor or nil, got " .. type_name(t))
  end
  put(self, "_buffers", "_buffer_names", name, t)
  rawget(self, "_non_persistent")[name] = (t ~= nil and persistent == false) or nil
end

function Module.add_module(self, name, m)
  check_name("add_module", self, name, "_modules")
  if m ~= nil and not is_module(m) then
    fail("add_module: submodule '" .. name .. "' must be a Module or nil, got " .. type_name(m))
  end
  put(self, "_modules", "_module_names", name, m)
end
Module.register_module = Module.add_module

-- Assignment to a name that is not a plain field: parameters, buffers and submodules are
-- replaced or removed, a module registered; anything else becomes a plain field.
function Module.__newindex(self, k, v)
  if math.type(k) == "integer" then
    local set = getmetatable(self)._set_item
    if set then return set(self, k, v) end
  end
  local params, buffers, modules = rawget(self, "_parameters"), rawget(self, "_buffers"), rawget(self, "_modules")
  if is_module(v) then
    put(self, "_parameters", "_param_names", k, nil)
    put(self, "_buffers", "_buffer_names", k, nil)
    Module.add_module(self, k, v)
  elseif params[k] ~= nil then
    Module.register_parameter(self, k, v)
  elseif buffers[k] ~= nil then
    Module.register_buffer(self, k, v, not rawget(self, "_non_persistent")[k])
  elseif modules[k] ~= nil then
    if v ~= nil then
      fail("cannot assign a " .. type_name(v) .. " to submodule '" .. tostring(k) .. "' of " .. self.__name ..
            " (a Module, or nil to remove it)")
    end
    put(self, "_modules", "_module_names", k, nil)
  else
    rawset(self, k, v)
  end
end

-- ---- iteration ----

local function join(prefix, name) return prefix == "" and name or prefix .. "." .. name end

-- {name, module} pairs of self and its descendants, depth first, each module once
function Module.named_modules(self, prefix, memo, out)
  prefix, memo, out = prefix or "", memo or {}, out or {}
  if memo[self] then return out end
  memo[self] = true
  out[#out + 1] = {prefix, self}
  for _, name in ipairs(rawget(self, "_module_names")) do
    Module.named_modules(rawget(self, "_modules")[name], join(prefix, name), memo, out)
  end
  return out
end

function Module.modules(self)
  local out = {}
  for i, p in ipairs(Module.named_modules(self)) do out[i] = p[2] end
  return out
end

function Module.named_children(self)
  local out, seen = {}, {}
  for _, name in ipairs(rawget(self, "_module_names")) do
    local m = rawget(self, "_modules")[name]
    if not seen[m] then
      seen[m] = true
      out[#out + 1] = {name, m}
    end
  end
  return out
end

function Module.children(self)
  local out = {}
  for i, p in ipairs(Module.named_children(self)) do out[i] = p[2] end
  return out
end

-- {name, tensor} of a registry over the modules (recursively unless recurse == false),
-- each tensor once
local function named(self, registry, order, prefix, recurse)
  prefix = prefix or ""
  local mods = recurse == false and {{prefix, self}} or Module.named_modules(self, prefix)
  local out, seen = {}, {}
  for _, mp in ipairs(mods) do
    local m = mp[2]
    local reg = rawget(m, registry)
    for _, name in ipairs(rawget(m, order)) do
      local t = reg[name]
      if not seen[t] then
        seen[t] = true
        out[#out + 1] = {join(mp[1], name), t}
      end
    end
  end
  return out
end

local function values(pairs_list)
  local out = {}
  for i, p in ipairs(pairs_list) do out[i] = p[2] end
  return out
end

function Module.named_parameters(self, prefix, recurse)
  return named(self, "_parameters", "_param_names", prefix, recurse)
end
function Module.parameters(self, recurse) return values(named(self, "_parameters", "_param_names", "", recurse)) end
function Module.named_buffers(self, prefix, recurse)
  return named(self, "_buffers", "_buffer_names", prefix, recurse)
end
function Module.buffers(self, recurse) return values(named(self, "_buffers", "_buffer_names", "", recurse)) end

function Module.get_submodule(self, target)
  if type(target) ~= "string" then fail("get_submodule: the target must be a string, got " .. type_name(target)) end
  if target == "" then return self end
  local m, path = self, ""
  for name in (target .. "."):gmatch("([^.]*)%.") do
    local child = rawget(m, "_modules")[name]
    if child == nil then
      fail("get_submodule: " .. m.__name .. (path == "" and "" or " '" .. path .. "'") .. " has no submodule '" ..
           name .. "' (in '" .. target .. "')")
    end
    m, path = child, join(path, name)
  end
  return m
end

function Module.get_parameter(self, target)
  if type(target) ~= "string" then fail("get_parameter: the target must be a string, got " .. type_name(target)) end
  local path, name = target:match("^(.*)%.([^.]*)$")
  if not path then path, name = "", target end
  local ok, m = pcall(Module.get_submodule, self, path)
  if not ok then fail((m:gsub("^get_submodule", "get_parameter"))) end
  local t = rawget(m, "_parameters")[name]
  if t == nil then fail("get_parameter: " .. m.__name .. " has no parameter '" .. name .. "' (in '" .. target .. "')") end
  return t
end

-- ---- hooks and calling ----

local Handle = {}
Handle.__index = Handle
function Handle.remove(h)
  local list = h._list
  for i, entry in ipairs(list) do
    if entry == h._entry then table.remove(list, i) return end
  end
end

local function add_hook(op, self, list_name, fn)
  if type(fn) ~= "function" and not (getmetatable(fn) and getmetatable(fn).__call) then
    fail(op .. ": the hook must be a function, got " .. type_name(fn))
  end
  local list, entry = rawget(self, list_name), {fn = fn}
  list[#list + 1] = entry
  return setmetatable({_list = list, _entry = entry}, Handle)
end

function Module.register_forward_pre_hook(self, fn)
  return add_hook("register_forward_pre_hook", self, "_forward_pre_hooks", fn)
end
function Module.register_forward_hook(self, fn)
  return add_hook("register_forward_hook", self, "_forward_hooks", fn)
end

local function snapshot(list) -- a hook that removes itself must not skip the next one
  local out = {}
  for i, e in ipairs(list) do out[i] = e.fn end
  return out
end

function Module.__call(self, ...)
  local pre, post = rawget(self, "_forward_pre_hooks"), rawget(self, "_forward_hooks")
  if #pre == 0 and #post == 0 then return self:forward(...) end
  local inputs = table.pack(...)
  for _, fn in ipairs(snapshot(pre)) do
    local r = fn(self, inputs)
    if r ~= nil then
      if type(r) ~= "table" or is_module(r) then r = {r, n = 1} end
      r.n = r.n or #r
      inputs = r
    end
  end
  if #post == 0 then return self:forward(table.unpack(inputs, 1, inputs.n)) end
  local out = table.pack(self:forward(table.unpack(inputs, 1, inputs.n)))
  for _, fn in ipairs(snapshot(post)) do
    local r = fn(self, inputs, out[1])
    if r ~= nil then out[1] = r end
  end
  return table.unpack(out, 1, math.max(out.n, 1))
end

-- ---- state_dict (nn/state_dict.lua) ----

local state = require "dtensor.nn.state_dict"
Module.state_dict, Module.load_state_dict = state.state_dict, state.load_state_dict

-- ---- modes and conversions ----

function Module.train(self, mode)
  if mode == nil then mode = true end
  if type(mode) ~= "boolean" then fail("train: mode must be a boolean, got " .. type_name(mode)) end
  rawset(self, "training", mode)
  for _, child in ipairs(Module.children(self)) do child:train(mode) end
  return self
end

function Module.eval(self) return self:train(false) end

function Module.apply(self, fn)
  for _, child in ipairs(Module.children(self)) do child:apply(fn) end
  fn(self)
  return self
end

function Module.requires_grad_(self, flag)
  if flag == nil then flag = true end
  for _, p in ipairs(Module.parameters(self)) do p:requires_grad_(flag) end
  return self
end

function Module.zero_grad(self, set_to_none)
  local _ <close> = core.no_grad()
  for _, p in ipairs(Module.parameters(self)) do
    if p.grad ~= nil then
      if set_to_none == false then p.grad:zero_() else p.grad = nil end
    end
  end
end

local FLOAT_DTYPES = {float32 = true, float64 = true, bfloat16 = true, float16 = true}
local DTYPE_ALIASES = {float = "float32", double = "float64", half = "float16"}

-- t in dtype: a new leaf (made under no_grad) with t's requires_grad and its .grad converted
local function converted(t, dtype)
  if t.dtype == dtype or not is_float_tensor(t) then return t end
  local new
  do
    local _ <close> = core.no_grad()
    new = t:to(dtype)
  end
  if t.requires_grad then new:requires_grad_(true) end
  local g = t.grad
  if g ~= nil then new.grad = g:to(dtype) end
  return new
end

function Module.to(self, dtype)
  if type(dtype) == "table" and not core.is_tensor(dtype) then dtype = dtype.dtype end
  if dtype == "cpu" then return self end -- the only device: nothing moves
  dtype = DTYPE_ALIASES[dtype] or dtype
  if not FLOAT_DTYPES[dtype] then
    fail("to: modules convert to a floating-point dtype (float32, float64, bfloat16, float16), got " .. tostring(dtype))
  end
  local memo = {} -- a tensor shared by two modules stays shared
  for _, mp in ipairs(Module.named_modules(self)) do -- in order: the same on every rank
    for _, reg in ipairs {{"_parameters", "_param_names"}, {"_buffers", "_buffer_names"}} do
      local r = rawget(mp[2], reg[1])
      for _, name in ipairs(rawget(mp[2], reg[2])) do
        local t = r[name]
        memo[t] = memo[t] or converted(t, dtype)
        r[name] = memo[t]
      end
    end
  end
  return self
end

function Module.float(self) return self:to("float32") end
function Module.double(self) return self:to("float64") end
function Module.half(self) return self:to("float16") end
function Module.bfloat16(self) return self:to("bfloat16") end

-- ---- printing (nn/module_repr.lua) ----

Module.__tostring = require("dtensor.nn.module_repr").describe


return {nn = {Module = Module, is_module = is_module}}
