-- The launcher and its failure handling, run as subprocesses of the built dtlua (env DTLUA,
-- set by make check).  Every run is wrapped in timeout(1): a hang fails, it never blocks.
local H = require("tests.spec.support.launch_helpers")
local DTLUA, sh_quote, run, mpirun_prefix = H.DTLUA, H.sh_quote, H.run, H.mpirun_prefix

local count = H.count

describe("dtlua -n N", function()
  it("runs every rank and exits 0 when all succeed", function()
    local out, rc = run("-n 3 -e " .. sh_quote("print('r' .. dt.rank() .. '/' .. dt.world_size())"))
    assert.are.equal(0, rc)
    for r = 0, 2 do assert.matches("r" .. r .. "/3", out, 1, true) end
  end)

  it("--quiet-others keeps rank 0's print, --tag-output prefixes lines, print0 prints once", function()
    local out = run("-n 3 --quiet-others -e " .. sh_quote("print('hi', dt.rank())"))
    assert.are.same("hi\t0\n", out)
    out = run("-n 2 --tag-output -e " .. sh_quote("print('a\\nb')"))
    assert.are.equal(2, count(out, "%[0%] [ab]\n") / 1)
    assert.are.equal(2, count(out, "%[1%] [ab]\n"))
    out = run("-n 4 -e " .. sh_quote("dt.print0('once')"))
    assert.are.same("once\n", out)
  end)

  it("an error on one rank tears the world down and is printed once with rank and traceback", function()
    local prog = "if dt.rank() == 1 then error('boom') end dt.distributed.all_reduce(dt.ones(4))"
    local out, rc, secs = run("-n 3 -e " .. sh_quote(prog))
    assert.are_not.equal(0, rc)
    assert.are.equal(1, count(out, "boom"))
    assert.matches("rank 1: %(command line%):1: boom", out)
    assert.matches("stack traceback", out, 1, true)
    assert.is_true(secs < 30)
  end)

  it("a collective mismatch fails instead of hanging, naming both calls", function()
    local prog = "local D = dt.distributed if dt.rank() == 0 then D.all_reduce(dt.ones(4)) " ..
                 "else D.broadcast(dt.ones(4), 0) end"
    local out, rc = run("-n 2 -e " .. sh_quote(prog))
    assert.are_not.equal(0, rc)
    assert.matches("collective mismatch in group {0,1}: rank 0 called all_reduce(sum, float32, 4 elements), " ..
                   "rank 1 called broadcast(float32, 4 elements, src 0)", out, 1, true)
  end)

  it("DTLUA_TIMEOUT turns a stuck collective into an error naming the missing ranks", function()
    local prog = "if dt.rank() ~= 2 then dt.distributed.all_reduce(dt.ones(4)) " ..
                 "else local t = os.clock() while os.clock() - t < 30 do end end"
    local out, rc, secs = run("-n 3 -e " .. sh_quote(prog), "DTLUA_TIMEOUT=0.5")
    assert.are_not.equal(0, rc)
    assert.matches("all_reduce: timed out after 0.5 s in group {0,1,2}: rank(s) {2} did not arrive", out, 1, true)
    assert.is_true(secs < 20) -- the busy rank is interrupted too
  end)

  it("a rank that ends without joining a collective fails its peers at once", function()
    local out, rc = run("-n 2 -e " .. sh_quote("if dt.rank() == 1 then dt.barrier() end"))
    assert.are_not.equal(0, rc)
    assert.matches("rank(s) {0} finished their program without joining it", out, 1, true)
  end)

  it("os.exit on one rank ends that rank with its status", function()
    local _, rc = run("-n 2 -e " .. sh_quote("os.exit(dt.rank() == 1 and 3 or 0)"))
    assert.are_not.equal(0, rc)
    _, rc = run("-n 2 -e " .. sh_quote("os.exit(0)"))
    assert.are.equal(0, rc)
  end)

  it("rejects a bad -n and an unknown backend", function()
    local out, rc = run("-n 0 -e 'print(1)'")
    assert.are_not.equal(0, rc)
    assert.matches("-n needs a rank count", out, 1, true)
    out, rc = run("--backend carrier-pigeon -e 'print(1)'")
    assert.are_not.equal(0, rc)
    assert.matches("unknown backend 'carrier-pigeon'", out, 1, true)
  end)
end)

describe("the REPL on a mesh", function()
  it("runs each line fed from a pipe on every rank and shows every rank's results", function()
    local input = "x = dt.rank() * 10\nx\nfunction f(a)\n  return a + 1\nend\nf(x), 's'\n" ..
                  ":ranks 0\nx\n:ranks all\ndt.distributed.all_reduce(dt.tensor({dt.rank()})):item()\n"
    local out, rc = run("-n 3 -i", nil, input)
    assert.are.equal(0, rc)
    local lines = {}
    for l in out:gmatch("[^\n]+") do
      if l:match("^%[%d%]") then lines[#lines + 1] = l end
    end
    assert.are.same({"[0] 0", "[1] 10", "[2] 20", "[0] 1\ts", "[1] 11\ts", "[2] 21\ts", "[0] 0",
                     "[0] 3", "[1] 3", "[2] 3"}, lines)
  end)

  it("reports an error on a line and goes on", function()
    local out, rc = run("-n 2 -i", nil, "error('bad')\n1 + 1\n")
    assert.are.equal(0, rc)
    assert.matches("[0] error: stdin:1: bad", out, 1, true)
    assert.matches("[1] 2", out, 1, true)
  end)

  it("waiting for the user's next line is not a stuck collective (no DTLUA_TIMEOUT)", function()
    local p = io.popen("(sleep 1; echo 'dt.rank() + 7') | DTLUA_TIMEOUT=0.3 timeout 30 " .. sh_quote(DTLUA) ..
                       " -n 2 -i 2>&1; echo \"rc=$?\"")
    local out = p:read("a")
    p:close()
    assert.matches("[0] 7\n[1] 8\n", out, 1, true)
    assert.matches("rc=0", out, 1, true)
  end)

  it("stdin without -i is one script shared by all ranks", function()
    local out, rc = run("-n 2", nil, "print('r' .. dt.rank())\n")
    assert.are.equal(0, rc)
    assert.matches("r0", out, 1, true)
    assert.matches("r1", out, 1, true)
  end)
end)

describe("under mpirun", function()
  local mrun = H.mrun

  it("detects mpirun and uses the MPI backend", function()
    if not mpirun_prefix() then return end
    local out, rc = mrun(2, "-e " .. sh_quote("print(dt.backend(), dt.rank(), dt.world_size())"))
    assert.are.equal(0, rc)
    assert.matches("mpi\t0\t2", out, 1, true)
    assert.matches("mpi\t1\t2", out, 1, true)
  end)

  it("an error on one rank prints it with the rank and aborts the job", function()
    if not mpirun_prefix() then return end
    local out, rc = mrun(2, "-e " .. sh_quote("if dt.rank() == 1 then error('boom') end dt.barrier()"))
    assert.are_not.equal(0, rc)
    assert.matches("rank 1: (command line):1: boom", out, 1, true)
  end)

  it("DTLUA_DEBUG=collectives reports a mismatch", function()
    if not mpirun_prefix() then return end
    local prog = "local D = dt.distributed if dt.rank() == 0 then D.all_reduce(dt.ones(4)) " ..
                 "else D.broadcast(dt.ones(4), 0) end"
    local out, rc = mrun(2, "-e " .. sh_quote(prog), "DTLUA_DEBUG=collectives")
    assert.are_not.equal(0, rc)
    assert.matches("collective mismatch in group {0,1}", out, 1, true)
  end)

  it("DTLUA_TIMEOUT turns a stuck collective into an error", function()
    if not mpirun_prefix() then return end
    local prog = "if dt.rank() == 0 then dt.barrier() else local t = os.clock() while os.clock() - t < 20 do end end"
    local out, rc = mrun(2, "-e " .. sh_quote(prog), "DTLUA_TIMEOUT=0.5")
    assert.are_not.equal(0, rc)
    assert.matches("barrier: timed out after 0.5 s", out, 1, true)
  end)

  it("the REPL reads on rank 0 and shows every rank's results", function()
    if not mpirun_prefix() then return end
    local out, rc = mrun(2, "-i", nil, "dt.rank() + 100\n")
    assert.are.equal(0, rc)
    assert.matches("[0] 100\n[1] 101", out, 1, true)
  end)
end)

describe("stock lua5.4", function()
  it("require 'dtensor' gives a 1-rank world where collectives work", function()
    local builddir, srcdir = os.getenv("builddir"), os.getenv("srcdir")
    if not builddir or not srcdir then return end
    -- a sanitizer build's module cannot be loaded by the uninstrumented lua5.4
    if os.execute("ldd " .. builddir .. "/.libs/core.so | grep -q libasan") then return end
    local dir = os.tmpname()
    os.remove(dir)
    assert.is_true(os.execute(string.format("mkdir -p %s/dtensor && ln -s %s/.libs/core.so %s/dtensor/core.so",
      dir, builddir, dir)))
    local prog = string.format("package.cpath = %q .. '/?.so;' .. package.cpath; " ..
      "package.path = %q .. '/lua/?.lua;' .. %q .. '/lua/?/init.lua;' .. package.path; " ..
      "local dt = require 'dtensor'; local t = dt.distributed.all_reduce(dt.ones(3)); " ..
      "print(dt.world_size(), dt.rank(), dt.backend(), t:numel())", dir, srcdir, srcdir)
    local p = io.popen("timeout 30 lua5.4 -e " .. sh_quote(prog) .. " 2>&1")
    local out = p:read("a")
    p:close()
    os.execute("rm -rf " .. dir)
    assert.are.same("1\t0\tthreads\t3\n", out)
  end)
end)
