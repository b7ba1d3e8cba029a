-- The launcher and its failure handling, run as subprocesses of the built dtlua (env DTLUA,
-- set by make check).  Every run is wrapped in timeout(1): a hang fails, it never blocks.
local H = require("tests.spec.support.launch_helpers")
local DTLUA, sh_quote, run, mpirun_prefix = H.DTLUA, H.sh_quote, H.run, H.mpirun_prefix

local count = H.count
-- os.exit with two codes: rank 1 exits with 5 at once; rank 2 would exit with 6 later but is
-- torn down first
local two_exit_codes = "if dt.rank() == 1 then os.exit(5) end local t = os.clock() " ..
                       "while os.clock() - t < 1 do end if dt.rank() == 2 then os.exit(6) end"

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

  it("collectives on different groups fail at once, naming both groups, not after the timeout", function()
    local prog = "local D = dt.distributed local g = D.new_group({0, 1}) local t = dt.ones(2) " ..
                 "if dt.rank() == 0 then D.all_reduce(t, 'sum', g) else D.all_reduce(t) end"
    local out, rc, secs = run("-n 3 -e " .. sh_quote(prog))
    assert.are_not.equal(0, rc)
    -- whichever of ranks 0 and 1 looks first names the other's call
    assert(out:find("rank 0 waits in all_reduce(sum, float32, 2 elements) on group {0,1} instead, which waits for " ..
                    "rank 1: collectives called on different groups", 1, true) or
           out:find("rank 1 waits in all_reduce(sum, float32, 2 elements) on group {0,1,2} instead, which waits " ..
                    "for rank 0: collectives called on different groups", 1, true), out)
    assert.is_true(secs < 20)
  end)

  it("a rank that ends without joining a collective fails its peers at once", function()
    local out, rc = run("-n 2 -e " .. sh_quote("if dt.rank() == 1 then dt.barrier() end"))
    assert.are_not.equal(0, rc)
    assert.matches("rank(s) {0} finished their program without joining it", out, 1, true)
  end)

  it("async collectives never waited end the program with an error on every rank that issued them", function()
    local out, rc = run("-n 2 -e " .. sh_quote("local w = dt.distributed.all_reduce(dt.ones(3), 'sum', {async_op = true})"))
    assert.are_not.equal(0, rc)
    for r = 0, 1 do
      assert.matches("rank " .. r .. ": the program ended with 1 async collective(s) never waited (all_reduce x1)", out,
                     1, true)
    end
    -- the peer that never issued it: the issuing rank's work fails instead of hanging
    out, rc = run("-n 2 -e " .. sh_quote("if dt.rank() == 0 then dt.distributed.all_gather(dt.ones(3), " ..
                                         "{async_op = true}) end"))
    assert.are_not.equal(0, rc)
    assert.matches("never waited (all_gather x1): call work:wait() on every work an async_op=true call returns; " ..
                   "failed: all_gather: in group {0,1}, rank(s) {1} finished their program without joining it", out, 1,
                   true)
  end)

  it("os.exit on one rank ends that rank; a failing code is the run's exit status", function()
    local out, rc = run("-n 2 -e " .. sh_quote("os.exit(dt.rank() == 1 and 3 or 0)"))
    assert.are.equal(3, rc, out)
    assert.matches("dtlua: rank 1: os.exit(3): the run's exit status", out, 1, true)
    _, rc = run("-n 2 -e " .. sh_quote("os.exit(0)"))
    assert.are.equal(0, rc)
    _, rc = run("-n 3 -e " .. sh_quote("os.exit(dt.rank() ~= 2)"))
    assert.are.equal(1, rc)
    -- a code that is 0 modulo 256 still fails the run
    _, rc = run("-n 2 -e " .. sh_quote("if dt.rank() == 1 then os.exit(256) end"))
    assert.are.equal(1, rc)
  end)

  it("os.exit with different codes on several ranks: the first failing rank's code, as mpirun", function()
    local out, rc = run("-n 3 -e " .. sh_quote(two_exit_codes))
    assert.are.equal(5, rc, out)
    assert.matches("dtlua: rank 1: os.exit(5)", out, 1, true)
    assert.not_matches("os.exit(6)", out, 1, true)
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

  -- mrun with `say(...)` in prog: it writes its arguments, tab-joined, as a line to a file of
  -- the rank's own, since mpirun forwards the ranks' output in pieces that interleave mid-line
  -- when ranks write at the same moment.  Returns the ranks' lines (in rank order), the exit
  -- status and mpirun's output.
  local function mrun_said(n, prog, env)
    local base = os.tmpname()
    local say = "local say_f = assert(io.open(" .. string.format("%q", base) .. " .. '.' .. dt.rank(), 'w')) " ..
                "local function say(...) say_f:write(table.concat({...}, '\\t'), '\\n') say_f:flush() end "
    local log, rc = mrun(n, "-e " .. sh_quote(say .. prog), env)
    local parts = {}
    for r = 0, n - 1 do
      local f = io.open(base .. "." .. r)
      if f then parts[#parts + 1] = f:read("a") f:close() end
      os.remove(base .. "." .. r)
    end
    os.remove(base)
    return table.concat(parts), rc, log
  end

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

  it("by default (no DTLUA_DEBUG) ranks calling different reduce ops fail on every rank, naming both calls",
    function()
      if not mpirun_prefix() then return end
      local prog = "local t = dt.ones(4) dt.distributed.all_reduce(t, dt.rank() == 0 and 'sum' or 'max') print(t)"
      local out, rc = mrun(2, "-e " .. sh_quote(prog))
      assert.are_not.equal(0, rc)
      assert.matches("collective mismatch in group {0,1}: rank 0 called all_reduce(sum, float32, 4 elements), " ..
                     "rank 1 called all_reduce(max, float32, 4 elements)", out, 1, true)
      assert.is_nil(out:find("tensor(", 1, true)) -- no rank went on with a wrong result
    end)

  it("a mismatch in a large collective fails every rank and leaves the group usable", function()
    if not mpirun_prefix() then return end
    -- 64 Ki floats, as small ones: the fingerprint is agreed before the data call, so no data
    -- call went out, and the same group goes on with the next collective
    local prog = "local D = dt.distributed local t = dt.ones(1 << 16) " ..
                 "local ok, e = pcall(D.all_reduce, t, dt.rank() == 0 and 'sum' or 'max') say('R' .. dt.rank(), e) " ..
                 "say('B' .. dt.rank(), D.all_reduce(dt.ones(2)):totable()[2], t:sum():item())"
    local out, rc, log = mrun_said(2, prog, "DTLUA_TIMEOUT=20")
    assert.are.equal(0, rc, log)
    for r = 0, 1 do
      assert.matches("R" .. r .. "\tcollective mismatch in group {0,1}: rank 0 called all_reduce(sum, float32, 65536 " ..
                     "elements), rank 1 called all_reduce(max, float32, 65536 elements)", out, 1, true)
      assert.matches("B" .. r .. "\t2.0\t65536.0", out, 1, true) -- the data untouched, the group usable
    end
  end)

  it("all_gather / all_to_all with different sizes on different ranks fail on every rank (fingerprint)", function()
    if not mpirun_prefix() then return end
    local prog = "local D = dt.distributed local n = dt.rank() + 2 " ..
                 "say('G' .. dt.rank(), select(2, pcall(D.all_gather, dt.ones(n)))) " ..
                 "say('A' .. dt.rank(), select(2, pcall(D.all_to_all, dt.ones(2 * n)))) " ..
                 "say('B' .. dt.rank(), D.all_reduce(dt.ones(1)):item())"
    local out, rc, log = mrun_said(2, prog, "DTLUA_TIMEOUT=20")
    assert.are.equal(0, rc, log)
    for r = 0, 1 do
      assert.matches("G" .. r .. "\tcollective mismatch in group {0,1}: rank 0 called all_gather(float32, 2 elements), " ..
                     "rank 1 called all_gather(float32, 3 elements) (different size tables)", out, 1, true)
      assert.matches("A" .. r .. "\tcollective mismatch in group {0,1}: rank 0 called all_to_all(float32, 4 elements), " ..
                     "rank 1 called all_to_all(float32, 6 elements) (different split sizes)", out, 1, true)
      assert.matches("B" .. r .. "\t2.0", out, 1, true)
    end
  end)

  it("on 4 ranks (the shared-memory agreement, world and sub-group) one rank's different or missing call fails " ..
     "every rank of the group, which stays usable", function()
    if not mpirun_prefix() then return end
    -- (ranks 1 and 2 time out at the same moment: mrun_said keeps their lines whole)
    local prog = "local D = dt.distributed local r = dt.rank() " ..
      "say('W' .. r, select(2, pcall(D.all_reduce, dt.ones(4), r == 2 and 'max' or 'sum'))) " ..
      "say('G' .. r, select(2, pcall(D.all_gather, dt.ones(r == 3 and 3 or 2)))) " ..
      "local g = D.new_group({1, 2, 3}) " ..
      "if r > 0 then say('S' .. r, select(2, pcall(D.all_to_all, dt.ones(r == 1 and 6 or 3), g))) " ..
      "  say('U' .. r, D.all_reduce(dt.ones(1), 'sum', g):item()) end " ..
      -- rank 3 skips the group's next call: ranks 1 and 2 time out naming it, the world goes on
      "if r == 1 or r == 2 then say('T' .. r, select(2, pcall(D.all_reduce, dt.ones(1), 'sum', g))) " ..
      "else os.execute('sleep 4') end " ..
      "say('B' .. r, D.all_reduce(dt.ones(1)):item())"
    local out, rc, log = mrun_said(4, prog, "DTLUA_TIMEOUT=2")
    assert.are.equal(0, rc, log .. out)
    for r = 0, 3 do
      assert.matches("W" .. r .. "\tcollective mismatch in group {0,1,2,3}: rank 0 called all_reduce(sum, float32, 4 " ..
                     "elements), rank 2 called all_reduce(max, float32, 4 elements)", out, 1, true)
      assert.matches("G" .. r .. "\tcollective mismatch in group {0,1,2,3}: rank 0 called all_gather(float32, 2 " ..
                     "elements), rank 3 called all_gather(float32, 3 elements) (different size tables)", out, 1, true)
      assert.matches("B" .. r .. "\t4.0", out, 1, true)
    end
    for r = 1, 3 do
      assert.matches("S" .. r .. "\tcollective mismatch in group {1,2,3}: rank 1 called all_to_all(float32, 6 " ..
                     "elements), rank 2 called all_to_all(float32, 3 elements) (different split sizes)", out, 1, true)
      assert.matches("U" .. r .. "\t3.0", out, 1, true)
    end
    for r = 1, 2 do
      assert.matches("T" .. r .. "\tall_reduce: timed out after 2 s in group {1,2,3} (DTLUA_TIMEOUT); what each rank " ..
                     "waits in: rank 0 ", out, 1, true)
      -- rank 3 is asleep ("did not answer") or, on a slow machine, already in the world's call
      local rank3 = out:match("T" .. r .. "\t[^\n]*; rank 1 all_reduce%(sum, float32, 1 elements%) in group {1,2,3}; " ..
                              "rank 2 all_reduce%(sum, float32, 1 elements%) in group {1,2,3}; rank 3 ([^\n]*)")
      assert.is_truthy(rank3, out)
      assert.is_falsy(rank3:find("group {1,2,3}", 1, true), rank3)
    end
  end)

  -- 256 KiB calls: over the shared-memory data path's thresholds, so under mpirun on one host
  -- that path runs them (its buffers published with the fingerprint); and the same with it off
  for _, shm in ipairs({"", "DTLUA_MPI_SHM=0 "}) do
    it("a different reduce op, count, dtype or kind, or a skipped call, in 256 KiB collectives fails every rank " ..
       "and leaves the data untouched and the group usable" .. (shm ~= "" and " (" .. shm .. ")" or ""), function()
      if not mpirun_prefix() then return end
      local prog = "local D = dt.distributed local r = dt.rank() local N = 1 << 16 local t = dt.ones({N}) " ..
        "local g = D.new_group({0, 1}) " .. -- (3 ranks: a group of 2 is not the world)
        "say('O' .. r, select(2, pcall(D.all_reduce, t, r == 0 and 'sum' or 'max'))) " ..
        "say('C' .. r, select(2, pcall(D.all_gather, dt.ones({r == 0 and N or N + 4})))) " ..
        "say('D' .. r, select(2, pcall(D.all_reduce, dt.ones({N}, {dtype = r == 0 and 'float32' or 'float64'})))) " ..
        "say('K' .. r, select(2, pcall(r == 0 and D.all_reduce or D.broadcast, t, r == 0 and 'sum' or 0))) " ..
        -- a small call against a large one: one rank on the shared-memory path, the other not
        "say('M' .. r, select(2, pcall(D.all_reduce, dt.ones({r == 0 and N or 4})))) " ..
        "say('X' .. r, t:sum():item()) " ..
        "if r < 2 then say('U' .. r, D.all_reduce(dt.ones({N}), 'sum', g):sum():item()) end " ..
        -- rank 1 skips the group's next call: rank 0 times out naming it, the world goes on
        "if r == 0 then say('T0', select(2, pcall(D.all_to_all, dt.ones({N}), g))) else os.execute('sleep 3') end " ..
        "say('B' .. r, D.all_reduce(dt.ones({N})):sum():item())"
      local out, rc, log = mrun_said(3, prog, shm .. "DTLUA_TIMEOUT=2")
      assert.are.equal(0, rc, log .. out)
      local calls = {
        O = "rank 0 called all_reduce(sum, float32, 65536 elements), rank 1 called all_reduce(max, float32, 65536 elements)",
        C = "rank 0 called all_gather(float32, 65536 elements), rank 1 called all_gather(float32, 65540 elements) " ..
            "(different size tables)",
        D = "rank 0 called all_reduce(sum, float32, 65536 elements), rank 1 called all_reduce(sum, float64, 65536 elements)",
        K = "rank 0 called all_reduce(sum, float32, 65536 elements), rank 1 called broadcast(float32, 65536 elements, src 0)",
        M = "rank 0 called all_reduce(sum, float32, 65536 elements), rank 1 called all_reduce(sum, float32, 4 elements)",
      }
      for r = 0, 2 do
        for k, call in pairs(calls) do
          assert.matches(k .. r .. "\tcollective mismatch in group {0,1,2}: " .. call, out, 1, true)
        end
        assert.matches("X" .. r .. "\t65536.0", out, 1, true) -- the data untouched
        assert.matches("B" .. r .. "\t196608.0", out, 1, true) -- the world usable
      end
      for r = 0, 1 do assert.matches("U" .. r .. "\t131072.0", out, 1, true) end
      assert.matches("T0\tall_to_all: timed out after 2 s in group {0,1} (DTLUA_TIMEOUT); what each rank waits in: " ..
                     "rank 0 all_to_all(float32, 65536 elements) in group {0,1}; rank 1 ", out, 1, true)
    end)
  end

  it("a stuck collective times out naming what every rank waits in (a rank in Lua code does not answer)", function()
    if not mpirun_prefix() then return end
    local prog = "local D = dt.distributed local g = D.new_group({0, 1}) local t = dt.ones(4) " ..
                 "if dt.rank() == 0 then D.all_reduce(t) elseif dt.rank() == 1 then D.all_reduce(t, 'sum', g) " ..
                 "else local c = os.clock() while os.clock() - c < 20 do end end"
    local out, rc = mrun(3, "-e " .. sh_quote(prog), "DTLUA_TIMEOUT=1")
    assert.are_not.equal(0, rc)
    assert.matches("timed out after 1 s in group", out, 1, true)
    assert.matches("rank 0 all_reduce(sum, float32, 4 elements) in group {0,1,2}", out, 1, true)
    assert.matches("rank 1 all_reduce(sum, float32, 4 elements) in group {0,1}", out, 1, true)
    assert.matches("rank 2 did not answer", out, 1, true)
  end)

  it("an async collective that one rank never issued fails the issuing rank instead of hanging", function()
    if not mpirun_prefix() then return end
    local prog = "if dt.rank() == 0 then local w = dt.distributed.all_reduce(dt.ones(2), 'sum', {async_op = true}) " ..
                 "print(pcall(w.wait, w)) end"
    local out, rc = mrun(2, "-e " .. sh_quote(prog), "DTLUA_TIMEOUT=20")
    assert.are_not.equal(0, rc)
    assert.matches("the program ended while other ranks of group {0,1} wait in a collective", out, 1, true)
  end)

  it("os.exit(0) on one rank while the others wait ends the world with a message", function()
    if not mpirun_prefix() then return end
    local out, rc = mrun(2, "-e " .. sh_quote("if dt.rank() == 1 then os.exit(0) end dt.barrier()"))
    assert.are_not.equal(0, rc)
    assert.matches("barrier: in group {0,1}, rank(s) {1} finished their program without joining it", out, 1, true)
  end)

  it("a bad argument on one rank raises the same error on every rank, naming the rank and the value", function()
    if not mpirun_prefix() then return end
    local prog = "local ok, e = pcall(dt.distributed.all_reduce, dt.ones(2), dt.rank() == 1 and 'bogus' or 'sum') " ..
                 "print('R' .. dt.rank(), e) dt.barrier()"
    local out, rc = mrun(2, "-e " .. sh_quote(prog))
    assert.are.equal(0, rc)
    for r = 0, 1 do
      assert.matches("R" .. r .. "\tall_reduce: unknown reduce op 'bogus' (expected sum, avg, max, min or product) " ..
                     "(rank 1's argument; every rank of group {0,1} raises this)", out, 1, true)
    end
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

-- Launching ranks (threads and MPI, forced backends), sub-groups under MPI, output options,
-- the REPL on a mesh, exit status and failure handling, each under dtlua -n N and mpirun.
do
  local H = require("tests.spec.support.launch_helpers")
  local sh_quote, run = H.sh_quote, H.run
  local srcdir = os.getenv("srcdir") or "."

  local function script(text)
    local path = os.tmpname()
    local f = assert(io.open(path, "w"))
    f:write(text)
    f:close()
    return path
  end

  local function lines_matching(out, pat)
    local t = {}
    for l in out:gmatch("[^\n]+") do if l:match(pat) then t[#t + 1] = l end end
    table.sort(t)
    return t
  end

  local function count(s, needle)
    local n, i = 0, 1
    while true do
      local a, b = s:find(needle, i, true)
      if not a then return n end
      n, i = n + 1, b + 1
    end
  end

  -- mpirun with the CI settings, or nil where there is none (or no MPI backend)
  local mpirun = H.mpirun_prefix()
  local mrun = H.mrun

  local RANKS_PROG = "print(string.format('rank %d of %d local %d backend %s', dt.rank(), dt.world_size(), " ..
                     "dt.local_rank(), dt.backend())) dt.barrier()\n"

  -- runs RANKS_PROG as a script file with launch(path) and checks 4 ranks of the backend
  local function four_ranks(launch, backend)
    local path = script(RANKS_PROG)
    local out, rc = launch(path)
    os.remove(path)
    assert.are.equal(0, rc, out)
    local want = {}
    for r = 0, 3 do want[r + 1] = string.format("rank %d of 4 local %d backend %s", r, r, backend) end
    assert.are.same(want, lines_matching(out, "^rank"))
  end

  describe("running ranks: dtlua -n N, mpirun -np N, --backend and DTLUA_BACKEND", function()
    it("`dtlua -n 4 script.lua` runs 4 ranks inside one process (threads backend)", function()
      four_ranks(function(path) return run("-n 4 " .. path) end, "threads")
    end)

    it("`mpirun -np 4 dtlua script.lua` runs 4 processes over MPI, detected without options", function()
      if not mpirun then return end
      four_ranks(function(path) return mrun(4, path) end, "mpi")
    end)

    it("local_rank comes from MPI itself, not from one launcher's variables (MPICH, srun)", function()
      if not mpirun then return end
      -- each process starts without Open MPI's local-rank variable, as under another launcher
      local path = script(RANKS_PROG)
      local cmd = string.format("%s -np 4 sh -c %s", mpirun,
        sh_quote("unset OMPI_COMM_WORLD_LOCAL_RANK MPI_LOCALRANKID SLURM_LOCALID PMI_LOCAL_RANK; exec " ..
                 H.DTLUA .. " " .. path))
      local out, rc = H.capture(cmd)
      os.remove(path)
      assert.are.equal(0, rc, out)
      local want = {}
      for r = 0, 3 do want[r + 1] = string.format("rank %d of 4 local %d backend mpi", r, r) end
      assert.are.same(want, lines_matching(out, "^rank"))
    end)

    it("under MPI every rank takes rank 0's DTLUA_DEBUG, DTLUA_TIMEOUT and DTLUA_LOG (mpirun forwards a host's own)",
      function()
        if not mpirun then return end
        local prog = sh_quote("print(string.format('rank %d timeout %s debug %s', dt.rank(), " ..
                              "tostring(os.getenv('DTLUA_TIMEOUT')), tostring(os.getenv('DTLUA_DEBUG'))))")
        -- two programs (MPMD): rank 1 starts with other settings than rank 0
        local cmd = string.format("%s -np 1 env DTLUA_TIMEOUT=7 %s -e %s : -np 1 env DTLUA_DEBUG=collectives %s -e %s",
          mpirun, DTLUA, prog, DTLUA, prog)
        local out, rc = H.capture(cmd)
        assert.are.equal(0, rc, out)
        assert.are.same({"rank 0 timeout 7 debug nil", "rank 1 timeout 7 debug nil"}, lines_matching(out, "^rank"))
      end)

    it("`--backend threads|mpi` and `DTLUA_BACKEND` force one", function()
      local prog = sh_quote("print(dt.backend(), dt.world_size())")
      local out, rc = run("--backend threads -n 2 -e " .. prog)
      assert.are.equal(0, rc, out)
      assert.are.same({"threads\t2", "threads\t2"}, lines_matching(out, "^threads"))
      out, rc = run("-n 2 -e " .. prog, "DTLUA_BACKEND=threads")
      assert.are.equal(0, rc, out)
      out, rc = run("--backend carrier-pigeon -e " .. prog)
      assert.are_not.equal(0, rc)
      assert.matches("unknown backend 'carrier-pigeon' (expected threads or mpi)", out, 1, true)
      out, rc = run("-e " .. prog, "DTLUA_BACKEND=bogus")
      assert.are_not.equal(0, rc)
      assert.matches("unknown backend 'bogus'", out, 1, true)
      if not mpirun then return end
      out, rc = run("--backend mpi -e " .. prog) -- a singleton MPI world, no mpirun
      assert.are.equal(0, rc, out)
      assert.matches("mpi\t1", out, 1, true)
      out, rc = run("-e " .. prog, "DTLUA_BACKEND=mpi")
      assert.are.equal(0, rc, out)
      assert.matches("mpi\t1", out, 1, true)
      -- under mpirun, --backend threads makes every process a world of its own
      out, rc = mrun(2, "--backend threads -e " .. prog)
      assert.are.equal(0, rc, out)
      assert.are.same({"threads\t1", "threads\t1"}, lines_matching(out, "^threads"))
      out, rc = mrun(2, "-n 2 -e " .. prog)
      assert.are_not.equal(0, rc)
      assert.matches("-n is for the threads backend; under MPI start ranks with mpirun -np N", out, 1, true)
    end)
  end)

  describe("sub-groups under MPI map to communicators (MPI_Comm_split)", function()
    it("ranks passing different lists to new_group raise on every rank instead of mixing groups", function()
      if not mpirun then return end
      local prog = "print('r' .. dt.rank(), pcall(dt.distributed.new_group, dt.rank() == 0 and {0, 1} or {1, 2}))"
      local out, rc = mrun(3, "-e " .. sh_quote(prog))
      assert.are.equal(0, rc, out)
      for r = 0, 2 do
        assert.matches("r" .. r .. "\tfalse\tnew_group: rank 0 and rank 1 passed different rank lists", out)
      end
      local g = "local g = dt.distributed.new_group({2, 0}) print('r' .. dt.rank(), g:rank(), " ..
                "g:rank() >= 0 and dt.distributed.all_reduce(dt.ones(1), 'sum', g):item() or '-')"
      out, rc = mrun(3, "-e " .. sh_quote(g))
      assert.are.equal(0, rc, out)
      assert.are.same({"r0\t0\t2.0", "r1\t-1\t-", "r2\t1\t2.0"}, lines_matching(out, "^r%d"))
    end)
  end)

  describe("per-rank output: print, print0, --quiet-others, --tag-output", function()
    local prog = sh_quote("print('hello', dt.rank()) dt.print0('only once')")

    it("by default every rank's print goes to stdout; dt.print0 prints on rank 0 only", function()
      local out, rc = run("-n 4 -e " .. prog)
      assert.are.equal(0, rc)
      assert.are.same({"hello\t0", "hello\t1", "hello\t2", "hello\t3"}, lines_matching(out, "^hello"))
      assert.are.equal(1, count(out, "only once"))
    end)

    it("`dtlua -n 4 --quiet-others` keeps rank 0 only", function()
      local out, rc = run("-n 4 --quiet-others -e " .. prog)
      assert.are.equal(0, rc)
      assert.are.same("hello\t0\nonly once\n", out)
    end)

    it("`--tag-output` prefixes every line with its rank, as mpirun's option", function()
      local out, rc = run("-n 2 --tag-output -e " .. sh_quote("print('a\\nb', dt.rank())"))
      assert.are.equal(0, rc)
      assert.are.same({"[0] a", "[0] b\t0", "[1] a", "[1] b\t1"}, lines_matching(out, "."))
      out = run("-n 3 --quiet-others --tag-output -e " .. prog)
      assert.are.same("[0] hello\t0\n[0] only once\n", out)
    end)

    -- many prints of several long lines from every rank at once: each line arrives whole,
    -- with its own rank's tag (lines of 1000-3000 bytes, prints of up to 9 KB)
    local flood = sh_quote("local r = dt.rank() for i = 1, 150 do local t = {} " ..
                           "for k = 1, 3 do t[k] = 'r' .. r .. ' i' .. i .. ' k' .. k .. ' ' .. " ..
                           "string.rep(string.char(97 + r), 1000 * k) end print(table.concat(t, '\\n')) end")
    local function check_flood(out, nranks)
      local seen = {}
      for l in out:gmatch("[^\n]+") do
        if l:match("^%[") then
          local tag, r, i, k, body = l:match("^%[(%d+)%] r(%d+) i(%d+) k(%d+) (%l+)$")
          assert(tag, "a cut or mixed line: " .. l:sub(1, 80))
          assert.are.equal(tag, r)
          assert.are.equal(string.rep(string.char(97 + tonumber(r)), 1000 * tonumber(k)), body)
          seen[#seen + 1] = l
        end
      end
      assert.are.equal(nranks * 150 * 3, #seen)
    end

    it("`--tag-output` keeps every line whole when ranks print many long lines at once", function()
      local out, rc = run("-n 4 --tag-output -e " .. flood)
      assert.are.equal(0, rc)
      check_flood(out, 4)
      -- not under mpirun: Open MPI 4.1 forwards each rank's pty in pieces and cuts lines
      -- under load whatever the rank writes, its own --tag-output too (doc/status.md)
    end)

    it("the same options under mpirun", function()
      if not mpirun then return end
      local out, rc = mrun(2, "--tag-output -e " .. prog)
      assert.are.equal(0, rc)
      assert.are.same({"[0] hello\t0", "[0] only once", "[1] hello\t1"}, lines_matching(out, "^%["))
      out = mrun(2, "--quiet-others -e " .. prog)
      assert.are.same({"hello\t0"}, lines_matching(out, "^hello"))
    end)
  end)

  describe("the REPL on a mesh", function()
    local input = "x = dt.rank() + 1\nx * 10\n:ranks 0\nx\n:ranks all\n" ..
                  "dt.distributed.all_reduce(dt.tensor({x})):item()\n:ranks 7\nx\n"
    local want = {"[0] 10", "[1] 20", "[2] 30", "[3] 40", "[0] 1", "[0] 10", "[1] 10", "[2] 10", "[3] 10",
                  "[0] 1", "[1] 2", "[2] 3", "[3] 4"}

    local function ranked(out)
      local t = {}
      for l in out:gmatch("[^\n]+") do if l:match("^%[%d%]") then t[#t + 1] = l end end
      return t
    end

    it("`dtlua -n 4`: rank 0 reads each line, every rank runs it, results shown per rank; `:ranks 0` toggles", function()
      local out, rc = run("-n 4 -i", nil, input)
      assert.are.equal(0, rc, out)
      assert.are.same(want, ranked(out))
      assert.matches(":ranks takes 0 (rank 0's results only) or all (every rank's), got '7'", out, 1, true)
    end)

    it("a line that fails is shown with its rank and the REPL goes on", function()
      local out, rc = run("-n 2 -i", nil, "if dt.rank() == 1 then error('only one') end\n40 + 2\n")
      assert.are.equal(0, rc)
      assert.matches("[1] error: stdin:1: only one", out, 1, true)
      assert.matches("[0] 42\n[1] 42", out, 1, true)
    end)

    it("the same under mpirun", function()
      if not mpirun then return end
      local out, rc = mrun(4, "-i", nil, input)
      assert.are.equal(0, rc, out)
      assert.are.same(want, ranked(out))
    end)
  end)

  describe("exit status: 0 only when every rank finished without error", function()
    it("threads: an error or a failing os.exit on the last rank only makes the run fail", function()
      local _, rc = run("-n 4 -e " .. sh_quote("dt.barrier()"))
      assert.are.equal(0, rc)
      _, rc = run("-n 4 -e " .. sh_quote("if dt.rank() == 3 then error('late') end"))
      assert.are_not.equal(0, rc)
      _, rc = run("-n 4 -e " .. sh_quote("if dt.rank() == 3 then os.exit(2) end"))
      assert.are.equal(2, rc)
      _, rc = run("-n 4 -e " .. sh_quote("os.exit(true)"))
      assert.are.equal(0, rc)
    end)

    it("mpirun: the same", function()
      if not mpirun then return end
      local _, rc = mrun(2, "-e " .. sh_quote("dt.barrier()"))
      assert.are.equal(0, rc)
      _, rc = mrun(2, "-e " .. sh_quote("if dt.rank() == 1 then error('late') end"))
      assert.are_not.equal(0, rc)
      local out
      out, rc = mrun(2, "-e " .. sh_quote("if dt.rank() == 1 then os.exit(3) end"))
      assert.are.equal(3, rc, out)
      assert.matches("dtlua: rank 1: os.exit(3): the run's exit status", out, 1, true)
      -- the first failing rank's code (MPI_Abort's), as for any mpirun job
      out, rc = mrun(3, "-e " .. sh_quote(two_exit_codes))
      assert.are.equal(5, rc, out)
    end)
  end)

  describe("failure handling: nothing hangs, nothing is silent", function()
    -- a bad argument to a local op (a collective's is agreed: every rank raises it)
    local bad_arg = "if dt.rank() == 2 then dt.ones(2):sum(5) end dt.distributed.all_reduce(dt.ones(2))"

    it("threads: an error on one rank tears the world down; printed once with rank, message, traceback", function()
      local t0 = os.time()
      local out, rc = run("-n 4 -e " .. sh_quote(bad_arg))
      assert.are_not.equal(0, rc)
      assert.is_true(os.time() - t0 < 30)
      assert.are.equal(1, count(out, "dim 5 out of range"))
      assert.matches("rank 2: (command line):1: sum: dim 5 out of range for a 1-d tensor", out, 1, true)
      -- a Lua error while the others compute (not in a collective) is printed once too
      out, rc = run("-n 3 -e " .. sh_quote("if dt.rank() == 0 then error({code = 1}) end " ..
                                           "local t = os.clock() while os.clock() - t < 20 do end"))
      assert.are_not.equal(0, rc)
      assert.matches("rank 0: ", out, 1, true)
      assert.is_true(os.time() - t0 < 40)
    end)

    it("MPI: the rank prints the same and calls MPI_Abort; exit status non-zero", function()
      if not mpirun then return end
      local out, rc = mrun(4, "-e " .. sh_quote(bad_arg))
      assert.are_not.equal(0, rc)
      assert.are.equal(1, count(out, "dtlua: rank 2: (command line):1: sum: dim 5 out of range"))
      assert.matches("stack traceback:", out, 1, true)
      -- Open MPI prints its MPI_ABORT notice through its help system, which under load sometimes
      -- fails with "ORTE_ERROR_LOG: ... show_help.c" instead: both come from MPI_Abort
      assert(out:find("MPI_ABORT", 1, true) or out:find("show_help.c", 1, true), "MPI_Abort's notice: " .. out)
    end)

    local mismatch = "local D = dt.distributed if dt.rank() == 0 then D.all_reduce(dt.ones(4)) " ..
                     "else D.all_reduce(dt.ones(4, {dtype = 'float64'}), 'max') end"
    local mismatch_msg = "collective mismatch in group {0,1}: rank 0 called all_reduce(sum, float32, 4 elements), " ..
                         "rank 1 called all_reduce(max, float64, 4 elements)"

    it("collective mismatch detection is on by default under the threads backend", function()
      local out, rc = run("-n 2 -e " .. sh_quote(mismatch))
      assert.are_not.equal(0, rc)
      assert.matches(mismatch_msg, out, 1, true)
    end)

    it("collective mismatch detection under MPI with DTLUA_DEBUG=collectives (every rank raises)", function()
      if not mpirun then return end
      local prog = "local ok, e = pcall(function() " .. mismatch .. " end) print('r' .. dt.rank(), e)"
      local out, rc = mrun(2, "-e " .. sh_quote(prog), "DTLUA_DEBUG=collectives")
      assert.are.equal(0, rc, out)
      assert.matches("r0\t(command line):1: " .. mismatch_msg, out, 1, true)
      assert.matches("r1\t(command line):1: " .. mismatch_msg, out, 1, true)
    end)

    it("a rank that ends while others wait for it fails them (threads; MPI with DTLUA_DEBUG=collectives)", function()
      local prog = sh_quote("if dt.rank() >= 1 then dt.distributed.all_reduce(dt.ones(2)) end")
      -- only rank 0 ended; rank 1 or 2 may be late or fail out first, and is never named
      local msg = "all_reduce: in group {0,1,2}, rank(s) {0} finished their program without joining it"
      local out, rc = run("-n 3 -e " .. prog)
      assert.are_not.equal(0, rc)
      assert.matches(msg, out, 1, true)
      if not mpirun then return end
      out, rc = mrun(3, "-e " .. prog, "DTLUA_DEBUG=collectives")
      assert.are_not.equal(0, rc)
      assert.matches(msg, out, 1, true)
    end)

    local stuck = "if dt.rank() ~= 2 then dt.distributed.all_gather(dt.ones(4)) " ..
                  "else local t = os.clock() while os.clock() - t < 20 do end end"

    it("DTLUA_TIMEOUT turns a stuck collective into an error naming the collective and the missing ranks", function()
      local t0 = os.time()
      local out, rc = run("-n 4 -e " .. sh_quote(stuck), "DTLUA_TIMEOUT=0.5")
      assert.are_not.equal(0, rc)
      assert.matches("all_gather: timed out after 0.5 s in group {0,1,2,3}: rank(s) {2} did not arrive", out, 1, true)
      assert.is_true(os.time() - t0 < 15)
    end)

    it("DTLUA_TIMEOUT under MPI names the collective", function()
      if not mpirun then return end
      local out, rc = mrun(4, "-e " .. sh_quote(stuck), "DTLUA_TIMEOUT=0.5")
      assert.are_not.equal(0, rc)
      assert.matches("all_gather: timed out after 0.5 s", out, 1, true)
      -- also with the mismatch checks on (their own exchange is under the timeout too)
      out, rc = mrun(4, "-e " .. sh_quote(stuck), "DTLUA_TIMEOUT=0.5 DTLUA_DEBUG=collectives")
      assert.are_not.equal(0, rc)
      assert.matches("all_gather: timed out after 0.5 s", out, 1, true)
    end)

    it("a bad DTLUA_TIMEOUT is reported, not silently used", function()
      local out, rc = run("-n 2 -e " .. sh_quote("dt.barrier()"), "DTLUA_TIMEOUT=soon")
      assert.are.equal(0, rc)
      assert.matches("DTLUA_TIMEOUT must be a number of seconds, got 'soon' (using 600)", out, 1, true)
    end)
  end)
end
