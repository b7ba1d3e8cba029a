-- dt.nn.utils.clip_grad_norm_ and clip_grad_value_, as torch.nn.utils.  The total norm over
-- DTensor gradients of any placements equals the norm of the same gradients on one device:
-- each gradient's sum of |g|^p (max |g| for inf) is a DTensor op, which the dispatcher leaves
-- Partial over sharded mesh dims and whole over replicated ones, so a replica is counted once.
-- The Partial sums of one mesh and placements are added first and reduced together: one small
-- all_reduce per (mesh, placements), then the scale is a local multiply.
local core = require "dtensor.core"
local check = require "dtensor.optim.check"
local is_tensor, is_dtensor = core.is_tensor, core.is_dtensor
local M = {}

local function grads_of(name, parameters)
  local list = is_tensor(parameters) and {parameters} or parameters
  if type(list) ~= "table" then
    error(string.format("%s: expected a tensor or a list of tensors, got %s", name, type(parameters)), 3)
  end
  local grads = {}
  for i, p in ipairs(list) do
    if not is_tensor(p) then error(string.format("%s: parameters[%d] is a %s, not a tensor", name, i, type(p)), 3) end
    local g = p.grad
    if g ~= nil then grads[#grads + 1] = g end
  end
  return grads
end

local function norm_order(name, norm_type)
  if norm_type == nil then return 2 end
  if norm_type == "inf" then return math.huge end
  if type(norm_type) ~= "number" or not (norm_type > 0) then
    error(string.format("%s: norm_type must be a positive number or math.huge (\"inf\"), got %s", name, check.show(norm_type)), 3)
  end
  return norm_type
end

-- g's share of the total: sum |g|^p accumulated in float64, or max |g| in g's dtype; a
-- DTensor for a DTensor g (Partial where g is sharded)
local function contribution(g, p)
  if g.dtype == "bfloat16" or g.dtype == "float16" then g = g:float() end -- powers in float32, as torch's norm
  if p == math.huge then return g:abs():amax() end
  local powered
  if p == 2 then powered = g * g elseif p == 1 then powered = g:abs() else powered = g:abs() ^ p end
  return powered:sum(nil, {dtype = "float64"})
end

local function spec_key(c)
  local parts = {tostring(c.device_mesh), c.dtype}
  for i, pl in ipairs(c.placements) do parts[i + 2] = tostring(pl) end
  return table.concat(parts, "|")
end

-- the total norm as a plain float64 0-d tensor, the same on every rank of the gradients' meshes
local function total_norm(grads, p)
  local is_inf = p == math.huge
  local plain, groups, order = nil, {}, {}
  local function combine(a, b)
    if a == nil then return b end
    if is_inf then return core.stack({a, b}):amax(1) end
    return a + b
  end
  for _, g in ipairs(grads) do
    local c = contribution(g, p)
    if is_dtensor(c) then
      if c.device_mesh:get_coordinate() ~= nil then -- a rank off the mesh holds none of g
        local key = spec_key(c)
        if groups[key] == nil then order[#order + 1] = key end
        groups[key] = combine(groups[key], c)
      end
    else
      plain = combine(plain, c:to("float64"))
    end
  end
  for _, key in ipairs(order) do -- in first-use order, the same on every rank
    plain = combine(plain, groups[key]:full_tensor():to("float64"))
  end
  if plain == nil then return core.tensor(0.0, {dtype = "float64"}) end -- every gradient is on meshes without this rank
  if is_inf then return plain end
  return plain ^ (1 / p)
end

-- clip_grad_norm_(parameters, max_norm, norm_type = 2, {error_if_nonfinite = false}):
-- scales every gradient in place by min(1, max_norm / (total + 1e-6)) and returns the total
-- norm (a 0-d tensor in the gradients' dtype; 0 when no parameter has a gradient).
function M.clip_grad_norm_(parameters, max_norm, norm_type, opts)
  local name = "clip_grad_norm_"
  if type(norm_type) == "table" and opts == nil then norm_type, opts = nil, norm_type end
  opts = opts or {}
  if type(max_norm) ~= "number" then error(name .. ": max_norm must be a number, got " .. type(max_norm), 2) end
  local p = norm_order(name, norm_type)
  local grads = grads_of(name, parameters)
  if #grads == 0 then return core.tensor(0.0, {dtype = "float32"}) end
  local _ <close> = core.no_grad()
  local total = total_norm(grads, p):to(grads[1].dtype)
  if opts.error_if_nonfinite then
    local v = total:item()
    if v ~= v or v == math.huge or v == -math.huge then
      error(string.format("%s: the total norm of order %s of the gradients is %s, so they cannot be clipped; pass " ..
                          "{error_if_nonfinite = false} to scale them by it anyway", name, check.show(norm_type or 2), check.show(v)), 2)
    end
  end
  local coef = (max_norm / (total + 1e-6)):clamp(nil, 1.0)
  for _, g in ipairs(grads) do g:mul_(coef) end
  return total
end

-- clip_grad_value_(parameters, clip_value): every gradient clamped to [-clip_value, clip_value]
-- in place (elementwise: no communication on DTensors)
function M.clip_grad_value_(parameters, clip_value)
  local name = "clip_grad_value_"
  if type(clip_value) ~= "number" or clip_value < 0 then
    error(name .. ": clip_value must be a number >= 0, got " .. check.show(clip_value), 2)
  end
  local _ <close> = core.no_grad()
  for _, g in ipairs(grads_of(name, parameters)) do g:copy_(g:clamp(-clip_value, clip_value)) end
end

return M
