-- dt.amp (doc/amp.md): mixed precision as torch.autocast and torch.amp.GradScaler.
--   * autocast: a per-rank mode the front door reads (src/call/autocast.c): matmuls run in
--     bfloat16/float16 on float32 inputs, the float32-class ops on float32; the casts are
--     recorded by autograd, so float32 parameters get float32 gradients.
--   * GradScaler: loss scaling for float16 -- scale the loss, unscale the gradients, skip the
--     step when one is inf/nan (a check every rank answers alike, through ops on DTensors),
--     grow or back off the scale.
-- Returns {module = {amp = {...}}}: init.lua installs dt.amp.
local core = require "dtensor.core"
local show = require("dtensor.optim.check").show
local is_tensor = core.is_tensor
local mode = core._autocast_mode

local amp = {}

-- the mode an options table asks for: a dtype name, or false (enabled = false)
local function wanted(name, opts)
  if opts == nil then opts = {} end
  if type(opts) ~= "table" then error(string.format("%s: options must be a table, got %s", name, type(opts)), 3) end
  for k in pairs(opts) do
    if k ~= "dtype" and k ~= "enabled" and k ~= "device_type" and k ~= "cache_enabled" then
      error(string.format("%s: unknown option '%s' (options: dtype, enabled)", name, show(k)), 3)
    end
  end
  if opts.enabled ~= nil and type(opts.enabled) ~= "boolean" then
    error(string.format("%s: enabled must be a boolean, got %s", name, type(opts.enabled)), 3)
  end
  local dtype = opts.dtype == nil and "bfloat16" or opts.dtype -- torch's CPU default
  if dtype ~= "bfloat16" and dtype ~= "float16" and dtype ~= "bf16" and dtype ~= "half" and dtype ~= "f16" then
    error(string.format("%s: dtype must be \"bfloat16\" or \"float16\", got %s", name, show(dtype)), 3)
  end
  if opts.enabled == false then return false end
  return dtype
end

-- dt.amp.autocast(fn, opts?): fn() with autocast on (restored on error too), returning its
-- results.  dt.amp.autocast(opts?): switches it on and returns a to-be-closed guard that
-- restores the previous mode (`local _ <close> = dt.amp.autocast{dtype = "float16"}`).
-- opts: dtype ("bfloat16", the default, or "float16"), enabled (false: autocast off inside).
function amp.autocast(fn, opts)
  if type(fn) ~= "function" then
    local prev = mode(wanted("autocast", fn))
    local closed = false
    return setmetatable({}, {__name = "AutocastMode", __metatable = "AutocastMode", __close = function()
      if not closed then mode(prev) end -- once, however often closed
      closed = true
    end})
  end
  local prev = mode(wanted("autocast", opts))
  local res = table.pack(pcall(fn))
  mode(prev)
  if not res[1] then error(res[2], 0) end
  return table.unpack(res, 2, res.n)
end

-- true while an autocast region is open (and enabled) on this rank
function amp.is_autocast_enabled() return mode() ~= false end

-- the dtype of the open autocast region, or nil
function amp.get_autocast_dtype() return mode() or nil end

-- the class of an op under autocast: "lower", "float32" or "as_is" (doc/amp.md)
amp.autocast_class = core._autocast_class

-- ---- GradScaler ----------------------------------------------------------------------------

local GradScaler = {}
GradScaler.__index = GradScaler
GradScaler.__name = "GradScaler"

local READY, UNSCALED, STEPPED = "ready", "unscaled", "stepped" -- torch's OptState

local DEFAULTS = {init_scale = 2.0 ^ 16, growth_factor = 2.0, backoff_factor = 0.5, growth_interval = 2000,
                  enabled = true}

local function positive(name, key, v, limit)
  if type(v) ~= "number" or not (v > limit) then
    error(string.format("GradScaler: %s must be a number > %s, got %s", key, tostring(limit), show(v)), 3)
  end
end

-- dt.amp.GradScaler{init_scale = 2^16, growth_factor = 2, backoff_factor = 0.5,
-- growth_interval = 2000, enabled = true}
function amp.GradScaler(opts)
  if opts == nil then opts = {} end
  if type(opts) ~= "table" then error("GradScaler: options must be a table, got " .. type(opts), 2) end
  local o = {}
  for k, v in pairs(opts) do
    if DEFAULTS[k] == nil and k ~= "device" then
      error(string.format("GradScaler: unknown option '%s' (options: init_scale, growth_factor, backoff_factor, " ..
                          "growth_interval, enabled)", show(k)), 2)
    end
    o[k] = v
  end
  for k, v in pairs(DEFAULTS) do if o[k] == nil then o[k] = v end end
  if type(o.enabled) ~= "boolean" then error("GradScaler: enabled must be a boolean, got " .. type(o.enabled), 2) end
  positive("GradScaler", "init_scale", o.init_scale, 0)
  positive("GradScaler", "growth_factor", o.growth_factor, 1)
  if type(o.backoff_factor) ~= "number" or not (o.backoff_factor > 0 and o.backoff_factor < 1) then
    error("GradScaler: backoff_factor must be a number in (0, 1), got " .. show(o.backoff_factor), 2)
  end
  if math.type(o.growth_interval) ~= "integer" or o.growth_interval < 1 then
    error("GradScaler: growth_interval must be an integer >= 1, got " .. show(o.growth_interval), 2)
  end
  return setmetatable({_enabled = o.enabled, _scale = o.init_scale, _growth_factor = o.growth_factor,
                       _backoff_factor = o.backoff_factor, _growth_interval = o.growth_interval, _growth_tracker = 0,
                       _per_optimizer = setmetatable({}, {__mode = "k"})}, GradScaler)
end

function GradScaler:is_enabled() return self._enabled end
function GradScaler:get_scale() return self._enabled and self._scale or 1.0 end
function GradScaler:get_growth_factor() return self._growth_factor end
function GradScaler:get_backoff_factor() return self._backoff_factor end
function GradScaler:get_growth_interval() return self._growth_interval end

-- scaler:scale(outputs): outputs * scale (a tensor, or a table of tensors, nested); outputs
-- as they are when disabled
function GradScaler:scale(outputs)
  if not self._enabled then return outputs end
  if is_tensor(outputs) then return outputs * self._scale end
  if type(outputs) ~= "table" then
    error("GradScaler.scale: expected a tensor or a table of tensors, got " .. type(outputs), 2)
  end
  local r = {}
  for k, v in pairs(outputs) do r[k] = self:scale(v) end
  return r
end

local function state_of(self, optimizer)
  local s = self._per_optimizer[optimizer]
  if s == nil then
    s = {stage = READY, found_inf = false}
    self._per_optimizer[optimizer] = s
  end
  return s
end

-- whether grad g holds an inf or a nan: g * 0 is nan exactly there, so its sum is nan; on a
-- DTensor the sum is an op the dispatcher reduces over the mesh and item() is the same number on
-- every rank of the world, so every rank makes the same decision
local function non_finite(g)
  local v = (g * 0):sum():item()
  return v ~= v
end

-- scaler:unscale_(optimizer): divides the optimizer's gradients by the scale, in place, and
-- records whether any is inf/nan.  At most once per optimizer between two update()s.
function GradScaler:unscale_(optimizer)
  if not self._enabled then return end
  local s = state_of(self, optimizer)
  if s.stage == UNSCALED then
    error("GradScaler.unscale_: unscale_() has already been called on this optimizer since the last update()", 2)
  elseif s.stage == STEPPED then
    error("GradScaler.unscale_: unscale_() is being called after step()", 2)
  end
  local inv = 1.0 / self._scale
  local found = false
  local _ <close> = core.no_grad()
  for _, group in ipairs(optimizer.param_groups) do
    for _, p in ipairs(group.params) do
      local g = p.grad
      if g ~= nil then
        if g.dtype == "float16" then
          error("GradScaler.unscale_: attempting to unscale float16 gradients (keep the parameters float32: " ..
                "autocast casts them for the matmuls)", 2)
        end
        g:mul_(inv)
        found = non_finite(g) or found -- every gradient: the checks are collectives on DTensors
      end
    end
  end
  s.found_inf, s.stage = found, UNSCALED
end

-- scaler:step(optimizer, ...): unscales (unless unscale_ was called) and runs
-- optimizer:step(...) unless a gradient is inf/nan; returns step's result, or nil when skipped
function GradScaler:step(optimizer, ...)
  if not self._enabled then return optimizer:step(...) end
  if select("#", ...) > 0 and type((...)) == "function" then
    error("GradScaler.step: a closure is not supported while the scaler is enabled", 2)
  end
  local s = state_of(self, optimizer)
  if s.stage == STEPPED then error("GradScaler.step: step() has already been called since the last update()", 2) end
  if s.stage == READY then self:unscale_(optimizer) end
  local ret
  if not s.found_inf then ret = optimizer:step(...) end
  s.stage = STEPPED
  return ret
end

-- scaler:update(new_scale?): the next scale.  Without new_scale, torch's rule: after a step that
-- found an inf/nan, scale * backoff_factor (and the count of good steps restarts); after
-- growth_interval good steps in a row, scale * growth_factor.
function GradScaler:update(new_scale)
  if not self._enabled then return end
  if new_scale ~= nil then
    if is_tensor(new_scale) then new_scale = new_scale:item() end
    positive("GradScaler.update", "new_scale", new_scale, 0)
    self._scale = new_scale
  else
    local any, found = false, false
    for _, s in pairs(self._per_optimizer) do
      if s.stage ~= READY then any, found = true, found or s.found_inf end
    end
    if not any then error("GradScaler.update: no inf checks were recorded prior to update()", 2) end
    if found then
      self._scale, self._growth_tracker = self._scale * self._backoff_factor, 0
    else
      self._growth_tracker = self._growth_tracker + 1
      if self._growth_tracker == self._growth_interval then
        local grown = self._scale * self._growth_factor
        if grown < math.huge then self._scale = grown end
        self._growth_tracker = 0
      end
    end
  end
  self._per_optimizer = setmetatable({}, {__mode = "k"})
end

-- scaler:state_dict(): {scale, growth_factor, backoff_factor, growth_interval, _growth_tracker}
-- (torch's keys); {} when disabled
function GradScaler:state_dict()
  if not self._enabled then return {} end
  return {scale = self._scale, growth_factor = self._growth_factor, backoff_factor = self._backoff_factor,
          growth_interval = self._growth_interval, _growth_tracker = self._growth_tracker}
end

function GradScaler:load_state_dict(sd)
  if not self._enabled then return end
  if type(sd) ~= "table" or next(sd) == nil then
    error("GradScaler.load_state_dict: the state dict is empty, possibly because it was saved from a disabled " ..
          "GradScaler", 2)
  end
  for _, k in ipairs {"scale", "growth_factor", "backoff_factor", "growth_interval", "_growth_tracker"} do
    if type(sd[k]) ~= "number" and not is_tensor(sd[k]) then
      error(string.format("GradScaler.load_state_dict: %s must be a number, got %s", k, type(sd[k])), 2)
    end
  end
  local function num(v) return is_tensor(v) and v:item() or v end
  self._scale = num(sd.scale)
  self._growth_factor = num(sd.growth_factor)
  self._backoff_factor = num(sd.backoff_factor)
  self._growth_interval = math.tointeger(num(sd.growth_interval)) or num(sd.growth_interval)
  self._growth_tracker = math.tointeger(num(sd._growth_tracker)) or num(sd._growth_tracker)
end

function GradScaler:__tostring()
  return string.format("GradScaler(scale=%g, growth_factor=%g, backoff_factor=%g, growth_interval=%d, enabled=%s)",
                       self:get_scale(), self._growth_factor, self._backoff_factor, self._growth_interval,
                       tostring(self._enabled))
end

return {module = {amp = amp}}
