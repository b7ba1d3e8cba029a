-- dt.parallel.parallelize_module(module, mesh, plan, {src_data_rank =}): PyTorch's
-- parallelize_module (doc/parallel.md).  plan is a style, applied to the module itself, or
-- a table {["path.to.module"] = style}: each path is split at dots and each part matched
-- against the names of the children at that level, with `*` (any characters) and `?` (one
-- character) as wildcards, so "layers.*.mlp.fc1" reaches fc1 in every layer.
local core = require "dtensor.core"
local L = require "dtensor.parallel.layouts"
local style = require "dtensor.parallel.style"
local mesh_arg = require("dtensor.parallel.distribute_module").mesh_arg
local M = {}

-- a Lua pattern matching exactly what the glob `token` matches
local function glob_pattern(token)
  local p = token:gsub("[%^%$%(%)%%%.%[%]%+%-]", "%%%0"):gsub("%*", ".*"):gsub("%?", ".")
  return "^" .. p .. "$"
end

-- the submodules of m that `path` (a list of glob tokens from i on) reaches, in
-- registration order, appended to out as {dotted name, module}
local function resolve(m, path, i, out, prefix)
  if i > #path then
    out[#out + 1] = {prefix, m}
    return out
  end
  local pattern = glob_pattern(path[i])
  for _, name in ipairs(m._module_names or {}) do
    if name:match(pattern) then
      resolve(m._modules[name], path, i + 1, out, prefix == "" and name or prefix .. "." .. name)
    end
  end
  return out
end

-- style:apply, its error prefixed with the caller's name and the module's path
local function apply(s, module, mesh, src, who, path)
  local ok, err = pcall(s.apply, s, module, mesh, src)
  if not ok then error(who .. ": " .. (path and ("'" .. path .. "': ") or "") .. tostring(err), 0) end
  return err
end

local function split_path(key)
  local parts = {}
  for part in (key .. "."):gmatch("([^.]*)%.") do parts[#parts + 1] = part end
  return parts
end

-- the plan's entries in a fixed order (a Lua table has none, and every rank must apply the
-- styles, and so issue distribute_tensor's collectives, in the same order): sorted by key
local function entries(plan, who)
  local keys = {}
  for k, v in pairs(plan) do
    if type(k) ~= "string" then error(who .. ": plan keys must be module paths (strings), got " .. type(k), 3) end
    if k == "" or k:find("..", 1, true) or k:match("^%.") or k:match("%.$") then
      error(who .. ": plan key '" .. k .. "' is not a module path (names joined by dots)", 3)
    end
    if not style.is_style(v) then
      error(who .. ": plan['" .. k .. "'] must be a parallel style (ColwiseParallel(), ...), got " ..
            (core.is_tensor(v) and "a tensor" or type(v)), 3)
    end
    keys[#keys + 1] = k
  end
  table.sort(keys)
  return keys
end

function M.parallelize_module(module, mesh, plan, opts)
  local who = "parallelize_module"
  if not L.is_module(module) then error(who .. ": expected a dt.nn.Module, got " .. type(module), 2) end
  mesh = mesh_arg(mesh, who, 2)
  if mesh.ndim ~= 1 then
    error(who .. ": tensor parallelism takes a 1-d mesh, got a " .. mesh.ndim .. "-d one; pass one dim of it " ..
          "(mesh[\"tp\"] or mesh:slice{...})", 2)
  end
  opts = L.options(opts, {src_data_rank = true}, who, 2)
  local src = opts.src_data_rank
  if src ~= nil and src ~= false and math.type(src) ~= "integer" then
    error(who .. ": src_data_rank must be a world rank or false, got " .. tostring(src), 2)
  end
  if style.is_style(plan) then return apply(plan, module, mesh, src, who) end
  if type(plan) ~= "table" or getmetatable(plan) ~= nil then
    error(who .. ": plan must be a parallel style or a table {module path = style}, got " .. type(plan), 2)
  end
  for _, key in ipairs(entries(plan, who)) do
    local targets = resolve(module, split_path(key), 1, {}, "")
    if #targets == 0 then error(who .. ": plan key '" .. key .. "' matches no submodule", 2) end
    for _, t in ipairs(targets) do apply(plan[key], t[2], mesh, src, who, t[1]) end
  end
  return module
end

return M
