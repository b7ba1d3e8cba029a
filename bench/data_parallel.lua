-- dt.parallel.data_parallel against its baselines, in the same run: a training step of an
-- MLP (batch B, 256 -> 1024 -> 256, mean-square loss, SGD) per step on rank 0, best of 5 loops:
-- (the four measured in turn in each of 5 rounds, against the load's drift):
--  1. the single-device step on the whole batch (every rank runs it alike): the baseline;
--  2. data_parallel, replayed (the default): the same step function, each rank on its shard of
--     the batch, its DTensor program recorded once by dt.compile and replayed (gradients
--     summed in packed all_reduces);
--  3. data_parallel with replay = false: the DTensor program run eagerly (Lua and the
--     dispatcher per op, gradients summed in grad_buckets.lua's buckets);
--  4. dt.parallel.replicate (DDP): each rank runs plain tensors on its own rows, gradients
--     averaged in buckets -- what a hand-written data-parallel loop costs.
--   dtlua -n 1 bench/data_parallel.lua [batch] [iterations]      dtlua -n 4 bench/data_parallel.lua
local baseline = dofile(((arg and arg[0] or ""):match("^(.*)/") or "bench") .. "/load_baseline.lua")
local B = tonumber(arg and arg[1]) or 256
local N = tonumber(arg and arg[2]) or 10
local n, rank = dt.world_size(), dt.rank()
local mesh = dt.init_device_mesh("cpu", {n})

-- the best of 5 rounds for each of fs, measured in turn within each round, so that the
-- load of a shared machine drifts alike over all of them: seconds per call, in fs' order
local function best_interleaved(fs)
  local b = {}
  for i = 1, #fs do b[i] = math.huge end
  for _ = 1, 5 do
    for i, f in ipairs(fs) do
      dt.barrier()
      local t0 = baseline.now()
      for _ = 1, N do f() end
      b[i] = math.min(b[i], (baseline.now() - t0) / N)
    end
  end
  return table.unpack(b)
end

local function setup()
  dt.manual_seed(0)
  local model = dt.nn.Sequential(dt.nn.Linear(256, 1024), dt.nn.GELU(), dt.nn.Linear(1024, 256))
  local opt = dt.optim.SGD(model:parameters(), {lr = 1e-3})
  local function step(x, y)
    opt:zero_grad()
    local d = model(x) - y
    local loss = (d * d):mean()
    loss:backward()
    opt:step()
    return loss
  end
  return model, step
end

dt.manual_seed(1)
local x, y = dt.randn(B, 256), dt.randn(B, 256)

local _, single = setup()

local _, step = setup()
local dp = dt.parallel.data_parallel(step, mesh)
for _ = 1, 3 do dp(x, y) end -- the trace, one eager call, the capture

local _, estep = setup()
local dpe = dt.parallel.data_parallel(estep, mesh, {replay = false})
dpe(x, y) -- the trace

local model, rstep = setup()
dt.parallel.replicate(model, mesh)
local rows = (B + n - 1) // n
local first = rank * rows
local len = math.max(0, math.min(rows, B - first))
local lx, ly = x:narrow(1, first + 1, len), y:narrow(1, first + 1, len)
local t_single, t_dp, t_dpe, t_rep = best_interleaved {function() single(x, y) end, function() dp(x, y) end,
                                                        function() dpe(x, y) end, function() rstep(lx, ly) end}
assert(dp:stats().replayed_calls == 1 + 5 * N, "data_parallel did not replay")

if rank == 0 then
  print(string.format("MLP step, batch %d, %d rank(s): single device %.2f ms; data_parallel replayed %.2f ms (%.2fx of "
    .. "single); eager (replay = false) %.2f ms (%.2fx of single); replayed / eager %.2f; replicate %.2f ms (%.2fx of "
    .. "single); replayed / replicate %.2f", B, n, t_single * 1e3, t_dp * 1e3, t_single / t_dp, t_dpe * 1e3,
    t_single / t_dpe, t_dp / t_dpe, t_rep * 1e3, t_single / t_rep, t_dp / t_rep))
end
