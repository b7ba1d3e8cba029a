-- Loads the C baselines (bench/baseline.c, built by make, not installed) that every
-- benchmark measures against in the same run:
--   local baseline = dofile((arg and arg[0] or ""):match("^(.*)/") or "bench") .. "/load_baseline.lua")
local here = (arg and arg[0] or ""):match("^(.*)/") or "bench"
package.cpath = here .. "/.libs/?.so;bench/.libs/?.so;" .. package.cpath
local baseline = require "baseline"

-- The threads of this rank (intra-op and BLAS: dt.get_num_threads(), DTLUA_NUM_THREADS; before
-- dtlua set OpenBLAS's count, the variables OpenBLAS reads), which benchmarks match on the PyTorch side.
function baseline.blas_threads()
  if dt and dt.get_num_threads then return dt.get_num_threads() end
  local env = tonumber(os.getenv("OPENBLAS_NUM_THREADS") or os.getenv("OMP_NUM_THREADS") or "")
  if env then return env end
  local p = io.popen("nproc 2>/dev/null")
  local n = p and tonumber(p:read("a"))
  if p then p:close() end
  return n or 1
end

-- The best of 5 loops of n calls of f, seconds per call (every rank starts each loop together);
-- clock: baseline.now (wall, the default) or baseline.thread_cpu (this rank's CPU time).
function baseline.best_of_5(n, f, clock)
  clock = clock or baseline.now
  local b = math.huge
  for _ = 1, 5 do
    dt.barrier()
    local t0 = clock()
    for _ = 1, n do f() end
    b = math.min(b, (clock() - t0) / n)
  end
  return b
end

-- Is PyTorch importable (benchmarks compare with it when it is, and say so when not)?
function baseline.torch_available()
  local ok = os.execute("python3 -c 'import torch' >/dev/null 2>&1")
  return ok == true or ok == 0
end

-- Runs a Python script (its text) as `env launcher script args...`, where launcher is "python3"
-- or e.g. "python3 -m torch.distributed.run ..."; returns the "key value" lines it printed as
-- a table (numbers converted).  Its stderr is dropped: a failed run gives an empty table.
function baseline.run_python(script, launcher, args, env)
  local path = os.tmpname() .. ".py"
  local f = assert(io.open(path, "w"))
  f:write(script)
  f:close()
  local p = io.popen(string.format("%s %s %s %s 2>/dev/null", env or "", launcher, path, table.concat(args, " ")))
  local out = p:read("a")
  p:close()
  os.remove(path)
  os.remove(path:sub(1, -4)) -- os.tmpname made this file too
  local res = {}
  for k, v in out:gmatch("(%S+) (%S+)\n") do res[k] = tonumber(v) or v end
  return res
end

return baseline
