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
  local rd = state.reduce_dtype
  local cast = rd ~= nil and rd ~= local_of(grads[1]).dtype
  -- a group of one: the engine's .grad is already the reduction (given gradients still go in;
  -- a reduce_dtype still rounds, so every mesh rounds alike)
  if state.group_size == 1 and not state.manual and not cast then return end
  for i = 1, #b.slots do flat_parts[i] = local_of(grads[i]):reshape(-1) end
  local flat = #flat_parts == 1 and flat_parts[1]:clone() or core.cat(flat_parts)
  if cast then flat = flat:to(rd) end
  local work = state.group_size > 1 and D.all_reduce(flat, state.op, {group = state.group, async_op = true}) or nil
  if #state.pending == 0 then core.autograd.queue_callback(function() state.finish() end) end
  state.pending[#state.pending + 1] = {bucket = b, grads = grads, flat = flat, work = work}
end

-- the end of backward: every bucket's reduction into .grad (a .grad this backward created
-- becomes it; one that held earlier gradients gets reduction - gradient added)
local function finish(state)
  local pending = state.pending
  state.pending = {}
  for _, p in ipairs(pending) do
    if p.work then p.work:wait() end
    local off = 0
    for i, slot in ipairs(p.bucket.slots) do
      local gl = local_of(p.grads[i])
      local n = gl:numel()
      local avg = p.flat:narrow(1, off + 1, n):reshape(gl:size())
      off = off + n
      local acc = slot.param.grad
      if state.manual then -- the gradients were given, not accumulated by the engine: add the reduction
        if acc == nil then slot.param.grad = avg:clone() else local_of(acc):add_(avg) end
      elseif acc == nil then
        error(state.who .. ": parameter '" .. slot.name .. "' has no .grad: gradients are reduced in backward() " ..
              "(dt.autograd.grad is not supported here)", 0)
      elseif slot.fresh then local_of(acc):copy_(avg) else local_of(acc):add_(avg - gl) end
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
-- a backward that failed before its end left works running: complete them, unused, and
-- empty every bucket
function M.abandon(state)
  for _, p in ipairs(state.pending) do if p.work then pcall(p.work.wait, p.work) end end
  state.pending = {}
  for _, b in ipairs(state.buckets) do b.grads, b.ready = {}, 0 end
  state.next = 1
end

function M.check_finished(state)
  local missing = {}
  for _, b in ipairs(state.buckets) do
    if b.ready > 0 then
      for i, slot in ipairs(b.slots) do
        if b.grads[i] == nil then missing[#missing + 1] = "'" .. slot.name .. "'" end
      end
    end
  end
  M.abandon(state)
  if #missing > 0 then
    error(state.who .. ": the previous backward gave no gradient to parameter(s) " .. table.concat(missing, ", ") ..
          ", so their buckets were not reduced; every parameter that requires grad must take part in the loss", 0)
  end
end

-- params: list of {name =, param =}; sizes: their {name, dtype, bytes}; op: "avg" or "sum";
-- who: the caller's name in errors.  manual = true: no hooks; the caller hands each gradient
-- over with M.give (it never reaches the engine's .grad), and the reduction is added to .grad.
-- reduce_dtype (optional): the buckets are reduced in it, then cast back into .grad.
function M.new(params, sizes, group, cap_bytes, op, who, manual, reduce_dtype)
  local state = {group = group, group_size = group:size(), buckets = {}, next = 1, handles = {}, pending = {},
                 op = op, who = who, manual = manual or false, slot_of = {}, reduce_dtype = reduce_dtype}
  state.finish = function() finish(state) end
  for k, list in ipairs(buckets_of(sizes, cap_bytes)) do
    local b = {index = k, slots = {}, grads = {}, ready = 0}
    for pos, i in ipairs(list) do
      local slot = {name = params[i].name, param = params[i].param, bucket = b, pos = pos}
      b.slots[pos] = slot
      state.slot_of[slot.param] = slot
      if not state.manual then
        state.handles[#state.handles + 1] = slot.param:register_hook(function(g) return on_grad(state, slot, g) end)
      end
    end
    state.buckets[k] = b
  end
  return state
end

-- manual mode: param's gradient g (this rank's part) into its bucket
function M.give(state, param, g) on_grad(state, state.slot_of[param], g) end

return M
