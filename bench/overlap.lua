-- Overlap of computation with an async collective: per step, a matmul chain (compute) and an
-- all_reduce (comm) of a float32 tensor; the baseline runs them in sequence (blocking
-- all_reduce), the async form issues the all_reduce with {async_op = true}, computes, then
-- waits.  Prints the time of each alone, of the sequence, of the overlapped step, and
-- overlap = (sequence - overlapped) / min(compute, comm): 1 = the shorter one is hidden
-- entirely, 0 = no overlap.
-- Then the training step (forward, backward, SGD) of an MLP (6 Linear layers of width 512,
-- batch 64 per rank, float32) under dt.parallel.replicate (bucket all_reduces overlapped
-- with backward) and under fully_shard on every layer and the root (gathers prefetched):
-- median ms/step, to compare between builds (the overlap is not switchable in one run).
--   dtlua -n 2 bench/overlap.lua [MiB=32] [matmul size=256] [steps=20]
--   mpirun -np 2 dtlua bench/overlap.lua
local D = dt.distributed
local baseline = dofile(((arg and arg[0] or ""):match("^(.*)/") or "bench") .. "/load_baseline.lua")
local now = baseline.now
local n, backend = dt.world_size(), dt.backend()
local mib = tonumber(arg and arg[1]) or 32
local msize = tonumber(arg and arg[2]) or 256
local steps = tonumber(arg and arg[3]) or 20

local buf = dt.ones(mib * 1024 * 1024 // 4)
local a = dt.randn(msize, msize)
local chain = 6 -- matmuls per step: a compute time of the order of the collective's

local function compute()
  local x = a
  for _ = 1, chain do x = x:matmul(a):mul(1 / msize) end
  return x
end

-- Best of 3 timings of steps calls of f, the slowest rank's.
local function time(f)
  local best = math.huge
  for _ = 1, 3 do
    D.barrier()
    local t0 = now()
    for _ = 1, steps do f() end
    local t = dt.tensor({now() - t0}, {dtype = "float64"})
    D.all_reduce(t, "max")
    best = math.min(best, t:totable()[1] / steps)
  end
  return best
end

local t_comp = time(compute)
local t_comm = time(function() D.all_reduce(buf, "sum") end)
local t_seq = time(function()
  D.all_reduce(buf, "sum")
  compute()
end)
local t_async = time(function()
  local w = D.all_reduce(buf, "sum", {async_op = true})
  compute()
  w:wait()
end)

if dt.rank() == 0 then
  print(string.format("# bench/overlap.lua: %d rank(s), %s backend, all_reduce of %d MiB, %d matmuls of %dx%d",
                      n, backend, mib, chain, msize, msize))
  print(string.format("compute %.2f ms, all_reduce %.2f ms, in sequence %.2f ms, overlapped %.2f ms", t_comp * 1e3,
                      t_comm * 1e3, t_seq * 1e3, t_async * 1e3))
  local hidden = (t_seq - t_async) / math.min(t_comp, t_comm)
  print(string.format("speedup %.2fx over the sequence, overlap %.2f (1 = the shorter part fully hidden)",
                      t_seq / t_async, hidden))
end

-- ---- training steps ----
local WIDTH, LAYERS, BATCH = 512, 6, 64
local mesh = dt.init_device_mesh("cpu", {n})

local function mlp()
  dt.manual_seed(3)
  local layers = {}
  for i = 1, LAYERS do
    layers[#layers + 1] = dt.nn.Linear(WIDTH, WIDTH)
    if i < LAYERS then layers[#layers + 1] = dt.nn.Tanh() end
  end
  return dt.nn.Sequential(table.unpack(layers))
end

local function step_ms(wrap)
  local model = wrap(mlp())
  local opt = dt.optim.SGD(model:parameters(), {lr = 1e-3})
  dt.manual_seed(10 + dt.rank())
  local x = dt.randn(BATCH, WIDTH)
  local times = {}
  for step = 1, steps + 2 do
    D.barrier()
    local t0 = now()
    model(x):pow(2):mean():backward()
    opt:step()
    opt:zero_grad()
    local t = dt.tensor({now() - t0}, {dtype = "float64"})
    D.all_reduce(t, "max")
    if step > 2 then times[#times + 1] = t:totable()[1] * 1e3 end
  end
  table.sort(times)
  return times[(#times + 1) // 2]
end

local rep = step_ms(function(m) return dt.parallel.replicate(m, mesh, {bucket_cap_mb = 1}) end)
local fs = step_ms(function(m)
  for _, layer in ipairs(m:children()) do
    if #layer:parameters() > 0 then dt.parallel.fully_shard(layer, mesh) end
  end
  return dt.parallel.fully_shard(m, mesh)
end)
dt.print0(string.format("MLP %d x Linear(%d), batch %d per rank: replicate %.2f ms/step, fully_shard %.2f ms/step",
                        LAYERS, WIDTH, BATCH, rep, fs))
