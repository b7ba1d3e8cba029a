-- A smoke run of the dtlua side of the differential run against PyTorch DTensor
-- (tests/differential, doc/differential.md): a few generated cases of every op family on 1-d
-- meshes of 2 and 4 ranks and a 2x2 mesh, through the same runner, each value equal to one
-- device.  The generator is Python (the PyTorch side needs it anyway): skipped without python3.
local H = require("tests.spec.support.launch_helpers")
local jsonl = require "dtensor.utils.jsonl"

local dir = "tests/differential/"
local have_python = os.execute("python3 -c 'import json' >/dev/null 2>&1")

describe("differential run, dtlua side", function()
  if not have_python then
    pending("python3 is not installed: the case generator cannot run")
    return
  end
  it("every generated case runs and equals one device, with the collectives recorded", function()
    local cases, out = os.tmpname(), os.tmpname()
    -- 44 ops x 3 meshes: each op once on each mesh
    assert(os.execute("python3 " .. dir .. "gen_cases.py --seed 7 --count 132 > " .. cases))
    local seen, ops = 0, {}
    for _, n in ipairs({2, 4}) do
      local log, rc = H.run(string.format("-n %d %srun_dtlua.lua %s %s", n, dir, cases, out),
                            "DTLUA_TIMEOUT=60")
      assert(rc == 0, log)
      for _, r in ipairs(jsonl.read(out)) do
        assert.are.equal("ok", r.status, r.op .. ": " .. tostring(r.error))
        assert(r.single == "bitwise" or r.single == "close",
               string.format("case %d %s on mesh %d ranks: %s vs one device", r.id, r.op, n, r.single))
        assert(r.comm and r.comm.n >= 0 and r.comm.bytes >= 0, "comm recorded")
        ops[r.op] = true
        seen = seen + 1
      end
    end
    os.remove(cases)
    os.remove(out)
    assert.are.equal(132, seen)
    local count = 0
    for _ in pairs(ops) do count = count + 1 end
    assert.are.equal(44, count)
  end)
end)
