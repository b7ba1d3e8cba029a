-- ColwiseParallel and RowwiseParallel (PyTorch's styles of the same names, doc/parallel.md)
-- for dt.nn.Linear (weight [out, in]) and dt.nn.Embedding (weight [num, dim]).  Shard dims
-- are 1-based: PyTorch's Shard(0) is dt.Shard(1).
--
--              | Linear weight, bias   | Embedding weight   | input: given -> desired | output
--   Colwise    | Shard(1), Shard(1)    | Shard(2) (the dim) | Replicate -> Replicate  | Shard(-1)
--   Rowwise    | Shard(2), Replicate   | Shard(1) (vocab)   | Shard(-1) -> Shard(-1)  | Replicate (the Partial reduced)
--                                                           | Embedding: Replicate -> Replicate
--
-- The module's first input is taken as this rank's part of a tensor with the given layout
-- (dt.from_local) unless it is a DTensor, then redistributed to the desired one; the output
-- is redistributed to output_layouts and, with use_local_output (default), returned as its
-- local tensor.  Every conversion is differentiable, so backward mirrors each collective.
local core = require "dtensor.core"
local L = require "dtensor.parallel.layouts"
local style = require "dtensor.parallel.style"
local distribute_module = require("dtensor.parallel.distribute_module").distribute_module
local M = {}

local OPTIONS = {input_layouts = true, output_layouts = true, use_local_output = true}

local function check(defaults)
  return function(opts, name)
    opts = L.options(opts, OPTIONS, name, 3)
    return {
      input_layouts = L.layout(opts.input_layouts, nil, name, "input_layouts", 3), -- nil: by module type
      output_layouts = L.layout(opts.output_layouts, defaults.output, name, "output_layouts", 3),
      use_local_output = L.boolean(opts.use_local_output, true, name, "use_local_output", 3),
    }
  end
end

-- the hooks distribute_module installs: the first input to `given` then `desired`, the
-- output to `output` (and local)
local function input_fn(name, given, desired)
  return function(_, inputs, mesh)
    local x = L.as_dtensor(inputs[1], mesh, given, name .. ": the module's input 1", 0)
    local out = L.copy_inputs(inputs)
    out[1] = L.redistributed(x, desired)
    return out
  end
end

local function output_fn(s, name)
  return function(_, out)
    if not core.is_dtensor(out) then
      error(name .. ": the module's output is " .. (core.is_tensor(out) and "a plain tensor" or type(out)) ..
            ", not a DTensor", 0)
    end
    return L.local_or(L.redistributed(out, s.output_layouts), s.use_local_output)
  end
end

-- partition_fn: each parameter of the module itself to the placement `by_param[name]`
-- (default `all`)
local function shard_params(module, by_param, all, src_rank)
  return function(_, sub, mesh)
    if sub ~= module then return end
    for _, pname in ipairs(sub._param_names or {}) do
      local p = sub._parameters[pname]
      if p ~= nil then sub[pname] = L.distribute_param(p, mesh, {by_param[pname] or all}, src_rank) end
    end
  end
end

-- layouts: by module class, {params = placement by parameter name, all = the placement of
-- the others, input = the given input layout (default), desired = the desired one}
local function define(name, layouts, defaults)
  local function apply(s, module, mesh, src_rank)
    local kind, got = L.class_in(module, layouts)
    if not kind then error(name .. ": supports dt.nn.Linear and dt.nn.Embedding only, got a " .. got .. " module", 0) end
    local l = layouts[kind]
    local given = s.input_layouts or l.input
    distribute_module(module, mesh, shard_params(module, l.params, l.all, src_rank), input_fn(name, given, l.desired),
                      output_fn(s, name))
    return module
  end
  return style.define(name, check(defaults), apply, style.describe {"input_layouts", "output_layouts", "use_local_output"})
end

M.ColwiseParallel = define("ColwiseParallel", {
  Linear = {params = {}, all = core.Shard(1), input = core.Replicate(), desired = core.Replicate()},
  Embedding = {params = {}, all = core.Shard(2), input = core.Replicate(), desired = core.Replicate()},
}, {output = core.Shard(-1)})

M.RowwiseParallel = define("RowwiseParallel", {
  Linear = {params = {bias = core.Replicate()}, all = core.Shard(2), input = core.Shard(-1), desired = core.Shard(-1)},
  -- PyTorch's default input layout is Shard(-1) for both; ids are rarely that, so Embedding's
  -- is Replicate (pass input_layouts to say otherwise)
  Embedding = {params = {}, all = core.Shard(1), input = core.Replicate(), desired = core.Replicate()},
}, {output = core.Replicate()})

return M
