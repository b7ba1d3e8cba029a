-- dt.distribute_module(module, mesh, partition_fn, input_fn, output_fn): PyTorch's
-- torch.distributed.tensor.distribute_module (doc/parallel.md).  partition_fn(name,
-- submodule, mesh) runs on every submodule (the root is ""), and may turn parameters into
-- DTensors; every parameter and buffer it leaves plain is then replicated on the mesh.
-- input_fn(module, inputs, mesh) and output_fn(module, output, mesh) become a forward
-- pre-hook and a forward hook of the module.
local core = require "dtensor.core"
local L = require "dtensor.parallel.layouts"
local M = {}

local function replicated(mesh)
  local r = {}
  for d = 1, mesh.ndim do r[d] = core.Replicate() end
  return r
end

-- the plain parameters and buffers that m holds itself, as replicated DTensors (the values
-- of the mesh's first rank: distribute_tensor broadcasts them)
local function replicate_plain(m, mesh)
  for _, name in ipairs(m._param_names or {}) do
    local p = m._parameters[name]
    if p ~= nil and not core.is_dtensor(p) then m[name] = L.distribute_param(p, mesh, replicated(mesh)) end
  end
  for _, name in ipairs(m._buffer_names or {}) do
    local b = m._buffers[name]
    if b ~= nil and not core.is_dtensor(b) then m[name] = core.distribute_tensor(b, mesh, replicated(mesh)) end
  end
end

-- The mesh argument, or the current mesh
function M.mesh_arg(mesh, who, level)
  if mesh == nil then
    mesh = core.current_mesh()
    if not mesh then error(who .. ": no device mesh given and no current mesh", level + 1) end
  elseif not L.is_mesh(mesh) then
    error(who .. ": expected a DeviceMesh, got " .. (core.is_tensor(mesh) and "a tensor" or type(mesh)), level + 1)
  end
  return mesh
end

-- A pre-hook's inputs from what input_fn returned: a list (kept), a single value (a list of
-- one, as PyTorch wraps a non-tuple), nil (unchanged)
local function as_inputs(r)
  if r == nil or (type(r) == "table" and not core.is_tensor(r)) then return r end
  return {r, n = 1}
end

function M.distribute_module(module, mesh, partition_fn, input_fn, output_fn)
  local who = "distribute_module"
  if not L.is_module(module) then error(who .. ": expected a dt.nn.Module, got " .. type(module), 2) end
  mesh = M.mesh_arg(mesh, who, 2)
  for i, f in ipairs {{partition_fn, "partition_fn"}, {input_fn, "input_fn"}, {output_fn, "output_fn"}} do
    if f[1] ~= nil and type(f[1]) ~= "function" then
      error(who .. ": " .. f[2] .. " (argument " .. (i + 2) .. ") must be a function or nil, got " .. type(f[1]), 2)
    end
  end
  if rawget(module, "_distribute_module_applied") then
    error(who .. ": distribute_module should only be called once on a module, but it has already been called on " ..
          "this module", 2)
  end
  for _, entry in ipairs(module:named_modules()) do
    local name, sub = entry[1], entry[2]
    if partition_fn then partition_fn(name, sub, mesh) end
    replicate_plain(sub, mesh)
  end
  if input_fn then
    module:register_forward_pre_hook(function(m, inputs) return as_inputs(input_fn(m, inputs, mesh)) end)
  end
  if output_fn then
    module:register_forward_hook(function(m, _, output) return output_fn(m, output, mesh) end)
  end
  rawset(module, "_distribute_module_applied", true)
  return module
end

return M
