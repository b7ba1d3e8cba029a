-- The parallel styles' common shape (PyTorch's ParallelStyle): a style is a value that
-- parallelize_module applies to a module with style:apply(module, mesh, src_rank).
-- Each style's file gives its name, its options and its apply.
local M = {}
local Style = {}
Style.__index = Style
Style.__name = "ParallelStyle"
function Style:__tostring() return self._describe(self) end

function M.is_style(x) return getmetatable(x) == Style end

-- A constructor `Name(opts)`: check(opts) returns the fields of the style (raising with the
-- style's name), apply(style, module, mesh, src_rank) parallelises a module, describe(style)
-- is its tostring.
function M.define(name, check, apply, describe)
  return function(opts)
    local s = check(opts, name)
    s._name, s.apply, s._describe = name, apply, describe
    return setmetatable(s, Style)
  end
end

-- "Name(key=value, ...)" for the listed keys that are set
function M.describe(keys)
  return function(s)
    local parts = {}
    for _, k in ipairs(keys) do
      local v = s[k]
      if v ~= nil then
        if type(v) == "table" and getmetatable(v) == nil then
          local items = {}
          for i, p in ipairs(v) do items[i] = p == false and "nil" or tostring(p) end
          v = "(" .. table.concat(items, ", ") .. ")"
        end
        parts[#parts + 1] = k .. "=" .. tostring(v)
      end
    end
    return s._name .. "(" .. table.concat(parts, ", ") .. ")"
  end
end

return M
