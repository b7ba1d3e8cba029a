-- Failure cases across two "hosts" (network namespaces joined over TCP), run by
-- tests/multihost/run, which sets DTLUA_MULTIHOST_MPIRUN (mpirun with the hosts, the rsh
-- agent and the TCP transport; ranks 0-1 on the first host, 2-3 on the second).  The agent
-- starts the second host's ranks with a fresh environment, as ssh would: only mpirun's host
-- sees the variables set for mpirun.
local H = require("tests.spec.support.launch_helpers")
local sh_quote = H.sh_quote
local MPIRUN = os.getenv("DTLUA_MULTIHOST_MPIRUN")
local host_a, host_b = (os.getenv("DTLUA_MULTIHOST_HOSTS") or ""):match("(%S+) (%S+)")

-- mpirun -np 4 dtlua -e prog across the hosts, with env set for mpirun only (host a).
local function mrun(prog, env)
  return H.capture(string.format("%s %s -np 4 %s -e %s", env or "", MPIRUN, sh_quote(H.DTLUA), sh_quote(prog)))
end

local function lines_matching(out, pat)
  local l = {}
  for line in out:gmatch("[^\n]+") do if line:match(pat) then l[#l + 1] = line end end
  table.sort(l)
  return l
end

describe("mpirun across two hosts (network namespaces over TCP)", function()
  if not MPIRUN then
    it("runs only under tests/multihost/run", function() pending("DTLUA_MULTIHOST_MPIRUN is not set") end)
    return
  end

  it("places two ranks on each host, each with its local rank, and a collective spans them", function()
    local prog = "local h = io.popen('hostname'):read('l') local t = dt.full({2}, dt.rank() + 1) " ..
                 "dt.distributed.all_reduce(t) print(string.format('rank %d local %d on %s sum %g', " ..
                 "dt.rank(), dt.local_rank(), h, t:totable()[2]))"
    local out, rc = mrun(prog)
    assert.are.equal(0, rc, out)
    assert.are.same({"rank 0 local 0 on " .. host_a .. " sum 10", "rank 1 local 1 on " .. host_a .. " sum 10",
                     "rank 2 local 0 on " .. host_b .. " sum 10", "rank 3 local 1 on " .. host_b .. " sum 10"},
                    lines_matching(out, "^rank"))
  end)

  it("an error on a rank of the other host ends the job in a few seconds, naming the rank", function()
    local out, rc, secs = mrun("if dt.rank() == 3 then error('boom') end dt.barrier()")
    assert.are_not.equal(0, rc)
    assert.matches("rank 3: (command line):1: boom", out, 1, true)
    assert.is_true(secs <= 10, "took " .. secs .. " s")
  end)

  it("settings set for mpirun on one host only are rank 0's on every rank (the start-up agreement)", function()
    local prog = "print(string.format('rank %d timeout %s debug %s', dt.rank(), tostring(os.getenv('DTLUA_TIMEOUT')), " ..
                 "tostring(os.getenv('DTLUA_DEBUG'))))"
    local out, rc = mrun(prog, "DTLUA_TIMEOUT=7 DTLUA_DEBUG=collectives")
    assert.are.equal(0, rc, out)
    local want = {}
    for r = 0, 3 do want[#want + 1] = string.format("rank %d timeout 7 debug collectives", r) end
    assert.are.same(want, lines_matching(out, "^rank"))
  end)

  it("DTLUA_TIMEOUT on mpirun's host only: a stuck collective times out on both hosts instead of hanging", function()
    local prog = "if dt.rank() == 3 then local c = os.clock() while os.clock() - c < 30 do end end dt.barrier()"
    local out, rc, secs = mrun(prog, "DTLUA_TIMEOUT=1")
    assert.are_not.equal(0, rc)
    assert.matches("barrier: timed out after 1 s in group {0,1,2,3}", out, 1, true)
    assert.matches("rank 2 barrier() in group {0,1,2,3}", out, 1, true) -- the other host's waiting rank answered
    assert.matches("rank 3 did not answer", out, 1, true)
    assert.is_true(secs <= 15, "took " .. secs .. " s")
  end)

  it("by default, ranks on different hosts calling different reduce ops fail on every rank, naming both calls",
    function()
      local prog = "local t = dt.ones(4) dt.distributed.all_reduce(t, dt.rank() < 2 and 'sum' or 'max') print(t)"
      local out, rc = mrun(prog)
      assert.are_not.equal(0, rc)
      assert.matches("collective mismatch in group {0,1,2,3}: rank 0 called all_reduce(sum, float32, 4 elements), " ..
                     "rank 2 called all_reduce(max, float32, 4 elements)", out, 1, true)
      assert.is_nil(out:find("tensor(", 1, true)) -- no rank went on with a wrong result
    end)

  it("the same for a large all_reduce (64 Ki elements: the fingerprint before the blocking data call)", function()
    local prog = "local t = dt.ones(1 << 16) dt.distributed.all_reduce(t, dt.rank() < 2 and 'sum' or 'max') print(t)"
    local out, rc = mrun(prog)
    assert.are_not.equal(0, rc)
    assert.matches("collective mismatch in group {0,1,2,3}: rank 0 called all_reduce(sum, float32, 65536 elements), " ..
                   "rank 2 called all_reduce(max, float32, 65536 elements)", out, 1, true)
    assert.is_nil(out:find("tensor(", 1, true))
  end)

  it("os.exit(0) on a rank of the other host while the others wait ends the world with a message", function()
    local out, rc, secs = mrun("if dt.rank() == 2 then os.exit(0) end dt.barrier()")
    assert.are_not.equal(0, rc)
    assert.matches("barrier: in group {0,1,2,3}, rank(s) {2} finished their program without joining it", out, 1, true)
    assert.is_true(secs <= 10, "took " .. secs .. " s")
  end)
end)
