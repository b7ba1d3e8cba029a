-- Helpers shared by the specs that run dtlua as a subprocess (dist_launch_spec.lua,
-- bench_spec.lua).  Every run is wrapped in timeout(1): a hang fails, it
-- never blocks.
local M = {}

M.DTLUA = os.getenv("DTLUA") or "./dtlua"

-- How many times pattern pat occurs in s.
function M.count(s, pat)
  local n = 0
  for _ in s:gmatch(pat) do n = n + 1 end
  return n
end

function M.sh_quote(s) return "'" .. s:gsub("'", "'\\''") .. "'" end

-- Writes text to path (a script or data file for a subprocess).
function M.write(path, text)
  local f = assert(io.open(path, "w"))
  f:write(text)
  f:close()
end

-- The losses a run printed with --print-losses ("step N loss X" lines): {[N] = X}.
function M.losses(out)
  local l = {}
  for step, v in out:gmatch("step (%d+) loss (%S+)\n") do l[tonumber(step)] = tonumber(v) end
  return l
end

-- Runs a shell command; returns its output (stdout+stderr), exit status and seconds.
function M.capture(cmd)
  local t0 = os.time()
  local p = io.popen(cmd .. " 2>&1; echo \"rc=$?\"")
  local out = p:read("a")
  p:close()
  local rc = tonumber(out:match("rc=(%d+)\n?$"))
  return (out:gsub("rc=%d+\n?$", "")), rc, os.time() - t0
end

local function with_stdin(cmd, stdin)
  if stdin then return "printf %s " .. M.sh_quote(stdin) .. " | " .. cmd end
  return cmd
end

-- dtlua with args (an env prefix, text for stdin): output, exit status, seconds.
function M.run(args, env, stdin)
  return M.capture(with_stdin(string.format("%s timeout 60 %s %s", env or "", M.sh_quote(M.DTLUA), args), stdin))
end

-- The mpirun command with the CI settings (root, shared memory, oversubscription), or nil
-- where there is no mpirun or dtlua was built without MPI.
function M.mpirun_prefix()
  if not dt.distributed.is_mpi_available() then return nil end
  local out = M.capture("command -v mpirun && mpirun --version")
  if not out:match("mpirun") then return nil end
  if out:match("Open MPI") then
    return "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader " ..
           "timeout 60 mpirun --oversubscribe"
  end
  return "timeout 60 mpirun"
end

-- mpirun -np np dtlua args: output, exit status, seconds (mpirun_prefix() must be non-nil).
function M.mrun(np, args, env, stdin)
  local cmd = string.format("%s %s -np %d %s %s", env or "", M.mpirun_prefix(), np, M.sh_quote(M.DTLUA), args)
  return M.capture(with_stdin(cmd, stdin))
end

return M
