-- The REPL on a threads mesh survives a line that only some ranks run: the ranks that wait
-- in a collective for the others fail at once with a message naming them, and every rank's
-- state is intact for the next line.  dtlua runs as a subprocess with piped stdin and -i.
local S = require("tests.spec.support.spec_helpers")
local run = S.run

local function ranked(out)
  local t = {}
  for l in out:gmatch("[^\n]+") do
    if l:match("^%[%d%] ") and not l:match("^%[%d%] %s") and not l:match("stack traceback") then t[#t + 1] = l end
  end
  return t
end

describe("the REPL on a mesh: lines that only some ranks run", function()
  it("a collective that rank 2 skips fails on the others, and the next line sees every rank's state", function()
    local out, rc = run("-n 4 -i", "x = 5\nif dt.rank() ~= 2 then dt.barrier() end\n=x + dt.rank()\n" ..
                        "=dt.distributed.all_reduce(dt.tensor({dt.rank()})):item()\n")
    assert.are.equal(0, rc, out)
    assert.matches("rank(s) {2} finished the line without joining it", out, 1, true)
    for _, r in ipairs({0, 1, 3}) do assert.matches("[" .. r .. "] error: stdin:1: barrier: ", out, 1, true) end
    assert.not_matches("[2] error", out, 1, true)
    local t = ranked(out)
    assert.are.same({"[0] 5", "[1] 6", "[2] 7", "[3] 8", "[0] 6", "[1] 6", "[2] 6", "[3] 6"},
                    {table.unpack(t, #t - 7)})
  end)

  it("an error on one rank only: the others' collective fails, the session goes on", function()
    local out, rc = run("-n 4 -i", "y = dt.rank()\nif dt.rank() == 1 then error('only one') end; dt.barrier()\n" ..
                        "=y * 10\n")
    assert.are.equal(0, rc, out)
    assert.matches("[1] error: stdin:1: only one", out, 1, true)
    assert.matches("rank(s) {1} finished the line without joining it", out, 1, true)
    local t = ranked(out)
    assert.are.same({"[0] 0", "[1] 10", "[2] 20", "[3] 30"}, {table.unpack(t, #t - 3)})
  end)

  it("send and recv, and a mesh's groups, work again after a line that broke them", function()
    local out, rc = run("-n 4 -i", "m = dt.init_device_mesh('cpu', {2, 2})\n" ..
                        "d = dt.distribute_tensor(dt.ones(4, 4), m, {dt.Shard(1), dt.Shard(2)})\n" ..
                        "if dt.rank() < 2 then s = d:full_tensor() end\n" ..
                        "if dt.rank() == 0 then dt.distributed.send(dt.tensor({1.5}), 1) end\n" ..
                        "if dt.rank() == 0 then dt.distributed.send(dt.tensor({7.5}), 1) " ..
                        "elseif dt.rank() == 1 then t = dt.zeros(1); dt.distributed.recv(t, 0) end\n" ..
                        "=t and t:item()\n=d:full_tensor():sum():item()\n")
    assert.are.equal(0, rc, out)
    assert.matches("rank(s) {2,3} finished the line without joining it", out, 1, true)
    assert.matches("[0] error: stdin:1: send: in group {0,1,2,3}, rank(s) {1} finished the line", out, 1, true)
    local t = ranked(out)
    assert.are.same({"[0] nil", "[1] 7.5", "[2] nil", "[3] nil", "[0] 16.0", "[1] 16.0", "[2] 16.0", "[3] 16.0"},
                    {table.unpack(t, #t - 7)})
  end)
end)
