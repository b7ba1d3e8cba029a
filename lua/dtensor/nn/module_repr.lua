-- tostring(module): the tree as torch prints it, a line per parameter and buffer with its
-- shape, dtype and, for DTensors, placements and the mesh's shape.  A helper module of
-- module.lua (its __tostring); it reads a module's registries (its raw fields) only.
local core = require "dtensor.core"
local shape_text = require("dtensor.nn.checks").shape_text

local function tensor_text(t)
  local s = shape_text(t) .. " " .. t.dtype
  if core.is_dtensor(t) then
    local ps = {}
    for i, p in ipairs(t.placements) do ps[i] = tostring(p) end
    s = s .. " (" .. table.concat(ps, ", ") .. ") on mesh [" .. table.concat(t.device_mesh:shape(), ", ") .. "]"
  end
  return s
end

local function indent(s) return (s:gsub("\n", "\n  ")) end

local function describe(m)
  local head = m.__name .. "(" .. m:extra_repr()
  local lines = {}
  for _, name in ipairs(rawget(m, "_param_names")) do
    lines[#lines + 1] = name .. ": " .. tensor_text(rawget(m, "_parameters")[name])
  end
  for _, name in ipairs(rawget(m, "_buffer_names")) do
    lines[#lines + 1] = name .. ": " .. tensor_text(rawget(m, "_buffers")[name]) .. " (buffer)"
  end
  local names = rawget(m, "_module_names")
  if #names == 0 then
    if #lines == 0 then return head .. ")" end
    return head .. ")\n  " .. table.concat(lines, "\n  ")
  end
  local out, extra = {m.__name .. "("}, m:extra_repr()
  if extra ~= "" then out[2] = "  " .. indent(extra) end
  for _, l in ipairs(lines) do out[#out + 1] = "  " .. l end
  for _, name in ipairs(names) do
    out[#out + 1] = "  (" .. name .. "): " .. indent(describe(rawget(m, "_modules")[name]))
  end
  out[#out + 1] = ")"
  return table.concat(out, "\n")
end

return {describe = describe}
