-- data_parallel's replay (doc/data_parallel.md, "Replay"): after the trace and one eager
-- DTensor call of a signature, its calls run as a dt.compile graph.  The program recorded is
-- the analysed step on DTensors, with each parameter entering its module as
-- from_local(p, mesh, {Replicate()}): differentiable, so backward brings each gradient to the
-- plain parameter through a Partial -> Replicate redistribution -- one all_reduce(sum), which
-- dt.compile's comm_plan packs into buckets started when their last gradient is made and
-- waited where a gradient is first read (the optimizer step).  A replay then runs each rank's
-- local kernels on its batch shard with the recorded decisions (an uneven mean's exact
-- reduction included): no Lua, no sharding propagation, no dispatch per op.
local core = require "dtensor.core"
local M = {}

local pack, unpack = table.pack, table.unpack

-- why a signature's calls cannot replay, or nil: the option, or what the trace saw that a
-- capture refuses (values read into Lua, autograd state changes...), which would stop the
-- capture half-way through the step
function M.blocker(opts_replay, trace)
  if opts_replay == false then return "the option replay = false" end
  if trace.refusal then return "the step does " .. trace.refusal .. ", which a graph cannot replay" end
  return nil
end

-- The Lua values of the optimizers' parameter groups (lr, momentum, betas...: constants of a
-- graph, which a schedule may change between calls), as a string: passed to the compiled
-- program as an argument, so that a change is a guard miss (a new graph), never a stale value.
-- (A 0-d tensor lr is read by the graph at each replay: no miss.)
local function value_key(v)
  local t = type(v)
  if t == "number" then return string.format("%.17g", v) end
  if t == "boolean" or t == "string" then return tostring(v) end
  if t == "table" and not core.is_tensor(v) then
    local parts = {}
    for i, x in ipairs(v) do parts[i] = value_key(x) or "?" end
    return "{" .. table.concat(parts, ",") .. "}"
  end
  return nil -- tensors are read by reference
end

function M.hyper_key(optimizers)
  local parts = {}
  for _, opt in ipairs(optimizers) do
    for _, group in ipairs(opt.param_groups) do
      local keys = {}
      for k in pairs(group) do if k ~= "params" and type(k) == "string" then keys[#keys + 1] = k end end
      table.sort(keys)
      for _, k in ipairs(keys) do
        local v = value_key(group[k])
        if v then parts[#parts + 1] = k .. "=" .. v end
      end
      parts[#parts + 1] = ";"
    end
  end
  return table.concat(parts, " ")
end

local function put_params(params, value_of)
  for _, e in ipairs(params) do
    local v = value_of(e)
    for _, at in ipairs(e.at) do rawget(at.module, "_parameters")[at.name] = v end
  end
end

-- the compiled DTensor program of runner `dp` (its step_fn, mesh, params, cap in bytes)
function M.compile(dp)
  local mesh, params, R = dp.mesh, dp.params, {core.Replicate()}
  local function program(_, ...) -- the first argument: hyper_key's string, a guard
    put_params(params, function(e) return core.from_local(e.param, mesh, R) end)
    local out = pack(pcall(dp.step_fn, ...))
    put_params(params, function(e) return e.param end)
    if not out[1] then error(out[2], 0) end
    for i = 2, out.n do
      if core.is_dtensor(out[i]) then out[i] = out[i]:full_tensor() end
    end
    dp.finished = out -- the step ran whole: kept in case the capture refuses after it (no tensor refcount taken)
    return unpack(out, 2, out.n)
  end
  return core.compile(program, {bucket_cap_mb = dp.cap / (1024 * 1024)})
end

-- runs plan.compiled on the DTensor arguments (recording on its first call); returns the
-- step's results packed.  A capture refused after the step ran whole (a graph-made tensor
-- kept in Lua state) keeps that call's results and turns replay off for the signature.
function M.call(dp, plan, dargs)
  dp.finished = nil
  local compiled = plan.compiled
  local key = M.hyper_key(dp.optimizers)
  local out = pack(pcall(core.implicit_replication, function() return compiled(key, unpack(dargs, 1, dargs.n)) end))
  local finished = dp.finished
  dp.finished = nil
  if out[1] then return pack(unpack(out, 2, out.n)) end
  local msg = tostring(out[2])
  if finished and msg:find("compile:", 1, true) then
    plan.blocker, plan.compiled = "dt.compile refused the step after it ran (" .. msg .. ")", nil
    return pack(unpack(finished, 2, finished.n))
  end
  if msg:find("compile:", 1, true) and compiled:stats().graphs == 0 then
    plan.blocker, plan.compiled = "dt.compile refused the step (" .. msg .. ")", nil
    error("data_parallel: recording the step's graph failed part-way, after the step had started (" .. msg ..
          "); run it with replay = false", 0)
  end
  error(out[2], 0)
end

return M
