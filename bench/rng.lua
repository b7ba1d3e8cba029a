-- RNG throughput: rand/randn of 64M float32 (default; `dtlua bench/rng.lua 20` for 2^20),
-- in GB/s of output written, next to memset/memcpy bandwidth measured in the same run.
-- Each figure is the best of `reps` runs; fresh-tensor figures include page faults only in
-- the first rep (later ones reuse the freed block: src/tensor/block_cache.c).
-- On several ranks (`dtlua -n 4 bench/rng.lua`) it measures the same draws on a DTensor
-- sharded over all of them (the RNG tracker region: each rank fills its block), in GB/s of
-- the global tensor, rank 0 printing: compare with a 1-rank run on the same machine.
local log2n = tonumber(arg and arg[1]) or 26
local reps = tonumber(arg and arg[2]) or 3
local n = 1 << log2n
local bytes = 4 * n

local baseline = dofile(((arg and arg[0] or ""):match("^(.*)/") or "bench") .. "/load_baseline.lua")

local function best(fn)
  local b = math.huge
  for _ = 1, reps do
    collectgarbage()
    local t0 = baseline.now()
    fn()
    b = math.min(b, baseline.now() - t0)
  end
  return b
end

local ranks = dt.world_size()
local function row(name, secs)
  if dt.rank() ~= 0 then return end
  print(string.format("%-30s %8.3f s %8.2f GB/s %8.2f ns/elem", name, secs, bytes / secs / 1e9, secs / n * 1e9))
end

if dt.rank() == 0 then
  print(string.format("n = 2^%d = %d float32 (%.0f MiB), best of %d, %d rank(s)", log2n, n, bytes / 2 ^ 20, reps, ranks))
end
local set_s, cpy_s = baseline.memory_seconds(bytes, reps)
row("memset", set_s)
row("memcpy (bytes written)", cpy_s)
if ranks > 1 then
  local mesh = dt.init_device_mesh("cpu", {ranks})
  local spec = {device_mesh = mesh, placements = {dt.Shard(1)}}
  local function timed(fn) -- every rank done: barriers around the draw
    return best(function()
      dt.distributed.barrier()
      fn()
      dt.distributed.barrier()
    end)
  end
  local x = dt.empty({n}, spec)
  row(string.format("uniform_ Shard(1), %d ranks", ranks), timed(function() x:uniform_() end))
  row(string.format("rand Shard(1), %d ranks", ranks), timed(function() local y = dt.rand({n}, spec) y:release() end))
  row(string.format("normal_ Shard(1), %d ranks", ranks), timed(function() x:normal_() end))
  return
end
local t = dt.empty(n)
row("uniform_ into existing", best(function() t:uniform_() end))
row("rand (fresh tensor)", best(function() local x = dt.rand(n) x:release() end))
row("normal_ into existing", best(function() t:normal_() end))
row("randn (fresh tensor)", best(function() local x = dt.randn(n) x:release() end))
local d = dt.empty(n // 2, {dtype = "float64"})
row("uniform_ float64 (same bytes)", best(function() d:uniform_() end))
