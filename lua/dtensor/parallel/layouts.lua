-- What the tensor-parallel styles share (doc/parallel.md): reading their options and layouts
-- (one placement per tensor, since tensor parallelism runs on a 1-d mesh), and bringing a
-- module's inputs and outputs to a layout with the differentiable conversions, so that
-- backward issues the mirrored collectives.
local core = require "dtensor.core"
local M = {}

-- error levels: the helpers raise `level` frames above their caller; 0 stays 0 (no position:
-- the hooks' errors, whose caller is the module's call machinery)
local function up(level) return level == 0 and 0 or level + 1 end

function M.is_mesh(x) return getmetatable(x) == "DeviceMesh" end

function M.is_module(x)
  return type(x) == "table" and type(x.named_parameters) == "function" and type(x.named_modules) == "function"
end

-- The name of the class of m, or of the first of its ancestors in `names` (a set), so that a
-- subclass of Linear is a Linear (as isinstance)
function M.class_in(m, names)
  local c = getmetatable(m)
  local first = type(c) == "table" and rawget(c, "__name") or "Module"
  while type(c) == "table" do
    local n = rawget(c, "__name")
    if n and names[n] then return n end
    c = rawget(c, "super")
  end
  return nil, first
end

-- a copy of a list of forward inputs (its n too, for trailing nils)
function M.copy_inputs(inputs)
  local c = {n = inputs.n}
  for i = 1, inputs.n or #inputs do c[i] = inputs[i] end
  return c
end

-- opts: nil or a table whose keys are all in `allowed`; `who` names the caller in errors
function M.options(opts, allowed, who, level)
  if opts == nil then return {} end
  if type(opts) ~= "table" or core.is_tensor(opts) then
    error(who .. ": options must be a table, got " .. type(opts), up(level))
  end
  for k in pairs(opts) do
    if not allowed[k] then error(who .. ": unknown option '" .. tostring(k) .. "'", up(level)) end
  end
  return opts
end

function M.boolean(v, default, who, name, level)
  if v == nil then return default end
  if type(v) ~= "boolean" then error(who .. ": " .. name .. " must be a boolean, got " .. type(v), up(level)) end
  return v
end

-- A placement object from an object or a shorthand string ("S1", "S-1", "R", "P", "P(max)").
function M.placement(p, who, level)
  if type(p) == "string" then
    local s = p
    if s == "R" then return core.Replicate() end
    if s == "P" then return core.Partial("sum") end
    local op = s:match("^P%((%a+)%)$")
    if op then return core.Partial(op) end
    local d = s:match("^S(%-?%d+)$")
    if d then return core.Shard(tonumber(d)) end
    error(who .. ": bad placement '" .. s .. "' (expected a placement or \"S<dim>\", \"R\", \"P\")", up(level))
  end
  if getmetatable(p) ~= "Placement" then
    error(who .. ": expected a placement (dt.Shard(d), dt.Replicate(), ...) or a shorthand string, got " ..
          (core.is_tensor(p) and "a tensor" or type(p)), up(level))
  end
  return p
end

-- A layout option: one placement, or a list of one placement (the form of a 1-d mesh's
-- placement list).  nil: the default.
function M.layout(v, default, who, name, level)
  if v == nil then return default end
  if type(v) == "table" and getmetatable(v) == nil then
    if #v ~= 1 then
      error(who .. ": " .. name .. " must be one placement (tensor parallelism runs on a 1-d mesh), got a list of " ..
            #v, up(level))
    end
    v = v[1]
  end
  return M.placement(v, who .. ": " .. name, up(level))
end

-- A list of layouts, one per input or output: a layout stands for a list of one; `false`
-- (Lua lists cannot hold nil) marks a value left alone.  nil: nil.
function M.layout_list(v, who, name, level)
  if v == nil then return nil end
  if type(v) ~= "table" or getmetatable(v) ~= nil then return {M.placement(v, who .. ": " .. name, up(level))} end
  local out = {}
  for i = 1, #v do
    out[i] = v[i] ~= false and M.placement(v[i], who .. ": " .. name .. "[" .. i .. "]", up(level)) or false
  end
  return out
end

-- p with a negative Shard dim counted from the end of an ndim-d tensor
function M.normalize(p, ndim)
  if p:is_shard() and p.dim < 0 then return core.Shard(p.dim + ndim + 1) end
  return p
end

function M.same(p, q, ndim) return M.normalize(p, ndim) == M.normalize(q, ndim) end

-- x (a tensor of this rank) as a DTensor on mesh: a DTensor is kept as it is; a plain tensor
-- is this rank's part of a global tensor with `layout` (dt.from_local: differentiable, no
-- communication; the global shape assumes even shards, as PyTorch's from_local).
function M.as_dtensor(x, mesh, layout, who, level)
  if core.is_dtensor(x) then return x end
  if not core.is_tensor(x) then
    error(who .. ": expected a tensor, got " .. type(x), up(level))
  end
  return core.from_local(x, mesh, {layout})
end

-- x (a DTensor) with placement `layout` (a redistribute when it differs: differentiable)
function M.redistributed(x, layout)
  if M.same(x.placements[1], layout, x:dim()) then return x end
  return x:redistribute({layout})
end

-- x's local tensor when use_local (differentiable), else x
function M.local_or(x, use_local) return use_local and x:to_local() or x end

-- A module's parameter p as a DTensor leaf with these placements: distribute_tensor of its
-- values on the mesh's first rank (or src_rank), requiring grad as p did.
function M.distribute_param(p, mesh, placements, src_rank)
  local d = core.distribute_tensor(p:detach(), mesh, placements, src_rank ~= nil and {src_rank = src_rank} or nil)
  if p.requires_grad then d:requires_grad_() end
  return d
end

return M
