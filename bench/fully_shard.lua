-- fully_shard against replicated data parallelism: the step time of the demo's GPT
-- (examples/gpt_model.lua; 2 layers, width 128, 4 heads, context 64, batch 16, vocab 64,
-- float32, AdamW, clip_grad_norm_) over the dp dim of an N x 1 mesh, placed once as the demo
-- does by default (every parameter replicated over dp, the engine all-reducing the
-- gradients) -- the baseline -- and once with fully_shard on each block and the root, in the
-- same run (each twice, alternating).  Prints the faster median step time of each, the ratio, and each run's collectives per
-- step and bytes of parameters + optimizer state on rank 0.
-- usage (from the build dir): ./dtlua -n N bench/fully_shard.lua [steps]
local here = (arg and arg[0] or ""):match("^(.*)/") or "bench"
local gpt = dofile(here .. "/../examples/gpt_model.lua")
local F = dt.F
local R, S = dt.Replicate(), dt.Shard
local STEPS = tonumber(arg and arg[1]) or 8
local now = dt._monotonic_time
local CFG = {layers = 2, width = 128, heads = 4, dropout = 0.1, vocab = 64, context = 64, batch = 16}
local n = dt.world_size()
local mesh = dt.init_device_mesh("cpu", {n, 1}, {"dp", "tp"})

local function local_bytes(t)
  local l = dt.is_dtensor(t) and t:to_local() or t
  return l:numel() * l:element_size()
end

local function run(fsdp)
  dt.manual_seed(1)
  local model = gpt.GPT(CFG.vocab, CFG.context, CFG)
  dt.distribute_module(model, mesh, gpt.partition)
  if fsdp then
    for _, b in ipairs(model.blocks:children()) do dt.parallel.fully_shard(b, mesh, {mesh_dim = 1}) end
    dt.parallel.fully_shard(model, mesh, {mesh_dim = 1})
  end
  local opt = dt.optim.AdamW(model:parameters(), {lr = 1e-3})
  local pos = dt.distribute_tensor(dt.arange(1, CFG.context + 1):reshape(1, CFG.context), mesh, {R, R})
  local on_mesh = {device_mesh = mesh, placements = {S(1), R}}
  local times, comm = {}, nil
  for step = 1, STEPS + 1 do
    local ids = dt.randint(1, CFG.vocab + 1, {CFG.batch, CFG.context + 1}, on_mesh)
    local input, target = ids:narrow(2, 1, CFG.context), ids:narrow(2, 2, CFG.context)
    collectgarbage()
    dt.barrier()
    local t0 = now()
    local c = dt.comm_debug(function()
      local logits = model(input, pos)
      local loss = F.cross_entropy(logits:reshape(CFG.batch * CFG.context, CFG.vocab),
                                   target:reshape(CFG.batch * CFG.context))
      loss:backward()
      dt.nn.utils.clip_grad_norm_(model:parameters(), 1.0)
      opt:step()
      opt:zero_grad()
    end)
    dt.barrier()
    if step > 1 then times[#times + 1] = (now() - t0) * 1000 end -- the first step warms up
    comm = c
  end
  table.sort(times)
  local bytes = 0
  for _, p in ipairs(model:parameters()) do bytes = bytes + local_bytes(p) end
  for _, s in pairs(opt:state_dict().state) do
    for _, v in pairs(s) do if dt.is_tensor(v) then bytes = bytes + local_bytes(v) end end
  end
  return {ms = times[(#times + 1) // 2], comm = comm, bytes = bytes}
end

-- each twice, alternating, the faster median kept: the first run also warms the allocator
local function faster(a, b) return a.ms <= b.ms and a or b end
local base, fsdp = run(false), run(true)
base, fsdp = faster(base, run(false)), faster(fsdp, run(true))
local function line(name, r)
  dt.print0(string.format("%-12s %8.1f ms/step  all_gather %3d  reduce_scatter %3d  all_reduce %3d  %6.2f MiB/step  " ..
    "params+optimizer %9d bytes (rank 0)", name, r.ms, r.comm.all_gather, r.comm.reduce_scatter, r.comm.all_reduce,
    r.comm.bytes / 2 ^ 20, r.bytes))
end
dt.print0(string.format("GPT %d layers, width %d, batch %d, %d steps (median), mesh %dx1, threads backend", CFG.layers,
  CFG.width, CFG.batch, STEPS, n))
line("replicated", base)
line("fully_shard", fsdp)
dt.print0(string.format("fully_shard / replicated step time: %.2f; memory: %.2f", fsdp.ms / base.ms,
  fsdp.bytes / base.bytes))
