-- Gradients reduced in buckets while backward runs (PyTorch DDP's reducer), shared by
-- dt.parallel.replicate (each rank's gradient, averaged) and dt.parallel.data_parallel (each
-- rank's part of the gradient, summed).  A hook on each parameter hands its gradient to its
-- bucket (buckets.lua assigns them); a complete bucket, once every bucket before it was
-- launched, is flattened into one buffer and reduced by one async all_reduce over the group,
-- which runs while backward computes the next gradients.  At the end of backward (a callback
-- queued with dt.autograd.queue_callback) every bucket is waited and written into .grad.
-- Hooks run in the same order on every rank (the engine's order), so the all_reduces match.
local core = require "dtensor.core"
local buckets_of = require("dtensor.parallel.buckets").assign
local D = core.distributed
local M = {}

local function local_of(t) return core.is_dtensor(t) and t:to_local() or t end

-- one async all_reduce (state.op) of a complete bucket, waited by finish() at the end of backward
local function launch(state, b)
  local grads, flat_parts = b.grads, {}
  b.grads, b.ready = {}, 0
  if state.group_size == 1 then return end -- the sum or average of one gradient
  for i = 1, #b.slots do flat_parts[i] = local_of(grads[i]):reshape(-1) end
  local flat = #flat_parts == 1 and flat_parts[1]:clone() or core.cat(flat_parts)
  local work = D.all_reduce(flat, state.op, {group = state.group, async_op = true})
  if #state.pending == 0 then core.autograd.queue_callback(function() state.finish() end) end
  state.pending[#state.pending + 1] = {bucket = b, grads = grads, flat = flat, work = work}
end

-- the end of backward: every bucket's reduction into .grad (a .grad this backward created
-- becomes it; one that held earlier gradients gets reduction - gradient added)
local function finish(state)
  local pending = state.pending
  state.pending = {}
  for _, p in ipairs(pending) do
    p.work:wait()
    local off = 0
    for i, slot in ipairs(p.bucket.slots) do
      local gl = local_of(p.grads[i])
      local n = gl:numel()
      local avg = p.flat:narrow(1, off + 1, n):reshape(gl:size())
      off = off + n
      local acc = slot.param.grad
      if acc == nil then
        error(state.who .. ": parameter '" .. slot.name .. "' has no .grad: gradients are reduced in backward() " ..
              "(dt.autograd.grad is not supported here)", 0)
      end
      if slot.fresh then local_of(acc):copy_(avg) else local_of(acc):add_(avg - gl) end
    end
  end
end

local function on_grad(state, slot, g)
  local b = slot.bucket
  if b.grads[slot.pos] ~= nil then
    error(state.who .. ": parameter '" .. slot.name .. "' got a second gradient before its bucket was reduced", 0)
  end
  b.grads[slot.pos] = g
  slot.fresh = slot.param.grad == nil -- hooks run before the gradient is accumulated
  b.ready = b.ready + 1
  if b.ready < #b.slots then return nil end
  local bs = state.buckets
  while state.next <= #bs and bs[state.next].ready == #bs[state.next].slots do
    launch(state, bs[state.next])
    state.next = state.next + 1
  end
  if state.next > #bs then state.next = 1 end
  return nil
end

-- before each forward: the previous backward must have reduced every bucket
function M.check_finished(state)
  -- a backward that failed before its end left works running: complete them, unused
  for _, p in ipairs(state.pending) do pcall(p.work.wait, p.work) end
  state.pending = {}
  local missing = {}
  for _, b in ipairs(state.buckets) do
    if b.ready > 0 then
      for i, slot in ipairs(b.slots) do
        if b.grads[i] == nil then missing[#missing + 1] = "'" .. slot.name .. "'" end
      end
      b.grads, b.ready = {}, 0
    end
  end
  state.next = 1
  if #missing > 0 then
    error(state.who .. ": the previous backward gave no gradient to parameter(s) " .. table.concat(missing, ", ") ..
          ", so their buckets were not reduced; every parameter that requires grad must take part in the loss", 0)
  end
end

-- params: list of {name =, param =}; sizes: their {name, dtype, bytes}; op: "avg" or "sum";
-- who: the caller's name in errors.  state.active = false makes the hooks pass gradients on
-- untouched (data_parallel's single-device trace).
function M.new(params, sizes, group, cap_bytes, op, who)
  local state = {group = group, group_size = group:size(), buckets = {}, next = 1, handles = {}, pending = {},
                 op = op, who = who, active = true}
  state.finish = function() finish(state) end
  for k, list in ipairs(buckets_of(sizes, cap_bytes)) do
    local b = {index = k, slots = {}, grads = {}, ready = 0}
    for pos, i in ipairs(list) do
      local slot = {name = params[i].name, param = params[i].param, bucket = b, pos = pos}
      b.slots[pos] = slot
      state.handles[#state.handles + 1] = slot.param:register_hook(function(g)
        if state.active then return on_grad(state, slot, g) end
      end)
    end
    state.buckets[k] = b
  end
  return state
end

return M
