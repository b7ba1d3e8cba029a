-- Overlap of computation with an async collective: per step, a matmul chain (compute) and an
-- all_reduce (comm) of a float32 tensor; the baseline runs them in sequence (blocking
-- all_reduce), the async form issues the all_reduce with {async_op = true}, computes, then
-- waits.  Prints the time of each alone, of the sequence, of the overlapped step, and
-- overlap = (sequence - overlapped) / min(compute, comm): 1 = the shorter one is hidden
-- entirely, 0 = no overlap.
--   dtlua -n 2 bench/overlap.lua [MiB=8] [matmul size=256] [steps=20]
--   mpirun -np 2 dtlua bench/overlap.lua
local D = dt.distributed
local baseline = dofile(((arg and arg[0] or ""):match("^(.*)/") or "bench") .. "/load_baseline.lua")
local now = baseline.now
local n, backend = dt.world_size(), dt.backend()
local mib = tonumber(arg and arg[1]) or 8
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
