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
