-- PrepareModuleInput and PrepareModuleOutput (PyTorch's styles of those names,
-- doc/parallel.md): they convert a module's inputs (a forward pre-hook) or its output (a
-- forward hook) and leave its parameters alone.  One layout per input or output; `false`
-- leaves that value as it is.  A plain tensor is this rank's part of a tensor with the given
-- layout (dt.from_local), a DTensor is taken as it is; then it is redistributed to the
-- desired layout, and with use_local_output its local tensor is passed on.
local core = require "dtensor.core"
local L = require "dtensor.parallel.layouts"
local style = require "dtensor.parallel.style"
local M = {}

-- the layout lists `given` and `desired` (option names), of the same length
local function layout_pair(opts, name, given, desired, use_local_default)
  local g = L.layout_list(opts[given], name, given, 4)
  local d = L.layout_list(opts[desired], name, desired, 4)
  if (g == nil) ~= (d == nil) then error(name .. ": " .. given .. " and " .. desired .. " go together", 4) end
  if g and #g ~= #d then
    error(name .. ": " .. given .. " and " .. desired .. " should have the same length, got " .. #g .. " and " .. #d, 4)
  end
  for i = 1, g and #g or 0 do
    if (g[i] == false) ~= (d[i] == false) then
      error(name .. ": " .. given .. "[" .. i .. "] and " .. desired .. "[" .. i .. "] must both be a layout or both false", 4)
    end
  end
  return {[given] = g, [desired] = d,
          use_local_output = L.boolean(opts.use_local_output, use_local_default, name, "use_local_output", 4)}
end

-- value v of a module (what: "input 2") brought from layout `given` to `desired`
local function prepare(v, mesh, given, desired, use_local, what)
  if given == false then return v end
  if not core.is_dtensor(v) then v = L.as_dtensor(v, mesh, given, what, 0) end
  return L.local_or(L.redistributed(v, desired), use_local)
end

-- ---- PrepareModuleInput{input_layouts =, desired_input_layouts =, use_local_output = false}
local function check_input(opts, name)
  opts = L.options(opts, {input_layouts = true, desired_input_layouts = true, use_local_output = true}, name, 3)
  return layout_pair(opts, name, "input_layouts", "desired_input_layouts", false)
end

local function apply_input(s, module, mesh)
  if not s.input_layouts then return module end
  local name = s._name
  module:register_forward_pre_hook(function(_, inputs)
    local n = inputs.n or #inputs
    if n ~= #s.input_layouts then
      error(name .. ": the module got " .. n .. " inputs for " .. #s.input_layouts .. " input_layouts", 0)
    end
    local out = L.copy_inputs(inputs)
    for i = 1, n do
      out[i] = prepare(inputs[i], mesh, s.input_layouts[i], s.desired_input_layouts[i], s.use_local_output,
                       name .. ": the module's input " .. i)
    end
    return out
  end)
  return module
end

M.PrepareModuleInput = style.define("PrepareModuleInput", check_input, apply_input,
                                    style.describe {"input_layouts", "desired_input_layouts", "use_local_output"})

-- ---- PrepareModuleOutput{output_layouts =, desired_output_layouts =, use_local_output = true}
-- A module output that is a list (not a tensor) has one layout per element.
local function check_output(opts, name)
  opts = L.options(opts, {output_layouts = true, desired_output_layouts = true, use_local_output = true}, name, 3)
  local s = layout_pair(opts, name, "output_layouts", "desired_output_layouts", true)
  if not s.output_layouts then error(name .. ": output_layouts and desired_output_layouts are required", 3) end
  return s
end

local function apply_output(s, module, mesh)
  local name = s._name
  module:register_forward_hook(function(_, _, output)
    local single = core.is_tensor(output) or type(output) ~= "table"
    local outs = single and {output} or output
    if #outs ~= #s.output_layouts then
      error(name .. ": the module returned " .. #outs .. " outputs for " .. #s.output_layouts .. " output_layouts", 0)
    end
    local res = {}
    for i = 1, #outs do
      res[i] = prepare(outs[i], mesh, s.output_layouts[i], s.desired_output_layouts[i], s.use_local_output,
                       name .. ": the module's output " .. i)
    end
    return single and res[1] or res
  end)
  return module
end

M.PrepareModuleOutput = style.define("PrepareModuleOutput", check_output, apply_output,
                                     style.describe {"output_layouts", "desired_output_layouts", "use_local_output"})

return M
