-- The examples the README points at run and reach their own checks.
local launch = dofile("tests/spec/support/launch_helpers.lua")

describe("examples", function()
  it("tensors.lua runs and ends with the documented broadcast error", function()
    local out, rc = launch.run("examples/tensors.lua")
    assert.are.equal(0, rc, out)
    assert.matches("a:matmul(a:t()) =", out, 1, true)
    assert.matches("add: shapes {2,3} and {4} cannot broadcast", out, 1, true)
  end)

  for _, n in ipairs {1, 3, 4} do
    it("tensor_parallel_mlp.lua matches one device on " .. n .. " ranks with one all_reduce", function()
      local out, rc = launch.run("-n " .. n .. " examples/tensor_parallel_mlp.lua")
      assert.are.equal(0, rc, out)
      assert.matches("matches the single-device result:\ttrue", out, 1, true)
      assert.matches("collectives: all_reduce=" .. (n > 1 and 1 or 0) .. " all_gather=0", out, 1, true)
    end)
  end

  for _, n in ipairs {1, 3, 4} do
    it("sharded_random.lua matches one device bit for bit on " .. n .. " ranks", function()
      local out, rc = launch.run("-n " .. n .. " examples/sharded_random.lua")
      assert.are.equal(0, rc, out)
      local checks = 0
      for line in out:gmatch("[^\n]+") do
        if line:match(":\t[a-z]+$") then
          assert.matches(":\ttrue$", line)
          checks = checks + 1
        end
      end
      assert.are.equal(6, checks, out)
      assert.matches("generator state after the draws:\t7\t120", out, 1, true)
    end)
  end
end)
