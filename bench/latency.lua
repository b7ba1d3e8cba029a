-- Small-message latency: a 4-byte all_reduce and a barrier, Lua call included.
--   dtlua -n 2 bench/latency.lua [elements]
local D = dt.distributed
local baseline = dofile(((arg and arg[0] or ""):match("^(.*)/") or "bench") .. "/load_baseline.lua")
local now = baseline.now
local t = dt.ones({tonumber(arg and arg[1]) or 1})
local N = 20000
for _ = 1, 1000 do D.all_reduce(t) end
dt.barrier()
local t0 = now()
for _ = 1, N do D.all_reduce(t) end
local ar = (now() - t0) / N
dt.barrier()
t0 = now()
for _ = 1, N do dt.barrier() end
local bar = (now() - t0) / N
dt.print0(string.format("%d-byte all_reduce: %.2f us, barrier: %.2f us (%s, %d ranks)", t:numel() * 4, ar * 1e6,
  bar * 1e6, dt.backend(), dt.world_size()))
