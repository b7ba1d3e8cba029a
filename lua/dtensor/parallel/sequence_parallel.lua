-- SequenceParallel (PyTorch's style of that name, doc/parallel.md): a module that works on
-- each position of a sequence alone (LayerNorm, RMSNorm, Dropout) runs on activations
-- sharded on the sequence dim.  Its parameters become replicated DTensors (from_local of the
-- values each rank holds: no communication, as PyTorch); a plain input is this rank's shard
-- of the sequence (Shard(sequence_dim), default 2: [batch, seq, ...]); a DTensor input is
-- redistributed to it; the output stays a DTensor unless use_local_output.  The parameters'
-- gradients are summed over the sequence shards by the engine (one all_reduce each).
local core = require "dtensor.core"
local L = require "dtensor.parallel.layouts"
local style = require "dtensor.parallel.style"
local distribute_module = require("dtensor.parallel.distribute_module").distribute_module
local M = {}

local OPTIONS = {sequence_dim = true, use_local_output = true}

local function check(opts, name)
  opts = L.options(opts, OPTIONS, name, 3)
  local d = opts.sequence_dim
  if d == nil then d = 2 end
  if math.type(d) ~= "integer" or d == 0 then
    error(name .. ": sequence_dim must be a non-zero integer (dims are 1-based), got " .. tostring(d), 3)
  end
  return {sequence_dim = d, use_local_output = L.boolean(opts.use_local_output, false, name, "use_local_output", 3)}
end

local function replicate_params(_, sub, mesh)
  for _, pname in ipairs(sub._param_names or {}) do
    local p = sub._parameters[pname]
    if p ~= nil and not core.is_dtensor(p) then
      local d = core.from_local(p:detach(), mesh, {core.Replicate()})
      if p.requires_grad then d:requires_grad_() end
      sub[pname] = d
    end
  end
end

local function apply(s, module, mesh)
  local name = s._name
  local seq = core.Shard(s.sequence_dim)
  local function input_fn(_, inputs)
    local x = inputs[1]
    if core.is_dtensor(x) then
      x = L.redistributed(x, seq)
    elseif core.is_tensor(x) then
      x = core.from_local(x, mesh, {seq})
    else
      error(name .. ": the module's input 1 must be a tensor or a DTensor, got " .. type(x), 0)
    end
    local out = L.copy_inputs(inputs)
    out[1] = x
    return out
  end
  local function output_fn(_, out)
    if not core.is_dtensor(out) then return out end
    return L.local_or(out, s.use_local_output)
  end
  distribute_module(module, mesh, replicate_params, input_fn, output_fn)
  return module
end

M.SequenceParallel = style.define("SequenceParallel", check, apply, style.describe {"sequence_dim", "use_local_output"})

return M
