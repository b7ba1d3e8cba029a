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

-- examples/train_gpt.lua: the training demo
describe("train_gpt.lua", function()
  local SMALL = "--steps 20 --dtype float64 --layers 2 --width 32 --heads 4 --digits 4 --batch 8 --print-losses"

  local losses_of = launch.losses

  local function saved(path)
    local t = dt.load(path)
    os.remove(path)
    return t
  end

  it("--fsdp on 2x1, 4x1 and 2x2 (with tp) gives one rank's losses and parameters; each rank keeps ~1/N of the bytes",
    function()
      local function bytes_of(out)
        local b = {}
        for r, v in out:gmatch("rank (%d+): parameters %+ optimizer state: (%d+) bytes") do b[tonumber(r)] = tonumber(v) end
        return b
      end
      local ref_path = os.tmpname()
      local out, rc = launch.run("examples/train_gpt.lua --fsdp " .. SMALL .. " --save " .. ref_path)
      assert.are.equal(0, rc, out)
      local want, want_params, full = losses_of(out), saved(ref_path), bytes_of(out)[0]
      assert.is_true(full > 0, out)
      for _, r in ipairs {{2, "2x1"}, {4, "4x1"}, {4, "2x2"}} do
        local path = os.tmpname()
        local o, c = launch.run("-n " .. r[1] .. " examples/train_gpt.lua --fsdp --mesh " .. r[2] .. " " .. SMALL ..
                                " --save " .. path)
        assert.are.equal(0, c, o)
        local got, params, bytes = losses_of(o), saved(path), bytes_of(o)
        for s = 1, 20 do
          assert.is_true(math.abs(got[s] - want[s]) <= 1e-9 * math.abs(want[s]),
            string.format("%s step %d: %.17g, one rank %.17g", r[2], s, got[s], want[s]))
        end
        for name, t in pairs(want_params) do
          assert.is_true(dt.allclose(params[name], t, {rtol = 1e-9, atol = 1e-12}), r[2] .. ": parameter " .. name)
        end
        local dp = tonumber(r[2]:match("^(%d+)"))
        for k = 0, r[1] - 1 do -- dp shards everything; tp (2x2) shards the matrices once more
          local b = assert(bytes[k], o)
          assert.is_true(b <= full / dp * 1.05 and b >= full / r[1] * 0.9,
                         string.format("%s rank %d: %d bytes of %d", r[2], k, b, full))
        end
      end
    end)

  it("20 steps (float64, dropout on) give one rank's losses and parameters on 1x2, 2x1, 2x2 meshes and under mpirun",
    function()
      local ref_path = os.tmpname()
      local out, rc = launch.run("examples/train_gpt.lua " .. SMALL .. " --save " .. ref_path)
      assert.are.equal(0, rc, out)
      local want, want_params = losses_of(out), saved(ref_path)
      assert.are.equal(20, #want, out)
      assert.is_true(want[20] < want[1] - 0.05, "the loss fell: " .. want[1] .. " -> " .. want[20])
      local runs = {{"-n 2", "1x2"}, {"-n 2", "2x1"}, {"-n 4", "2x2"}}
      local mpirun = launch.mpirun_prefix()
      for _, r in ipairs(runs) do r.run = launch.run end
      if mpirun then runs[#runs + 1] = {"", "2x2", run = function(args) return launch.mrun(4, args) end} end
      for _, r in ipairs(runs) do
        local path = os.tmpname()
        local o, c = r.run(r[1] .. " examples/train_gpt.lua --mesh " .. r[2] .. " " .. SMALL .. " --save " .. path)
        assert.are.equal(0, c, o)
        local got, params = losses_of(o), saved(path)
        for s = 1, 20 do
          assert.is_true(math.abs(got[s] - want[s]) <= 1e-9 * math.abs(want[s]),
            string.format("%s %s step %d: %.17g, one rank %.17g", r[1] == "" and "mpirun" or r[1], r[2], s, got[s], want[s]))
        end
        for name, t in pairs(want_params) do
          assert.is_true(dt.allclose(params[name], t, {rtol = 1e-9, atol = 1e-12}), r[2] .. ": parameter " .. name)
        end
      end
    end)

  it("--compile (the step as one dt.compile graph, the lr a tensor) gives the eager run's losses bitwise on 1x1 and 2x2",
    function()
      for _, r in ipairs {{"-n 1", "1x1"}, {"-n 4", "2x2"}} do
        local args = r[1] .. " examples/train_gpt.lua --mesh " .. r[2] .. " --steps 6 --layers 1 --width 16 --heads 2 " ..
                     "--digits 3 --batch 4 --print-losses"
        local out, rc = launch.run(args)
        assert.are.equal(0, rc, out)
        local out2, rc2 = launch.run(args .. " --compile")
        assert.are.equal(0, rc2, out2)
        local want, got = losses_of(out), losses_of(out2)
        assert.are.equal(6, #got, out2)
        assert.are.same(want, got)
      end
      local out, rc = launch.run("examples/train_gpt.lua --steps 2 --compile --fsdp")
      assert.are_not.equal(0, rc)
      assert.matches("train_gpt: --compile does not take --fsdp", out, 1, true)
    end)

  it("learns to reverse digit sequences (accuracy reported), logs JSON lines and plots the loss", function()
    local log, png = os.tmpname(), os.tmpname() .. ".png"
    local out, rc = launch.run("-n 2 examples/train_gpt.lua --mesh 2x1 --steps 150 --log " .. log .. " --plot " .. png)
    assert.are.equal(0, rc, out)
    local right, n = out:match("accuracy: (%d+) of (%d+) sequences")
    assert.is_truthy(right, out)
    assert.is_true(tonumber(right) >= 0.9 * tonumber(n), "accuracy " .. right .. " of " .. n)
    local lines = dt.utils.read_jsonl(log)
    assert.are.equal(150, #lines)
    assert.are.equal(150, lines[150].step)
    assert.is_true(lines[150].loss < lines[1].loss)
    if os.execute("command -v gnuplot >/dev/null 2>&1") then
      assert.matches("plotted", out, 1, true)
      local f = assert(io.open(png, "rb"))
      assert.are.equal("\137PNG", f:read(4))
      f:close()
    end
    os.remove(log)
    os.remove(png)
  end)

  it("trains with mixed precision: --amp bfloat16, and float16 with loss scaling", function()
    for _, amp in ipairs {"bfloat16", "float16"} do
      local out, rc = launch.run("-n 2 examples/train_gpt.lua --mesh 1x2 --steps 100 --amp " .. amp)
      assert.are.equal(0, rc, out)
      local right, n = out:match("accuracy: (%d+) of (%d+) sequences")
      assert.is_true(tonumber(right) >= 0.9 * tonumber(n), amp .. ": accuracy " .. tostring(right) .. " of " .. tostring(n))
    end
  end)

  it("a checkpoint saved mid-run (--until) and resumed on another mesh continues the same run", function()
    local ck = os.tmpname()
    local A = "--steps 12 --dtype float64 --layers 1 --width 32 --digits 4 --batch 8 --print-losses"
    local out, rc = launch.run("-n 2 examples/train_gpt.lua --mesh 2x1 " .. A)
    assert.are.equal(0, rc, out)
    local whole = losses_of(out)
    out, rc = launch.run("-n 2 examples/train_gpt.lua --mesh 2x1 " .. A .. " --until 6 --save " .. ck)
    assert.are.equal(0, rc, out)
    out, rc = launch.run("-n 4 examples/train_gpt.lua --mesh 2x2 " .. A .. " --resume " .. ck)
    assert.are.equal(0, rc, out)
    assert.matches("resumed from .* at step 7", out)
    local resumed = losses_of(out)
    for s = 7, 12 do
      assert.is_true(math.abs(resumed[s] - whole[s]) <= 1e-9 * math.abs(whole[s]),
        string.format("step %d: resumed %.17g, uninterrupted %.17g", s, resumed[s], whole[s]))
    end
    os.remove(ck)
    out, rc = launch.run("-n 2 examples/train_gpt.lua --mesh 3x1")
    assert.are_not.equal(0, rc)
    assert.matches("--mesh 3x1 does not cover the 2 ranks", out, 1, true)
  end)
end)
