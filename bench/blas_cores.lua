-- BLAS core benchmark: float32 matmul GFLOP/s with the kernels dtlua picks by itself (no
-- variable set) next to each OpenBLAS core forced with OPENBLAS_CORETYPE, all in this run;
-- the ratio is against the best forced core.  Each figure is a fresh ./dtlua process (OpenBLAS
-- picks its core at load), alternating rounds so that every core sees the same busy machine.
-- usage (from the build dir): ./dtlua bench/blas_cores.lua [n] [threads]   (default 1024 1)
local n, threads = tonumber(arg[1]) or 1024, tonumber(arg[2]) or 1
local cores = {"Prescott", "Haswell", "Zen", "SkylakeX", "Cooperlake"}
local exe = arg[-1] or "./dtlua"

-- one process: best of 10 calls after a warm-up; prints "core gflops"
local child = [[
local a, b = dt.ones(n, n), dt.full({n, n}, 0.5)
a:matmul(b)
local best = math.huge
for _ = 1, 10 do
  local t0 = dt._monotonic_time()
  a:matmul(b)
  best = math.min(best, dt._monotonic_time() - t0)
end
io.write(dt.config().blas_core, " ", 2 * n ^ 3 / best / 1e9)
]]

local function measure(core)
  local env = "env -u OPENBLAS_CORETYPE -u DTLUA_BLAS_CORE_SET OPENBLAS_NUM_THREADS=" .. threads
  if core then env = env .. " OPENBLAS_CORETYPE=" .. core end
  local p = io.popen(string.format("%s %s -e 'n = %d' -e '%s'", env, exe, n, (child:gsub("'", "'\\''"))) .. " 2>/dev/null")
  local out = p:read("a")
  p:close()
  local name, g = out:match("^(%S+) (%S+)$")
  return name, tonumber(g)
end

if dt.config().blas ~= "openblas" then
  print("dtlua is built with " .. dt.config().blas .. ": nothing to compare")
  return
end
local best, got = {}, {}
for _ = 1, 3 do
  for _, c in ipairs(cores) do
    local name, g = measure(c)
    if name == c and g then best[c] = math.max(best[c] or 0, g) end -- name ~= c: core unknown to this OpenBLAS
  end
  local name, g = measure(nil)
  if g and (not got.g or g > got.g) then got = {name = name, g = g} end
end
local top = 0
for _, g in pairs(best) do top = math.max(top, g) end
print(string.format("sgemm %dx%d, %d thread(s), CPU %s", n, n, threads, dt.config().cpu))
print(string.format("%-36s %10s %8s", "kernels", "GFLOP/s", "ratio"))
for _, c in ipairs(cores) do
  if best[c] then print(string.format("%-36s %10.1f %8.2f", "OPENBLAS_CORETYPE=" .. c, best[c], best[c] / top)) end
end
if got.g then
  print(string.format("%-36s %10.1f %8.2f", "dtlua's own pick (" .. got.name .. ")", got.g, got.g / top))
end
