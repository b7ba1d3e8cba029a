-- Ops benchmark: dtlua next to C baselines timed in the same run.
-- usage (from the build dir): ./dtlua bench/ops.lua [quick]
--   matmul float32 at 256/512/1024/2048: GFLOP/s of a:matmul(b) vs a direct cblas_sgemm call
--   a + b on 1-element tensors: per-call overhead in microseconds (target < 1 us)
--   a + b on 16M float32: GB/s (bytes read + written) vs memcpy GB/s
--   sum / sum(1) / softmax(-1) / log_softmax(-1) / layer_norm / rms_norm (last dim, with weight;
--   layer_norm with bias) on 16M float32: GB/s vs memcpy GB/s
--   threads (dt.get_num_threads(), DTLUA_NUM_THREADS): at 1 thread and at the default count,
--   add on 1-64 MiB float32 vs memcpy on the same number of threads, and sum / softmax /
--   layer_norm / rms_norm / randn on [4096,4096] float32 and matmul 512-2048 vs PyTorch on the
--   same thread count (torch.set_num_threads; n/a where PyTorch is not installed)
-- Every figure is the best of a few repetitions (the machine may be shared); a full
-- garbage collection runs (untimed) before each repetition.
package.cpath = "bench/.libs/?.so;" .. package.cpath
local baseline = require "baseline"
local now = baseline.now
local quick = arg and arg[1] == "quick"

local function best_of(reps, fn)
  local best = math.huge
  for _ = 1, reps do
    collectgarbage() -- untimed: frees the previous results so each rep reuses warm memory
    local t0 = now()
    fn()
    local t = now() - t0
    if t < best then best = t end
  end
  return best
end

local rows = {}
local function row(what, dtlua, base, unit)
  local ratio = (dtlua and base) and string.format("%.2f", dtlua / base) or "n/a"
  local function f(v) return v and string.format("%.2f", v) or "n/a" end
  rows[#rows + 1] = string.format("%-34s %12s %12s %8s  %s", what, f(dtlua), f(base), ratio, unit)
end

-- matmul float32
-- dtlua and the baseline alternate, one call each per round, so that both see the same
-- share of a busy machine.
for _, n in ipairs(quick and {256} or {256, 512, 1024, 2048}) do
  local reps = n <= 256 and 30 or (n <= 1024 and 8 or 4)
  local a, b = dt.ones(n, n), dt.full({n, n}, 0.5)
  a:matmul(b) -- warm-up (BLAS threads, page faults)
  local t, base = math.huge, 0
  for _ = 1, reps do
    t = math.min(t, best_of(1, function() a:matmul(b) end))
    base = math.max(base, baseline.sgemm_gflops(n, 1, dt.get_num_threads()) or 0)
  end
  row(string.format("matmul %dx%d float32", n, n), 2 * n ^ 3 / t / 1e9, base > 0 and base or nil, "GFLOP/s")
end

-- a + b exists once the pointwise ops are in; until then print n/a
local has_add = pcall(function() return dt.ones(1) + dt.ones(1) end)

-- per-call overhead of a + b on 1-element tensors
if has_add then
  local a, b = dt.ones(1), dt.ones(1)
  local calls = quick and 20000 or 200000
  local t = best_of(3, function()
    for _ = 1, calls do local _ = a + b end
  end)
  rows[#rows + 1] = string.format("%-34s %12.3f %12s %8s  %s", "a + b, 1 element (per call)", t / calls * 1e6,
                                  "-", "-", "us (target < 1)")
else
  rows[#rows + 1] = string.format("%-34s %12s %12s %8s  %s", "a + b, 1 element (per call)", "n/a", "-", "-",
                                  "us (add not available yet)")
end

-- bandwidth: elementwise add of 16M float32 vs memcpy of the same output size
do
  local n = quick and (1 << 20) or (16 << 20)
  local mem = baseline.memcpy_gbps(n * 4, 5)
  local gbps
  if has_add then
    local a, b = dt.ones(n), dt.ones(n)
    local _ = a + b
    local t = best_of(5, function() local _ = a + b end)
    gbps = 3 * n * 4 / t / 1e9
  end
  row(string.format("add %dM float32 (vs memcpy)", n >> 20), gbps, mem, "GB/s read+written")
end

-- reductions and softmax on 16M float32 (bytes read, + written for softmax) vs memcpy
do
  local n = quick and (1 << 20) or (16 << 20)
  local mem = baseline.memcpy_gbps(n * 4, 5)
  local x = dt.ones(n // 4096, 4096)
  local function gbps(bytes, fn) return bytes / best_of(5, fn) / 1e9 end
  row(string.format("sum() %dM float32", n >> 20), gbps(n * 4, function() x:sum() end), mem, "GB/s")
  row(string.format("sum(1) [%d,4096] float32", n // 4096), gbps(n * 4, function() x:sum(1) end), mem, "GB/s")
  row(string.format("softmax(-1) [%d,4096] float32", n // 4096), gbps(2 * n * 4, function() x:softmax(-1) end), mem,
      "GB/s")
  row(string.format("log_softmax [%d,4096] float32", n // 4096),
      gbps(2 * n * 4, function() x:log_softmax(-1) end), mem, "GB/s")
  local F, w, b = dt.nn.functional, dt.ones(4096), dt.zeros(4096)
  row(string.format("layer_norm [%d,4096] float32", n // 4096),
      gbps(2 * n * 4, function() F.layer_norm(x, {4096}, w, b) end), mem, "GB/s")
  row(string.format("rms_norm [%d,4096] float32", n // 4096), gbps(2 * n * 4, function() F.rms_norm(x, {4096}, w) end),
      mem, "GB/s")
end

print(string.format("%-34s %12s %12s %8s  %s", "benchmark", "dtlua", "C baseline", "ratio", "unit"))
for _, r in ipairs(rows) do print(r) end

-- ---- intra-op threads: the same kernels at 1 thread and at the default count ----
local TORCH_OPS = [[
import sys, time, torch
import torch.nn.functional as F
torch.set_num_threads(int(sys.argv[1]))
rows, n = int(sys.argv[2]), 4096
x = torch.randn(rows, n)
w, b = torch.ones(n), torch.zeros(n)
def gbps(nbytes, f, reps=5):
    best = 1e30
    f()
    for _ in range(reps):
        t0 = time.perf_counter(); f(); best = min(best, time.perf_counter() - t0)
    return nbytes / best / 1e9
e = rows * n * 4
print("sum", gbps(e, lambda: x.sum()))
print("softmax", gbps(2 * e, lambda: x.softmax(-1)))
print("layer_norm", gbps(2 * e, lambda: F.layer_norm(x, (n,), w, b)))
print("rms_norm", gbps(2 * e, lambda: F.rms_norm(x, (n,), w)))
print("randn", gbps(e, lambda: torch.randn(rows, n)))
for m in (512, 1024, 2048):
    a, b = torch.ones(m, m), torch.full((m, m), 0.5)
    print("matmul%d" % m, gbps(2 * m ** 3, lambda: a @ b))
]]

local default_threads = dt.get_num_threads()
local counts = default_threads > 1 and {1, default_threads} or {1}
local load_baseline = dofile("bench/load_baseline.lua")
local have_torch = not quick and load_baseline.torch_available()
local trows = {}
local function trow(what, t, mine, base, unit)
  local ratio = (mine and base) and string.format("%.2f", mine / base) or "n/a"
  local function f(v) return v and string.format("%.2f", v) or "n/a" end
  trows[#trows + 1] = string.format("%-30s %3d %10s %10s %7s  %s", what, t, f(mine), f(base), ratio, unit)
end
for _, t in ipairs(counts) do
  dt.set_num_threads(t)
  for _, mib in ipairs(quick and {1} or {1, 4, 16, 64}) do
    local n = mib * (1 << 20) // 4 -- float32 elements of a mib-MiB tensor
    local a, b = dt.ones(n), dt.ones(n)
    local _ = a + b
    local secs = best_of(quick and 3 or 20, function() local _ = a + b end)
    trow(string.format("add %d MiB float32", mib), t, 3 * n * 4 / secs / 1e9,
         baseline.memcpy_gbps_threads(n * 4, quick and 3 or 20, t), "GB/s vs memcpy, same threads")
  end
  local rows4 = quick and 64 or 4096
  local x, n = dt.randn(rows4, 4096), rows4 * 4096
  local w, bias = dt.ones(4096), dt.zeros(4096)
  local F = dt.nn.functional
  local torch = have_torch and load_baseline.run_python(TORCH_OPS, "python3", {t, rows4},
                                                      string.format("OMP_NUM_THREADS=%d", t)) or {}
  local function gb(bytes, fn) return bytes / best_of(5, fn) / 1e9 end
  trow(string.format("sum() [%d,4096]", rows4), t, gb(n * 4, function() x:sum() end), torch.sum, "GB/s vs PyTorch")
  trow("softmax(-1)", t, gb(2 * n * 4, function() x:softmax(-1) end), torch.softmax, "GB/s vs PyTorch")
  trow("layer_norm", t, gb(2 * n * 4, function() F.layer_norm(x, {4096}, w, bias) end), torch.layer_norm,
       "GB/s vs PyTorch")
  trow("rms_norm", t, gb(2 * n * 4, function() F.rms_norm(x, {4096}, w) end), torch.rms_norm, "GB/s vs PyTorch")
  trow("randn", t, gb(n * 4, function() dt.randn(rows4, 4096) end), torch.randn, "GB/s written vs PyTorch")
  for _, m in ipairs(quick and {} or {512, 1024, 2048}) do
    local a, b = dt.ones(m, m), dt.full({m, m}, 0.5)
    trow(string.format("matmul %dx%d", m, m), t, gb(2 * m ^ 3, function() a:matmul(b) end), torch["matmul" .. m],
         "GFLOP/s vs PyTorch")
  end
end
dt.set_num_threads(default_threads)
print()
print(string.format("%-30s %3s %10s %10s %7s  %s", "intra-op threads", "thr", "dtlua", "baseline", "ratio", "unit"))
for _, r in ipairs(trows) do print(r) end
if not have_torch and not quick then print("(PyTorch not importable: its columns are n/a)") end
