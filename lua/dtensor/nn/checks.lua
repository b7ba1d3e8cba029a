-- Argument checks shared by the dt.nn files: errors that name the function and the values,
-- raised at the user's line (the first caller outside lua/dtensor/nn).  A helper module:
-- required by the nn files, installed nowhere.
local core = require "dtensor.core"
local C = {}

local function in_nn(source) return source:find("dtensor/nn/[%w_]+%.lua$") ~= nil end

-- error(msg) blaming the first caller outside the nn files
function C.fail(msg)
  local level = 2
  while true do
    local info = debug.getinfo(level, "S")
    if not info or not in_nn(info.source) then break end
    level = level + 1
  end
  error(msg, level)
end

-- true when v is a module (an instance of cls or one of its subclasses, when cls is given):
-- a table whose metatable is a class made by dt.nn.Module:extend
function C.is_module(v, cls)
  if type(v) ~= "table" then return false end
  local c = getmetatable(v)
  if type(c) ~= "table" or rawget(c, "__is_module_class") ~= true then return false end
  if cls == nil then return true end
  while c do
    if c == cls then return true end
    c = rawget(c, "super")
  end
  return false
end

-- "[2, 3]": a tensor's (global) shape in messages and printouts
function C.shape_text(t) return "[" .. table.concat(t:size(), ", ") .. "]" end

-- The type of v as errors name it: a module's class name, a userdata's protected metatable.
function C.type_name(v)
  local mt = getmetatable(v)
  if C.is_module(v) then return mt.__name end
  return type(mt) == "string" and mt or type(v)
end

-- opts (nil or a table) with only the allowed keys; returns it (or {})
function C.options(op, opts, allowed)
  if opts == nil then return {} end
  if type(opts) ~= "table" or core.is_tensor(opts) then C.fail(op .. ": options must be a table, got " .. C.type_name(opts)) end
  for k in pairs(opts) do
    if not allowed[k] then C.fail(op .. ": unknown option '" .. tostring(k) .. "'") end
  end
  return opts
end

function C.is_float_tensor(t) return core.is_tensor(t) and t.dtype:find("float", 1, true) ~= nil end

-- a positive integer argument
function C.positive_int(op, what, v)
  if math.type(v) ~= "integer" or v < 1 then
    C.fail(op .. ": " .. what .. " must be a positive integer, got " .. (type(v) == "number" and tostring(v) or C.type_name(v)))
  end
  return v
end

-- a floating-point dtype (default float32)
local FLOAT = {float32 = true, float64 = true, bfloat16 = true, float16 = true}
function C.float_dtype(op, dtype)
  if dtype == nil then return "float32" end
  if not FLOAT[dtype] then
    C.fail(op .. ": dtype must be a floating-point dtype (float32, float64, bfloat16, float16), got " .. tostring(dtype))
  end
  return dtype
end

return C
