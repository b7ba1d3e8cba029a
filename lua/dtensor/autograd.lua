-- Autograd in Lua (doc/autograd.md): dt.autograd.Function (a differentiable op written in
-- Lua) and dt.utils.checkpoint (activation checkpointing, built on it).  The engine, the
-- grad modes, the tensor fields and the factories' requires_grad option are C (src/autograd,
-- src/bindings/l_autograd.c).
-- Returns {module = {autograd = {backward, grad, Function}}, utils = {checkpoint}}: init.lua
-- installs it into dt (dt.autograd replaces the core's table, which it extends) and dt.utils.
local core = require "dtensor.core"
local is_tensor, no_grad, enable_grad = core.is_tensor, core.no_grad, core.enable_grad
local record = core._autograd_function
local pack, unpack = table.pack, table.unpack
local module = {}

-- ---- the ctx a Function's forward and backward share ----
local Ctx = {}
Ctx.__index = Ctx

-- ctx:save_for_backward(t1, t2, ...): tensors (or nil) the backward reads as
-- ctx.saved_tensors.  They are kept without their autograd history (so saving an output
-- makes no reference cycle) and checked for in-place writes before backward.
function Ctx:save_for_backward(...)
  local n = select("#", ...)
  for i = 1, n do
    local t = select(i, ...)
    if t ~= nil and not is_tensor(t) then
      error(string.format("%s: save_for_backward: argument %d is a %s; save tensors only (put other values on ctx)",
                          self._name, i, type(t)), 2)
    end
  end
  self._to_save = pack(...)
end

-- ctx:set_materialize_grads(false): backward gets nil (not zeros) for an output no
-- gradient flowed to.
function Ctx:set_materialize_grads(flag) self._materialize = flag ~= false end

-- ctx:mark_non_differentiable(t, ...): outputs that take no grad_fn (indices, masks).
function Ctx:mark_non_differentiable(...)
  for i = 1, select("#", ...) do self._non_diff[select(i, ...)] = true end
end

-- The saved tensors as C keeps them (a compact list) and where each goes back.
local function compact_saved(to_save)
  local list, slots = {}, {}
  if not to_save then return list, slots, 0 end
  for i = 1, to_save.n do
    if to_save[i] ~= nil then
      list[#list + 1] = to_save[i]
      slots[#list] = i
    end
  end
  return list, slots, to_save.n
end

local function check_def(def)
  if type(def) ~= "table" then
    error("autograd.Function: expected a table {forward = fn, backward = fn}, got " .. type(def), 3)
  end
  for _, k in ipairs {"forward", "backward"} do
    if type(def[k]) ~= "function" then
      error(string.format("autograd.Function: %s must be a function, got %s", k, type(def[k])), 3)
    end
  end
  if def.name ~= nil and type(def.name) ~= "string" then
    error("autograd.Function: name must be a string, got " .. type(def.name), 3)
  end
  if def.keeps_partial ~= nil and type(def.keeps_partial) ~= "boolean" then
    error("autograd.Function: keeps_partial must be a boolean, got " .. type(def.keeps_partial), 3)
  end
end

-- The outputs, each a tensor C may give the node as its grad_fn (false: none takes it).  A
-- tensor that already has autograd state (an input returned as is, a tensor that requires
-- grad from outside, the same tensor twice) is replaced by a detached alias, as PyTorch
-- returns a view: the original keeps its own history.
local function outputs_for_node(outs, args, non_diff)
  local inputs = {}
  for i = 1, args.n do if is_tensor(args[i]) then inputs[args[i]] = true end end
  local list, seen = {}, {}
  for i = 1, outs.n do
    local o = outs[i]
    if is_tensor(o) and not non_diff[o] then
      if inputs[o] or seen[o] or o.requires_grad then
        o = o:detach()
        outs[i] = o
      end
      seen[o] = true
      list[i] = o
    else
      list[i] = false
    end
  end
  return list
end

-- The backward C calls (under pcall): the user's backward with ctx.saved_tensors set, its
-- gradients checked against the forward's arguments and returned as a list by argument.
local function backward_of(F, ctx, slots, nslots, args_n, is_arg_tensor)
  return function(saved, ...)
    local st = {n = nslots}
    for k, t in ipairs(saved) do st[slots[k]] = t end
    ctx.saved_tensors = st
    local r = pack(pcall(F.backward, ctx, ...))
    ctx.saved_tensors = nil -- the node's copies are freed after a backward without retain_graph
    if not r[1] then error(r[2], 0) end
    if r.n - 1 > args_n then
      error(string.format("backward returned %d gradients for %d forward arguments", r.n - 1, args_n), 0)
    end
    local grads = {}
    for i = 1, args_n do
      local g = r[i + 1]
      if g ~= nil then
        if not is_arg_tensor[i] then
          error(string.format("backward returned a gradient for argument %d, which is not a tensor (return nil)", i), 0)
        end
        if not is_tensor(g) then
          error(string.format("backward returned a %s as the gradient of argument %d; expected a tensor or nil",
                              type(g), i), 0)
        end
        grads[i] = g
      end
    end
    return grads
  end
end

local function apply(F, ...)
  local args = pack(...)
  local grad_on = core.is_grad_enabled()
  local needs, is_arg_tensor, inputs, any = {}, {}, {}, false
  for i = 1, args.n do
    local a = args[i]
    is_arg_tensor[i] = is_tensor(a)
    needs[i] = grad_on and is_arg_tensor[i] and a.requires_grad or false
    inputs[i] = is_arg_tensor[i] and a or false
    any = any or needs[i]
  end
  local ctx = setmetatable({needs_input_grad = needs, _name = F.name, _materialize = true, _non_diff = {}}, Ctx)
  local outs = pack(no_grad(F.forward, ctx, ...))
  if not any then return unpack(outs, 1, outs.n) end
  local out_list = outputs_for_node(outs, args, ctx._non_diff)
  local saved, slots, nslots = compact_saved(ctx._to_save)
  ctx._to_save, ctx._non_diff = nil, nil -- ctx must not hold the outputs (a cycle through the node)
  record(F.name, inputs, args.n, out_list, outs.n, saved,
         backward_of(F, ctx, slots, nslots, args.n, is_arg_tensor), ctx._materialize, F.keeps_partial)
  return unpack(outs, 1, outs.n)
end

-- dt.autograd.Function{name = "MyOp", forward = function(ctx, ...) ... end,
--                      backward = function(ctx, grad_1, ...) ... end}
-- F.apply(x, y, ...) or F(x, y, ...): runs forward with grad mode off and, when a tensor
-- argument requires grad, gives its tensor results F as their grad_fn.  backward gets one
-- gradient per result and returns one per argument (nil: none).  keeps_partial = true: a
-- DTensor result's gradient reaches backward as the engine has it, Partial included (not
-- reduced to Replicate first: fully_shard reduce-scatters it itself).
local function Function(def)
  check_def(def)
  local F = {name = def.name or "Function", forward = def.forward, backward = def.backward,
             keeps_partial = def.keeps_partial or false}
  F.apply = function(...) return apply(F, ...) end
  return setmetatable(F, {__call = function(_, ...) return apply(F, ...) end})
end

-- ---- activation checkpointing (the reentrant variant, as torch.utils.checkpoint with
--      use_reentrant=True): forward runs fn without recording and saves its tensor
--      arguments and the generator state; backward puts the generator back where the
--      forward started, runs fn again with grad mode on, backpropagates the incoming
--      gradients through it (parameters used in fn accumulate their .grad there) and
--      returns the arguments' gradients. ----
local Checkpoint = Function {
  name = "checkpoint",
  forward = function(ctx, fn, ...)
    local args = pack(...)
    local tensors, others = {}, {n = args.n, tensor = {}} -- the non-tensor arguments, and where the tensors go
    for i = 1, args.n do
      if is_tensor(args[i]) then tensors[#tensors + 1], others.tensor[i] = args[i], true else others[i] = args[i] end
    end
    ctx.fn, ctx.others, ctx.rng = fn, others, core.get_rng_state()
    ctx:save_for_backward(unpack(tensors))
    return fn(...)
  end,
  backward = function(ctx, ...)
    local grads = pack(...)
    local others, saved, needs = ctx.others, ctx.saved_tensors, ctx.needs_input_grad
    local args, leaves, k = {}, {}, 0
    for i = 1, others.n do
      if not others.tensor[i] then
        args[i] = others[i]
      else
        k = k + 1
        local t = saved[k]:detach()
        if needs[i + 1] then leaves[i] = t:requires_grad_() end
        args[i] = t
      end
    end
    local now = core.get_rng_state()
    core.set_rng_state(ctx.rng) -- the same random numbers as the forward drew
    local outs = pack(pcall(enable_grad, ctx.fn, unpack(args, 1, others.n)))
    core.set_rng_state(now)
    if not outs[1] then error(outs[2], 0) end
    local roots, root_grads = {}, {}
    for i = 2, outs.n do
      local o = outs[i]
      if is_tensor(o) and o.requires_grad and grads[i - 1] ~= nil then
        roots[#roots + 1], root_grads[#roots + 1] = o, grads[i - 1]
      end
    end
    if #roots == 0 then error("checkpoint: no result of fn requires grad after recomputation", 0) end
    core.autograd.backward(roots, root_grads)
    local result = {n = others.n + 1}
    for i = 1, others.n do result[i + 1] = leaves[i] and leaves[i].grad end
    return unpack(result, 1, result.n)
  end,
}

-- dt.utils.checkpoint(fn, ...): fn(...), whose intermediate values are not kept for
-- backward but recomputed then.  Needs a tensor argument that requires grad for anything to
-- flow (as PyTorch's reentrant checkpoint); works with backward(), not autograd.grad.
local function callable(f)
  local mt = getmetatable(f)
  return type(f) == "function" or (type(mt) == "table" and mt.__call ~= nil)
end

local function checkpoint(fn, ...)
  if not callable(fn) then error("checkpoint: expected a function, got " .. type(fn), 2) end
  return Checkpoint.apply(fn, ...)
end

module.autograd = {backward = core.autograd.backward, grad = core.autograd.grad, Function = Function,
                   queue_callback = core.autograd.queue_callback}

return {module = module, utils = {checkpoint = checkpoint}}
