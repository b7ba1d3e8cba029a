-- dt.cuda and moving tensors between devices, where no GPU is present (this machine, and CI):
-- every CUDA entry point answers or fails with an error naming itself and the reason (no CUDA
-- in the build, or no device), never a crash.  With a device present these cases skip (one
-- line says so) and tests/gpu/run.sh checks the device itself.
local S = require "tests.spec.support.spec_helpers"
local fails = S.fails

describe("dt.cuda without a device", function()
  local have_device = dt.cuda.is_available()
  if have_device then
    io.write("\ncuda_spec: a CUDA device is present: the no-device cases skip (tests/gpu/run.sh covers the device)\n")
    return
  end
  local why = dt.cuda.is_built() and "no CUDA device" or "tensors are on cpu in this build"
  local why_call = dt.cuda.is_built() and "no CUDA device is available" or "this build has no CUDA"

  it("answers the questions that need no device", function()
    assert.is_false(dt.cuda.is_available())
    assert.are.equal(0, dt.cuda.device_count())
    assert.are.equal("boolean", type(dt.cuda.is_built()))
  end)

  it("moving a tensor to cuda fails, naming the function and the reason", function()
    local t = dt.arange(6):view(2, 3)
    fails("cuda: device 'cuda' is not available (" .. why, t.cuda, t)
    fails("to: device 'cuda' is not available (" .. why, t.to, t, "cuda")
    fails("to: device 'cuda:0' is not available (" .. why, t.to, t, "cuda:0")
    fails("to: device 'cuda' is not available (" .. why, t.to, t, {device = "cuda", dtype = "float64"})
    -- the tensor is untouched, and cpu is still a no-op
    assert.are.same({{0, 1, 2}, {3, 4, 5}}, t:totable())
    assert.are.equal(t, t:cpu())
    assert.are.equal(t, t:to("cpu"))
    assert.are.equal("cpu", t.device)
  end)

  it("the runtime calls fail with their own names", function()
    fails("cuda.synchronize: " .. why_call, dt.cuda.synchronize)
    fails("cuda.memory_stats: " .. why_call, dt.cuda.memory_stats)
    fails("cuda.empty_cache: " .. why_call, dt.cuda.empty_cache)
    fails("cuda.set_device: " .. why_call, dt.cuda.set_device, 0)
    fails("cuda.current_device: " .. why_call, dt.cuda.current_device)
  end)
end)

describe("dt.cuda arguments", function()
  it("bad arguments name the function", function()
    fails("cuda.set_device: expected a device number (0-based), got string", dt.cuda.set_device, "0")
    fails("cuda.set_device: device -1 is out of range", dt.cuda.set_device, -1)
    fails("cuda.allow_tf32: expected a boolean, got number", dt.cuda.allow_tf32, 1)
    fails("to: unknown device 'cudax'", dt.ones(1).to, dt.ones(1), "cudax")
  end)

  it("allow_tf32 is a switch, off by default", function()
    assert.is_false(dt.cuda.allow_tf32())
    assert.is_true(dt.cuda.allow_tf32(true))
    assert.is_true(dt.cuda.allow_tf32())
    assert.is_false(dt.cuda.allow_tf32(false))
  end)

  it("a DTensor or a tensor that requires grad does not move silently", function()
    if not dt.cuda.is_available() then return end -- without a device the move fails earlier (above)
    local t = dt.ones(2):requires_grad_()
    fails("cuda: moving a tensor that requires grad", t.cuda, t)
  end)
end)

describe("the GPU verification without a GPU", function()
  local H = require "tests.spec.support.launch_helpers"
  local srcdir = os.getenv("srcdir") or "."
  if dt.cuda.is_available() then return end

  it("bench/gpu.lua prints one line saying there is no device", function()
    local out, rc = H.run(H.sh_quote(srcdir .. "/bench/gpu.lua"))
    assert.are.equal(0, rc, out)
    assert.matches("^bench/gpu.lua: no CUDA device, skipped %(", out)
  end)

  it("tests/gpu/run.sh skips with one line and succeeds (no GPU here)", function()
    local out, rc = H.capture("timeout 60 bash " .. H.sh_quote(srcdir .. "/tests/gpu/run.sh"))
    if out:match("^tests/gpu/run.sh: no GPU") then -- this machine: no device node
      assert.are.equal(0, rc, out)
      assert.are.equal(1, select(2, out:gsub("\n", "\n")), "one line: " .. out)
    else -- a device node without a usable device: run.sh says so and fails
      assert.matches("dt.cuda.is_available%(%) is false", out)
    end
  end)

  it("the GPU specs skip with one line each", function()
    local out, rc = H.run(H.sh_quote(srcdir .. "/tests/run_specs.lua") .. " --pattern=_spec " .. H.sh_quote(srcdir .. "/tests/gpu"))
    assert.are.equal(0, rc, out)
    for _, spec in ipairs {"ops_gpu_spec", "rng_gpu_spec", "device_gpu_spec"} do
      assert.matches(spec .. ": no CUDA device: skipped", out, 1, true)
    end
  end)
end)
