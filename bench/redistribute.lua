-- Redistribute cost against the bare collective it issues, float32, 1-d mesh of the world:
--   dtlua -n 4 bench/redistribute.lua [MiB] [repetitions]
-- Size = the global tensor; time = best of `repetitions` (default 5) of the slowest rank (a
-- barrier brackets each); the redistribute and its collective alternate, so a loaded machine
-- slows both alike (raise the repetitions there: the minima then come from quiet moments).
-- Shard(1)->Replicate vs dt.distributed.all_gather, Partial->Replicate vs all_reduce,
-- Shard(1)->Shard(2) vs all_to_all, Partial->Shard(1) vs reduce_scatter; with 4 ranks also a
-- 2x2 mesh's [Shard(1), Shard(2)]->[Replicate, Replicate] vs an all_gather of the same blocks.
-- On threads it also prints C threads' strided and contiguous all_to_all copies of the same bytes.
local D = dt.distributed
local baseline = dofile(((arg and arg[0] or ""):match("^(.*)/") or "bench") .. "/load_baseline.lua")
local now = baseline.now
local n = dt.world_size()
local mib = tonumber(arg and arg[1]) or 16
local rows = math.max(n, (mib * 1024 * 1024 // 4) // 1024 // n * n)
local mesh = dt.init_device_mesh("cpu", {n})
local x = dt.ones(rows, 1024)

local reps = tonumber(arg and arg[2]) or 5

local function once(f)
  dt.barrier()
  local t0 = now()
  f()
  return dt.distributed.all_reduce(dt.tensor({now() - t0}, {dtype = "float64"}), "max"):item()
end

-- The best times of f and g, called alternately.
local function best_pair(f, g)
  local a, b = math.huge, math.huge
  for _ = 1, reps do
    a = math.min(a, once(f))
    b = math.min(b, once(g))
  end
  return a, b
end

local s1 = dt.distribute_tensor(x, mesh, {"S1"}, {src_rank = false})
local p = dt.distribute_tensor(x, mesh, {"P"}, {src_rank = false})
local loc = s1:to_local()
local cases = {
  {"Shard(1)->Replicate", function() s1:redistribute({"R"}) end, "all_gather", function() D.all_gather(loc) end},
  {"Partial->Replicate", function() p:redistribute({"R"}) end, "all_reduce", function() D.all_reduce(p:to_local():clone()) end},
  {"Shard(1)->Shard(2)", function() s1:redistribute({"S2"}) end, "all_to_all", function() D.all_to_all(loc) end},
  {"Partial->Shard(1)", function() p:redistribute({"S1"}) end, "reduce_scatter", function() D.reduce_scatter(p:to_local()) end},
}
if n == 4 then
  local mesh2 = dt.init_device_mesh("cpu", {2, 2})
  local s12 = dt.distribute_tensor(x, mesh2, {"S1", "S2"}, {src_rank = false})
  local loc12 = s12:to_local()
  cases[#cases + 1] = {"[S1,S2]->[R,R] (2x2)", function() s12:redistribute({"R", "R"}) end, "all_gather",
                       function() D.all_gather(loc12) end}
end
local f = io.open("/proc/loadavg")
local load = f and f:read("n") or -1
if f then f:close() end
dt.print0(string.format("%d ranks (%s), global %d x 1024 float32 = %.0f MiB, best of %d, loadavg %.2f", n, dt.backend(),
  rows, rows * 4096 / 2 ^ 20, reps, load))
for _, c in ipairs(cases) do
  local a, b = best_pair(c[2], c[4])
  dt.print0(string.format("%-22s %8.2f ms   %-15s %8.2f ms   ratio %.2f", c[1], a * 1e3, c[3], b * 1e3, a / b))
end
-- Shard(1)->Shard(2) moves column slabs (rows of 4096/n bytes, 4096 apart) where the bare
-- all_to_all moves contiguous pieces: n C threads making each set of copies between barriers,
-- in loops (bench/baseline.c), show what the strided read itself costs on this machine.
if dt.backend() == "threads" and n > 1 then
  dt.barrier()
  if dt.rank() == 0 then
    local bytes, calls = rows * 4096, math.max(10, reps)
    local contiguous = baseline.exchange_copy_seconds(bytes, n, 0, 5, calls)
    local strided = baseline.exchange_copy_seconds(bytes, n, 4096 // n, 5, calls)
    print(string.format("C threads, the same copies: column slabs %.2f ms, contiguous %.2f ms, ratio %.2f (the strided "
      .. "read's own cost)", strided * 1e3, contiguous * 1e3, strided / contiguous))
  end
  dt.barrier()
end
