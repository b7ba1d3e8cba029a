-- GPU throughput next to yardsticks measured in the same run (doc/cuda.md; tests/gpu/run.sh runs
-- it): matmul 4096 and 8192 in bfloat16 (and float32) TFLOP/s against cublasGemmEx called
-- directly (target >= 0.95), elementwise add GB/s against a device memcpy (target >= 0.85), and
-- softmax GB/s.  Each figure is the best of `reps` runs, timed around dt.cuda.synchronize().
-- Without a CUDA device it prints one line and exits.
-- usage: dtlua bench/gpu.lua [reps]
if not dt.cuda.is_available() then
  local why = select(2, pcall(dt.ones(1).cuda, dt.ones(1)))
  print("bench/gpu.lua: no CUDA device, skipped (" .. tostring(why) .. ")")
  return
end
local reps = tonumber(arg and arg[1]) or 5
local now = dt.utils.monotonic_time

local function best(fn)
  fn() -- warm-up: kernels loaded, allocator blocks cached
  dt.cuda.synchronize()
  local b = math.huge
  for _ = 1, reps do
    local t0 = now()
    fn()
    dt.cuda.synchronize()
    b = math.min(b, now() - t0)
  end
  return b
end

print(string.format("device count %d, best of %d", dt.cuda.device_count(), reps))
print(string.format("%-34s %10s %10s %8s", "what", "dtlua", "yardstick", "ratio"))
local function row(what, mine, base, unit)
  print(string.format("%-34s %8.1f %s %8.1f %s %7.2f", what, mine, unit, base, unit, mine / base))
end

for _, dtype in ipairs {"bfloat16", "float32"} do
  for _, n in ipairs {4096, 8192} do
    local a, b = dt.randn(n, n):to(dtype):cuda(), dt.randn(n, n):to(dtype):cuda()
    local flops = 2 * n ^ 3
    local mine = best(function() return a:matmul(b) end)
    local raw = dt.cuda._bench_gemm(n, dtype, reps)
    row(string.format("matmul %d %s (TFLOP/s)", n, dtype), flops / mine / 1e12, flops / raw / 1e12, "")
  end
end

local n = 1 << 26
local x, y = dt.randn(n):cuda(), dt.randn(n):cuda()
local copy = dt.cuda._bench_memcpy(4 * n, reps)
local memcpy_gbs = 2 * 4 * n / copy / 1e9 -- read + write
local add = best(function() return x + y end)
row("add float32 2^26 (GB/s)", 3 * 4 * n / add / 1e9, memcpy_gbs, "")
local rows, cols = 1 << 16, 1024
local s = dt.randn(rows, cols):cuda()
local sm = best(function() return s:softmax(2) end)
row("softmax 65536x1024 f32 (GB/s)", 2 * 4 * rows * cols / sm / 1e9, memcpy_gbs, "")
print("layer_norm: no CUDA kernel yet (tests/spec/support/cuda_missing.lua)")
print(string.format("caching allocator: %s", (function()
  local st = dt.cuda.memory_stats()
  return string.format("%d allocs, %d cache hits, %.0f MiB reserved", st.num_allocs, st.num_cache_hits, st.reserved_bytes / 2 ^ 20)
end)()))
