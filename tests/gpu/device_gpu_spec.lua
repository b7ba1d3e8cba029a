-- The CUDA device itself: moves, the caching allocator's stats, synchronize, set_device, the
-- errors of bad device calls, and an asynchronous kernel error reported at the next sync.  Run
-- by tests/gpu/run.sh; without a device it skips with one line.
describe("the CUDA device", function()
  if not dt.cuda.is_available() then
    it("skips: no CUDA device", function() io.write("\ndevice_gpu_spec: no CUDA device: skipped\n") end)
    return
  end

  it("moves tensors there and back, bit for bit, every dtype", function()
    for _, dtype in ipairs {"float32", "float64", "bfloat16", "float16", "int64", "int32", "uint8", "bool"} do
      local x = (dt.arange(24) - 7):view(2, 3, 4):to(dtype)
      local g = x:cuda()
      assert.are.equal("cuda", g.device)
      assert.are.equal(dtype, g.dtype)
      assert.is_true(dt.equal(x, g:cpu()))
      assert.is_true(dt.equal(x:permute(3, 1, 2), g:permute(3, 1, 2):contiguous():cpu()))
      assert.is_true(dt.equal(x, g:to("cpu")))
      assert.are.equal(g, g:cuda())
    end
    local y = dt.arange(6):to({device = "cuda", dtype = "float64"}) -- move and cast in one call
    assert.are.equal("float64", y.dtype)
    assert.are.equal("cuda", y.device)
  end)

  it("casts on the device as the CPU does", function()
    local x = dt.tensor({-2.5, -0.5, 0.5, 1.5, 1e10, 0 / 0, 1 / 0})
    for _, dtype in ipairs {"bfloat16", "float16", "int64", "int32", "uint8", "bool"} do
      assert.is_true(dt.equal(x:to(dtype), x:cuda():to(dtype):cpu()) or dt.allclose(x:to(dtype), x:cuda():to(dtype):cpu(), 0, 0, true), dtype)
    end
  end)

  it("the caching allocator reuses freed blocks and reports them", function()
    dt.cuda.synchronize()
    dt.cuda.empty_cache()
    local s0 = dt.cuda.memory_stats()
    local t = dt.empty(1 << 20):cuda()
    local s1 = dt.cuda.memory_stats()
    assert.is_true(s1.allocated_bytes >= s0.allocated_bytes + 4 * (1 << 20))
    t = nil
    collectgarbage()
    collectgarbage()
    local s2 = dt.cuda.memory_stats()
    assert.is_true(s2.cached_blocks >= 1)
    local u = dt.empty(1 << 20):cuda()
    local s3 = dt.cuda.memory_stats()
    assert.is_true(s3.num_cache_hits > s2.num_cache_hits)
    u = nil
    collectgarbage()
    dt.cuda.empty_cache()
    assert.are.equal(0, dt.cuda.memory_stats().cached_blocks)
  end)

  it("set_device checks its range; synchronize answers", function()
    local n = dt.cuda.device_count()
    assert.has_error(function() dt.cuda.set_device(n) end, string.format("cuda.set_device: device %d is out of range (%d device%s)", n, n, n == 1 and "" or "s"))
    dt.cuda.set_device(0)
    assert.are.equal(0, dt.cuda.current_device())
    dt.cuda.synchronize()
  end)

  it("mixing devices in one op is an error naming both", function()
    local ok, err = pcall(function() return dt.ones(2) + dt.ones(2):cuda() end)
    assert.is_false(ok)
    assert.matches("operands are on different devices", err)
  end)

  it("a tensor that requires grad does not move silently", function()
    local t = dt.ones(2):requires_grad_()
    local ok, err = pcall(t.cuda, t)
    assert.is_false(ok)
    assert.matches("not differentiable yet", err)
  end)

  it("an op without a CUDA kernel says so", function()
    local ok, err = pcall(function() return dt.ones(3):cuda():cumsum(1) end)
    assert.is_false(ok)
    assert.matches("not implemented on device cuda", err)
  end)
end)
