-- DTLUA_LOG=dispatch (doc/dispatch.md "Logging"): a dtlua -n 2 subprocess (under timeout)
-- runs a few ops on DTensors; every rank logs one line per decision naming the op, the input
-- specs, the chosen strategy, the cache hit/miss and the redistributions.
local H = require("tests.spec.support.launch_helpers")

local function lines_of(out, rank)
  local list = {}
  for l in out:gmatch("[^\n]+") do
    if l:find("[dispatch rank " .. rank .. "]", 1, true) == 1 then list[#list + 1] = l end
  end
  return list
end

describe("DTLUA_LOG=dispatch", function()
  local prog = [[
    local mesh = dt.init_device_mesh("cpu", {2})
    local x = dt.distribute_tensor(dt.ones(4, 6), mesh, {dt.Shard(2)})
    local w = dt.distribute_tensor(dt.ones(6, 3), mesh, {dt.Replicate()})
    local y = x:matmul(w)          -- S(k) x R: w moves to S(1), the output is Partial(sum)
    y = x:matmul(w)                -- the same call: a hit
    local c = dt.cat({x, x}, 2)    -- the joined (sharded) dim is replicated first
    c = dt.cat({x, x}, 2)
    local z = x + 1                -- follows x, nothing moves
  ]]
  local out, rc = H.run("-n 2 -e " .. H.sh_quote(prog), "DTLUA_LOG=dispatch")

  it("runs", function()
    assert.are.equal(0, rc, out)
  end)

  for rank = 0, 1 do
    it("logs every decision of rank " .. rank .. " with op, input specs, strategy, hit/miss, redistributions", function()
      local l = lines_of(out, rank)
      assert.are.equal(5, #l, out)
      local p = "[dispatch rank " .. rank .. "] "
      assert.are.equal(p .. "matmul(float32{4,6} (Shard(2)), float32{6,3} (Replicate())): chose (Shard(2)), (Shard(1)) " ..
                       "-> (Partial(sum)) | cache miss | redistribute input 2 (Replicate()) -> (Shard(1)) | cost 0 s", l[1])
      assert.are.equal(p .. "matmul(float32{4,6} (Shard(2)), float32{6,3} (Replicate())): chose (Shard(2)), (Shard(1)) " ..
                       "-> (Partial(sum)) | cache hit | redistribute input 2 (Replicate()) -> (Shard(1)) | cost 0 s", l[2])
      local cat = p .. "cat(float32{4,6} (Shard(2)), float32{4,6} (Shard(2))): chose (Replicate()), (Replicate()) -> " ..
                  "(Replicate()) | cache %s | redistribute input 1 (Shard(2)) -> (Replicate()), input 2 (Shard(2)) -> (Replicate()) " ..
                  "| cost 2e-05 s"
      assert.are.equal(cat:format("miss"), l[3])
      assert.are.equal(cat:format("hit"), l[4])
      assert.are.equal(p .. "add(float32{4,6} (Shard(2))): chose (Shard(2)) -> (Shard(2)) | cache miss | no redistribution | cost 0 s", l[5])
    end)
  end

  it("is silent without DTLUA_LOG", function()
    local quiet = H.run("-n 2 -e " .. H.sh_quote(prog))
    assert.is_nil(quiet:find("[dispatch rank", 1, true))
  end)
end)

-- The warning for a 1-element 1-d plain tensor mixed with DTensors: once per rank, none for 0-d.
do
  local H = require("tests.spec.support.launch_helpers")
  local count = H.count

  describe("a 1-element plain tensor mixed with DTensors", function()
    it("is taken as replicated, with a warning once per rank when it is 1-d (none when 0-d)", function()
      local p = [[
        local mesh = dt.init_device_mesh("cpu", {2})
        local X = dt.arange(4):to("float32")
        local x = dt.distribute_tensor(X, mesh, {"S1"})
        assert(dt.equal((x + dt.tensor(1.0)):full_tensor(), X + 1))
        io.stderr:write("after 0-d\n")
        assert(dt.equal((x + dt.tensor({1.0})):full_tensor(), X + 1))
        assert(dt.equal((x * dt.tensor({2.0})):full_tensor(), X * 2))
        assert(dt.equal((x - dt.tensor({3.0})):full_tensor(), X - 3))
      ]]
      local out, rc = H.run("-n 2 -e " .. H.sh_quote(p))
      assert.are.equal(0, rc, out)
      local warning = "a 1%-element 1%-d plain tensor mixed with DTensors is taken as replicated"
      assert.are.equal(2, count(out, warning), out)
      assert(out:find("after 0-d", 1, true) < out:find("1-element 1-d", 1, true), out)
    end)
  end)
end
