-- Loads the C baselines (bench/baseline.c, built by make, not installed) that every
-- benchmark measures against in the same run:
--   local baseline = dofile((arg and arg[0] or ""):match("^(.*)/") or "bench") .. "/load_baseline.lua")
local here = (arg and arg[0] or ""):match("^(.*)/") or "bench"
package.cpath = here .. "/.libs/?.so;bench/.libs/?.so;" .. package.cpath
local baseline = require "baseline"

-- The BLAS threads of this process (OpenBLAS reads these variables; default: every core), which
-- benchmarks match on the PyTorch side.
function baseline.blas_threads()
  local env = tonumber(os.getenv("OPENBLAS_NUM_THREADS") or os.getenv("OMP_NUM_THREADS") or "")
  if env then return env end
  local p = io.popen("nproc 2>/dev/null")
  local n = p and tonumber(p:read("a"))
  if p then p:close() end
  return n or 1
end

return baseline
